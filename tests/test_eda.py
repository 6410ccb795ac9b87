"""utils.eda on hand-checked text and synthetic excerpts, its figures (utils.plots); the EDA notebook
end to end (60 rows)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from conftest import ROOT, tiny_frame

from utils import eda, plots, runs
from utils.competition import load_competition
from utils.data import make_folds
from utils.ensemble import blend_report

COMMONLIT = load_competition("")  # tiny_frame's columns
MEAN, TFIDF = "predict the mean", "TF-IDF 1-2 grams + ridge"

EASY = "The cat sat on the mat. It was a big cat. We like the cat. The sun is hot."
HARD = (
    "Notwithstanding considerable methodological heterogeneity, contemporary epistemological "
    "investigations consistently demonstrate that institutional frameworks necessitate "
    "comprehensive interdisciplinary deliberation regarding fundamental representational assumptions."
)
# The figures the notebook writes into out_dir (the harness checks these names).
FIGURES = [
    "target_distribution.png",
    "target_vs_standard_error.png",
    "text_stats_vs_target.png",
    "readability_vs_target.png",
    "feature_correlations.png",
    "extremes.png",
    "text_lengths.png",
    "baselines.png",
]


def test_counts_on_a_hand_checked_text():
    s = eda.text_stats("The cat sat on the mat. It was happy!")
    assert s["characters"] == 37
    assert (s["words"], s["sentences"], s["letters"]) == (9, 2, 27)
    assert s["mean_word_length"] == pytest.approx(3.0)
    assert s["mean_sentence_length"] == pytest.approx(4.5)
    assert s["long_word_share"] == 0
    assert s["syllables_per_word"] == pytest.approx(10 / 9)  # textstat: hap-py 2, the rest 1 each
    s = eda.text_stats("Photosynthesis converts energy.")
    assert s["long_word_share"] == pytest.approx(2 / 3)  # energy has 6 letters: not long
    assert s["syllables_per_word"] == pytest.approx((5 + 2 + 3) / 3)


@pytest.mark.parametrize(
    "text,n",
    [
        ("No final stop", 1),
        ("Wait... what?! Yes", 3),
        ('He said "Stop." Then he left.', 2),
        ("It cost 3.50 dollars. Fine.", 2),
        ("  ", 1),
    ],
)
def test_sentence_count(text, n):
    assert eda.sentence_count(text) == n


def test_formulas_are_textstat_and_rank_an_easy_text_easier():
    easy, hard = eda.readability(EASY), eda.readability(HARD)
    assert list(easy) == list(eda.FORMULAS)
    assert easy["flesch_reading_ease"] > hard["flesch_reading_ease"]
    for name in set(easy) - {"flesch_reading_ease"}:  # grade-like: higher = harder
        assert easy[name] < hard[name], name
    import textstat

    assert easy["gunning_fog"] == textstat.gunning_fog(EASY)


@pytest.mark.parametrize("installed", [None, "0.7.12"])
def test_missing_or_other_textstat_is_a_clear_error(monkeypatch, installed):
    def version(name):
        if installed is None:
            raise eda.importlib.metadata.PackageNotFoundError(name)
        return installed

    monkeypatch.setattr(eda.importlib.metadata, "version", version)
    eda.load_textstat.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"pip install textstat==0\.7\.8.*wheels/"):
            eda.readability(EASY)
    finally:
        eda.load_textstat.cache_clear()


def test_text_features_one_row_per_text():
    f = eda.text_features([EASY, HARD, "One."])
    assert len(f) == 3
    assert list(f.columns[: len(eda.STATS)]) == list(eda.STATS)
    assert set(eda.FORMULAS) <= set(f.columns)
    assert np.isfinite(f.to_numpy(dtype=float)).all()


def baselines(df, folds=None) -> dict:
    """{name: (CommonLit RMSE, OOF (N,))} of the mean, TF-IDF and readability baselines."""
    found = {k: (score, oof[:, 0]) for k, (score, oof) in eda.baseline_cv(COMMONLIT, df, folds).items()}
    return {**found, "readability": eda.readability_ridge_cv(COMMONLIT, df, folds)}


def test_baselines_cover_every_row_and_learn_something():
    df = tiny_frame(60)
    found = baselines(df)
    rmse_mean, _ = found[MEAN]
    for name in (TFIDF, "readability"):
        rmse, oof = found[name]
        assert math.isfinite(rmse) and oof.shape == (60,) and np.isfinite(oof).all()
        assert rmse == pytest.approx(np.sqrt(np.mean((oof - df["target"]) ** 2)))
    # The synthetic target is the share of long words: the features must beat the mean.
    assert found["readability"][0] < 0.7 * rmse_mean


def test_baselines_use_the_training_folds():
    df = tiny_frame(60)
    folds = make_folds(df, 5, 42)  # what utils.train makes with folds=5, fold_seed=42
    default, given = baselines(df), baselines(df, folds)
    for name in (MEAN, TFIDF, "readability"):
        assert default[name][1] == pytest.approx(given[name][1]), name
    other = make_folds(df, 5, 7)
    assert not np.allclose(baselines(df, other)[TFIDF][1], given[TFIDF][1])
    # The mean baseline predicts each fold by the mean of the other folds' targets.
    y = df["target"].to_numpy()
    oof = eda.mean_oof(y, folds)
    for k in range(5):
        assert oof[folds == k] == pytest.approx(y[folds != k].mean())


@pytest.mark.parametrize("baseline", ["tfidf", "readability"])
def test_oof_rows_never_see_their_own_target(baseline):
    """Row i is predicted by a model fitted on the other folds: changing the targets of fold k
    changes no prediction in fold k, and does change the others."""
    df = tiny_frame(60)
    folds = make_folds(df, 4, 42)
    if baseline == "tfidf":
        fn, x = eda.tfidf_ridge_oof, df["excerpt"].to_numpy()
    else:
        fn, x = eda.readability_ridge_oof, eda.text_features(df["excerpt"])
    y = df["target"].to_numpy()
    oof = fn(x, y, folds)
    shifted = np.where(folds == 2, y + 5.0, y)
    oof2 = fn(x, shifted, folds)
    assert oof2[folds == 2] == pytest.approx(oof[folds == 2])
    assert not np.allclose(oof2[folds != 2], oof[folds != 2])


def test_baseline_oof_runs_join_a_blend(tmp_path):
    df = tiny_frame(60)
    folds = make_folds(df, 5, 42)
    found = baselines(df, folds)
    for name, key in (("tfidf", TFIDF), ("readability", "readability")):
        written = eda.write_oof_run(tmp_path / name, COMMONLIT, df, folds, found[key][1])
        assert written["cv"] == pytest.approx(found[key][0]) and written["metric"] == "rmse"
    report = blend_report([tmp_path / "tfidf", tmp_path / "readability"])
    assert report["n_rows"] == 60
    assert report["scores"]["tfidf"] == pytest.approx(found[TFIDF][0])
    assert report["score_blend_in_sample"] <= min(report["scores"].values()) + 1e-9


def test_a_baseline_blends_with_a_trained_run_on_its_folds(tmp_path, tiny_csv, tiny_bert):
    """A baseline folder is read as its recorded competition says (not guessed from its
    columns) and joins a blend with a transformer run trained on the same folds."""
    from test_train import cfg_for

    from utils.train import run_cv

    run = tmp_path / "runs" / "attn"
    run_cv(cfg_for(tiny_csv, run, tiny_bert, max_steps=2))
    df = tiny_frame(60)
    folds = runs.read_folds(run).loc[df["id"]].to_numpy()
    score, oof = eda.baseline_cv(COMMONLIT, df, folds)[TFIDF]
    eda.write_oof_run(tmp_path / "runs" / "tfidf-ridge", COMMONLIT, df, folds, oof)
    read = runs.read_oof(tmp_path / "runs" / "tfidf-ridge")
    assert (read.truth, read.preds, read.metric) == (("target",), ("pred",), "rmse")
    assert runs.competition(tmp_path / "runs" / "tfidf-ridge") == runs.competition(run)
    report = blend_report([run, tmp_path / "runs" / "tfidf-ridge"])
    assert report["runs"] == ["attn", "tfidf-ridge"] and report["n_rows"] == 60
    assert report["scores"]["tfidf-ridge"] == pytest.approx(score)


# tiny_data's texts are all alike: the correlation of two constant predictions is undefined
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("slug", ["feedback-prize-english-language-learning", "nlp-getting-started"])
def test_baselines_of_other_shapes_are_runs_their_competition_reads(slug, tmp_path):
    """Several targets or class probabilities: the baseline folder records its competition, so
    utils.runs reads its columns and a blend of two baselines scores as baseline_cv did."""
    from test_competition import tiny_data

    from utils.competition import read_table
    from utils.objective import objective_of

    comp = load_competition(slug)
    df = read_table(comp, tiny_data(slug, tmp_path / "data", 40))
    folds = make_folds(df, 2, 42, comp.target_cols, objective_of(comp).classes)
    found = eda.baseline_cv(comp, df, folds)
    for name, (score, oof) in found.items():
        assert eda.write_oof_run(tmp_path / name, comp, df, folds, oof)["cv"] == pytest.approx(score)
        read = runs.read_oof(tmp_path / name)
        assert read.metric == comp.metric_name and runs.competition(tmp_path / name) == comp
        assert read.arrays()[1] == pytest.approx(oof)  # (N, outputs) as baseline_cv made them
    report = blend_report([tmp_path / name for name in found])
    assert report["scores"] == pytest.approx({name: score for name, (score, _) in found.items()})


def test_plots_return_figures_and_save_fig_writes_png_atomically(tmp_path):
    df = tiny_frame(12)
    df.loc[0, ["target", "standard_error"]] = 0.0  # a reference row
    f = eda.text_features(df["excerpt"])
    figs = {
        "a.png": plots.plot_distributions(df, "target", "standard_error"),
        "b.png": plots.plot_target_vs_se(df, "target", "standard_error"),
        "c.png": plots.plot_stats_vs_target(f, df["target"]),
        "d.png": plots.plot_readability_vs_target(f, df["target"]),
        "e.png": plots.plot_correlations(f, df["target"]),
        "f.png": plots.plot_extremes(df, text_col="excerpt", target_col="target", n=3),
        "g.png": plots.plot_scores({TFIDF: 0.7, MEAN: 1.0}, "RMSE", greater_is_better=False),
    }
    for name, fig in figs.items():
        assert isinstance(fig, plt.Figure)
        plots.save_fig(fig, tmp_path / "sub" / name)
        plt.close(fig)
        data = (tmp_path / "sub" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000, name
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == sorted(
        figs
    )  # no temp files left
    if os.name == "posix":
        umask = os.umask(0)
        os.umask(umask)
        assert (tmp_path / "sub" / "a.png").stat().st_mode & 0o777 == 0o666 & ~umask


def _python3_kernel() -> None:
    """Make sure the `python3` kernel runs this interpreter (install it into sys.prefix if not)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        argv0 = KernelSpecManager().get_kernel_spec("python3").argv[0]
    except NoSuchKernel:
        argv0 = None
    # jupyter_client swaps a bare "python" for sys.executable
    if argv0 in ("python", "python3") or (argv0 and Path(argv0) == Path(sys.executable)):
        return
    cmd = [sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"]
    subprocess.run(cmd, check=True, capture_output=True)


def test_eda_notebook_runs_end_to_end(tmp_path):
    papermill = pytest.importorskip("papermill")
    _python3_kernel()
    data, out = tmp_path / "data", tmp_path / "eda"
    data.mkdir()
    tiny_frame(60).to_csv(data / "train.csv", index=False)
    tiny_frame(7, seed=9).drop(columns=["target", "standard_error"]).to_csv(
        data / "test.csv", index=False
    )
    nb = papermill.execute_notebook(
        str(ROOT / "notebooks" / "01_eda.ipynb"),
        str(tmp_path / "01_eda.out.ipynb"),
        parameters=dict(data_dir=str(data), out_dir=str(out)),
        cwd=str(ROOT / "notebooks"),
        kernel_name="python3",
        language="python",
        progress_bar=False,
    )
    for name in FIGURES:
        assert (out / name).stat().st_size > 5000, name
    baselines = json.loads((out / "baselines.json").read_text())
    assert baselines.pop("metric") == "rmse"
    assert set(baselines) == {"predict the mean", "readability features + ridge", "TF-IDF 1-2 grams + ridge"}
    assert all(math.isfinite(v) and v > 0 for v in baselines.values())
    train = tiny_frame(60)
    expected = eda.baseline_cv(COMMONLIT, train, make_folds(train, 5, 42))[TFIDF][0]
    assert baselines["TF-IDF 1-2 grams + ridge"] == pytest.approx(expected)
    for name in ("tfidf-ridge", "readability-ridge"):  # blendable: the training folds' OOF
        oof = runs.read_oof(out / "baselines" / name).frame
        train = tiny_frame(60)
        assert oof["id"].tolist() == train["id"].tolist()
        assert oof["fold"].tolist() == make_folds(train, 5, 42).tolist()
    text = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "60 rows" in text and "the number every model must beat" in text
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= len(FIGURES)  # each figure is also shown, not only saved


@pytest.mark.parametrize("slug,figures,metric", [
    ("feedback-prize-english-language-learning", ["target_correlations.png"], "mcrmse"),
    ("nlp-getting-started", [], "f1"),
])
def test_eda_notebook_adapts_to_the_task(slug, figures, metric, tmp_path):
    """Several targets: each one's distribution and their correlations; classes: the balance;
    no readability formulas nor standard error; baselines in the competition's metric."""
    papermill = pytest.importorskip("papermill")
    from test_competition import tiny_data

    _python3_kernel()
    data, out = tiny_data(slug, tmp_path / "data", 40), tmp_path / "eda"
    papermill.execute_notebook(
        str(ROOT / "notebooks" / "01_eda.ipynb"), str(tmp_path / "01_eda.out.ipynb"),
        parameters=dict(competition=slug, data_dir=str(data), out_dir=str(out), folds=2),
        cwd=str(ROOT / "notebooks"), kernel_name="python3", language="python", progress_bar=False,
    )
    made = sorted(p.name for p in out.glob("*.png"))
    assert made == sorted(["target_distribution.png", "text_lengths.png", "extremes.png", "baselines.png", *figures])
    baselines = json.loads((out / "baselines.json").read_text())
    assert baselines.pop("metric") == metric and len(baselines) == 2
    assert all(math.isfinite(v) for v in baselines.values())
