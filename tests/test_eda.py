"""utils.eda on hand-checked text and synthetic excerpts; the EDA notebook end to end (60 rows)."""

import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from conftest import ROOT, tiny_frame

from utils import eda

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
    "easiest_hardest_excerpts.png",
    "baselines.png",
]


def test_counts_on_a_hand_checked_text():
    s = eda.text_stats("The cat sat on the mat. It was happy!")
    assert s["characters"] == 37
    assert (s["words"], s["sentences"], s["letters"]) == (9, 2, 27)
    assert s["mean_word_length"] == pytest.approx(3.0)
    assert s["mean_sentence_length"] == pytest.approx(4.5)
    assert s["long_word_share"] == 0
    assert s["syllables_per_word"] == pytest.approx(10 / 9)  # hap-py: 2, the rest 1 each
    s = eda.text_stats("Photosynthesis converts energy.")
    assert s["long_word_share"] == pytest.approx(2 / 3)  # energy has 6 letters: not long
    assert s["syllables"] == 5 + 2 + 3


@pytest.mark.parametrize(
    "word,n",
    [("cat", 1), ("make", 1), ("table", 2), ("see", 1), ("happy", 2), ("a", 1), ("education", 4)],
)
def test_syllable_heuristic(word, n):
    assert eda.syllables(word) == n


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


def _easier(scores_easy: dict, scores_hard: dict) -> None:
    assert scores_easy["flesch_reading_ease"] > scores_hard["flesch_reading_ease"]
    for name in set(scores_easy) - {"flesch_reading_ease"}:  # grade-like: higher = harder
        assert scores_easy[name] < scores_hard[name], name


def test_formulas_rank_an_easy_text_easier_with_textstat_or_kit_counts(monkeypatch):
    _easier(eda.readability(EASY), eda.readability(HARD))
    monkeypatch.setattr(eda, "_textstat", lambda: None)
    assert eda.readability_backend() == "kit counts"
    _easier(eda.readability(EASY), eda.readability(HARD))
    assert set(eda.readability(EASY)) == set(eda.FORMULAS)


def test_textstat_that_fails_offline_falls_back_to_kit_counts(monkeypatch):
    broken = types.ModuleType("textstat")

    def needs_nltk(text):
        raise LookupError("Resource cmudict not found")  # what newer textstat raises offline

    broken.flesch_reading_ease = broken.dale_chall_readability_score = needs_nltk
    monkeypatch.setitem(sys.modules, "textstat", broken)
    eda._textstat.cache_clear()
    try:
        assert eda._textstat() is None
        assert set(eda.readability(EASY)) == set(eda.FORMULAS)
    finally:
        eda._textstat.cache_clear()


def test_text_features_one_row_per_text():
    f = eda.text_features([EASY, HARD, "One."])
    assert len(f) == 3
    assert list(f.columns[: len(eda.STATS)]) == list(eda.STATS)
    assert set(eda.FORMULAS) <= set(f.columns)
    assert np.isfinite(f.to_numpy(dtype=float)).all()


def test_baselines_cover_every_row_and_learn_something():
    df = tiny_frame(60)
    rmse_mean, _ = eda.mean_cv(df)
    for fn in (eda.tfidf_ridge_cv, eda.readability_ridge_cv):
        rmse, oof = fn(df)
        assert math.isfinite(rmse) and oof.shape == (60,) and np.isfinite(oof).all()
        assert rmse == pytest.approx(np.sqrt(np.mean((oof - df["target"]) ** 2)))
    # The synthetic target is the share of long words: the features must beat the mean.
    assert eda.readability_ridge_cv(df)[0] < 0.7 * rmse_mean
    # Same folds and seed, same answer.
    assert eda.tfidf_ridge_cv(df)[1] == pytest.approx(eda.tfidf_ridge_cv(df)[1])


def test_plots_return_figures_and_save_fig_writes_png_atomically(tmp_path):
    df = tiny_frame(12)
    df.loc[0, ["target", "standard_error"]] = 0.0  # a reference row
    f = eda.text_features(df["excerpt"])
    figs = {
        "a.png": eda.plot_distributions(df),
        "b.png": eda.plot_target_vs_se(df),
        "c.png": eda.plot_stats_vs_target(f, df["target"]),
        "d.png": eda.plot_readability_vs_target(f, df["target"]),
        "e.png": eda.plot_correlations(f, df["target"]),
        "f.png": eda.plot_extremes(df, n=3),
        "g.png": eda.plot_baselines({"tfidf_ridge_rmse": 0.7, "predict_mean_rmse": 1.0}),
    }
    for name, fig in figs.items():
        assert isinstance(fig, plt.Figure)
        eda.save_fig(fig, tmp_path / "sub" / name)
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
    assert set(baselines) == {"predict_mean_rmse", "readability_ridge_rmse", "tfidf_ridge_rmse"}
    assert all(math.isfinite(v) and v > 0 for v in baselines.values())
    text = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "60 excerpts" in text and "the number every model must beat" in text
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= len(FIGURES)  # each figure is also shown, not only saved
