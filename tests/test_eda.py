"""utils.eda on hand-checked text and synthetic excerpts, its figures (utils.plots); what the EDA
says and draws for each shape of competition on real data (CommonLit prose, ELL's six targets, the
tweets' two classes, US Patent's three short columns grouped by anchor and scored by Pearson) and on
a synthetic multilabel frame; the EDA notebook end to end on real CommonLit and US Patent rows."""

import dataclasses
import functools
import json
import math
import os
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import cfg_for, effectiveness, init, map_folder, papermill, real_dir, rules_folder, tiny_data
from matplotlib.text import Text

from utils import eda, plots, runs
from utils.competition import Competition, load_competition
from utils.data import make_folds
from utils.ensemble import blend_report
from utils.infer import infer
from utils.metrics import get_metric
from utils.tables import competition_folds, read_table

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


@pytest.mark.versions
def test_a_baseline_blends_with_a_trained_run_on_its_folds(tmp_path, tiny_csv, tiny_bert):
    """A baseline folder is read as its recorded competition says (not guessed from its
    columns) and joins a blend with a transformer run trained on the same folds."""
    from utils.train import run_cv

    run = tmp_path / "runs" / "attn"
    run_cv(cfg_for(tiny_csv, run, tiny_bert, max_steps=2))
    df = tiny_frame(60)
    folds = runs.read_folds(run).loc[df["id"]].to_numpy()
    score, oof = eda.baseline_cv(COMMONLIT, df, folds)[TFIDF]
    eda.write_oof_run(tmp_path / "runs" / "tfidf-ridge", COMMONLIT, df, folds, oof)
    read = runs.read_oof(tmp_path / "runs" / "tfidf-ridge")
    assert (read.truth, read.preds, read.metric) == (("target",), ("pred",), "rmse")
    assert runs.run_competition(tmp_path / "runs" / "tfidf-ridge") == runs.run_competition(run)
    report = blend_report([run, tmp_path / "runs" / "tfidf-ridge"])
    assert report["runs"] == ["attn", "tfidf-ridge"] and report["n_rows"] == 60
    assert report["scores"]["tfidf-ridge"] == pytest.approx(score)


# tiny_data's texts are all alike: the correlation of two constant predictions is undefined
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("slug", ["feedback-prize-english-language-learning", "nlp-getting-started"])
def test_baselines_of_other_shapes_are_runs_their_competition_reads(slug, tmp_path):
    """Several targets or class probabilities: the baseline folder records its competition, so
    utils.runs reads its columns and a blend of two baselines scores as baseline_cv did."""
    from utils.objective import objective_of
    from utils.tables import read_table

    comp = load_competition(slug)
    df = read_table(comp, tiny_data(slug, tmp_path / "data", 40))
    folds = make_folds(df, 2, 42, comp.target_cols, objective_of(comp).classes)
    found = eda.baseline_cv(comp, df, folds)
    for name, (score, oof) in found.items():
        assert eda.write_oof_run(tmp_path / name, comp, df, folds, oof)["cv"] == pytest.approx(score)
        read = runs.read_oof(tmp_path / name)
        assert read.metric == comp.metric_name and runs.run_competition(tmp_path / name) == comp
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


# ----------------------------------------------------------------------------- every shape


PATENT = "us-patent-phrase-to-phrase-matching"
SHAPES = ["commonlit", "feedback-prize-ell", "nlp-getting-started", PATENT, "multilabel"]
ROWS = {"feedback-prize-ell": 800, "nlp-getting-started": 2000}  # a sample: the baselines' time
ML_LABELS = ("toxic", "obscene", "threat")
# What a figure may say of ease: the Flesch formula's own direction, nothing of the target.
FLESCH = eda.LABELS["flesch_reading_ease"]


def patent(data: Path) -> Competition:
    """init's description of the US Patent folder, with the metric its page names."""
    return dataclasses.replace(infer(data)[0], metric="pearson")


def multilabel_frame(n: int = 150) -> pd.DataFrame:
    """Comments with three 0/1 labels, each signalled by its own word: obscene rows are toxic too."""
    rng = np.random.default_rng(0)
    filler = "the a this page edit article talk thanks please source see you".split()
    rows = []
    for i in range(n):
        toxic = rng.random() < 0.4
        obscene, threat = bool(toxic and rng.random() < 0.5), bool(rng.random() < 0.15)
        signal = ["idiot"] * toxic + ["damn"] * obscene + ["kill"] * threat
        rows.append({"id": f"c{i:04d}", "comment_text": " ".join([*rng.choice(filler, 12), *signal]),
                     "toxic": int(toxic), "obscene": int(obscene), "threat": int(threat)})
    return pd.DataFrame(rows)


MULTILABEL = Competition(slug="jigsaw-toxic-comment-classification-challenge", id_col="id",
                         text_cols=("comment_text",), target_cols=ML_LABELS, task="multilabel")


@functools.cache
def shape(which: str) -> tuple:
    """(description, training rows) of one shape: the real files (a sample where ROWS says), or
    the synthetic multilabel frame."""
    if which == "multilabel":
        return MULTILABEL, multilabel_frame()
    data = real_dir(which)
    comp = {"commonlit": load_competition(""),
            "feedback-prize-ell": load_competition("feedback-prize-english-language-learning"),
            "nlp-getting-started": load_competition("nlp-getting-started")}.get(which) or patent(data)
    df = read_table(comp, data)
    if which in ROWS:
        df = df.sample(n=ROWS[which], random_state=0).reset_index(drop=True)
    return comp, df


@functools.cache
def shape_baselines(which: str) -> tuple:
    """(folds, baseline_cv's results) of one shape, on the folds training makes."""
    comp, df = shape(which)
    folds = competition_folds(comp, df, 5, 42)
    return folds, eda.baseline_cv(comp, df, folds)


def figure_text(fig) -> str:
    """Every text a figure shows (titles, axis labels, tick labels, annotations), one per line."""
    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_text())


@pytest.mark.parametrize("which,readable,says", [
    ("commonlit", True, "Prose (median 175 words and 9 sentences per row)"),
    ("feedback-prize-ell", False, "the input is prose"),
    ("nlp-getting-started", False, "the input is 2 columns of short texts, not prose"),
    (PATENT, False, "the input is 3 columns of short phrases, not prose (median 5 words and 1 sentence per "
                    "row; median words per column: anchor 2, target 2, context 1"),
    ("multilabel", False, "the input is short texts, not prose"),
])
def test_readability_only_for_prose_with_one_target(which, readable, says):
    """Prose (50+ words, 3+ sentences per median row) with one continuous target gets the text
    statistics and formulas; phrases, tweets and several targets get one line saying why not."""
    comp, df = shape(which)
    fits, why = eda.readability_plan(comp, df)
    assert fits is readable and says in why and "\n" not in why
    if not readable:
        assert why.startswith("No readability formulas: ")
    if which == "feedback-prize-ell":
        assert "one continuous target, and this competition has 6 targets" in why


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("which", SHAPES)
def test_the_text_blind_constant_beside_tfidf_in_the_metric(which):
    """Every shape gets the constant (the mean, the class shares, each label's prevalence) and
    TF-IDF on the same folds, in its own metric; the constant is one value for every row, so it
    scores exactly what the metric gives a constant."""
    comp, df = shape(which)
    folds, found = shape_baselines(which)
    metric = get_metric(comp.metric_name)
    (constant, (score, oof)), (tfidf, (tfidf_score, tfidf_oof)) = found.items()
    assert oof.shape == tfidf_oof.shape and (oof == oof[0]).all()  # one row, repeated
    truth, _ = eda._truth(comp, df)
    assert score == pytest.approx(metric.honest_score(truth, oof, folds)[0])
    assert tfidf_score == pytest.approx(metric.honest_score(truth, tfidf_oof, folds)[0])
    y = df[list(comp.target_cols)].to_numpy(dtype=float)
    if which == "commonlit":
        assert oof[0, 0] == pytest.approx(y.mean()) and score == pytest.approx(y.std())
    if which == "feedback-prize-ell":
        assert oof[0] == pytest.approx(y.mean(0)) and score == pytest.approx(y.std(0).mean())
    if which == "nlp-getting-started":  # the shares, thresholded for F1: every tweet positive
        p = y.mean()
        assert oof[0] == pytest.approx([1 - p, p]) and score == pytest.approx(2 * p / (1 + p))
    if which == PATENT:  # Pearson of a constant is 0, exactly
        assert score == 0.0 and tfidf_score > 0.1
    if which == "multilabel":  # a probability per label, from a logistic regression each
        assert score == 0.5 and tfidf == "TF-IDF 1-2 grams + logistic regression"
        assert ((tfidf_oof >= 0) & (tfidf_oof <= 1)).all() and tfidf_score > 0.9
    else:
        assert (tfidf_score > score) == metric.greater_is_better  # TF-IDF learns something here
    assert constant == eda.CONSTANT[eda.target_kind(comp)] and tfidf.startswith("TF-IDF 1-2 grams + ")


def test_the_bar_is_the_better_baseline_whichever_it_is():
    """The bar is picked by the metric's direction, never by name: on US Patent scored by RMSE (the
    metric init proposes), predicting the mean beats TF-IDF, and the line says so."""
    comp, df = shape(PATENT)
    folds, found = shape_baselines(PATENT)
    y = df[["score"]].to_numpy(dtype=float)
    rmse = {name: get_metric("rmse").honest_score(y, oof, folds)[0] for name, (_, oof) in found.items()}
    assert rmse["predict the mean"] < rmse["TF-IDF 1-2 grams + ridge"]
    assert eda.bar(rmse, "rmse") == ("predict the mean", pytest.approx(rmse["predict the mean"]))
    line = eda.bar_line(rmse, "rmse")
    assert line.startswith("The bar, the number every model must beat: predict the mean, CV RMSE ")
    assert f"TF-IDF 1-2 grams + ridge {rmse['TF-IDF 1-2 grams + ridge']:.4f}" in line
    assert "ignoring the text beats every baseline that reads it" in line
    # By Pearson (its real metric) the same predictions make TF-IDF the bar.
    assert eda.bar(found, comp.metric_name)[0] == "TF-IDF 1-2 grams + ridge"
    assert eda.bar_line(found, comp.metric_name).startswith(
        "The bar, the number every model must beat: TF-IDF 1-2 grams + ridge, CV Pearson correlation")


@pytest.mark.parametrize("which,files", [
    ("commonlit", ["target_distribution.png", "target_vs_standard_error.png"]),
    ("feedback-prize-ell", ["target_distribution.png", "target_correlations.png"]),
    ("nlp-getting-started", ["target_distribution.png"]),
    (PATENT, ["target_distribution.png"]),
    ("multilabel", ["target_distribution.png", "label_cooccurrence.png"]),
])
def test_target_figures_fit_each_shape_and_never_say_easier(which, files):
    comp, df = shape(which)
    figs = plots.target_figures(df, comp)
    assert list(figs) == files
    texts = {name: figure_text(fig) for name, fig in figs.items()}
    for fig in figs.values():
        plt.close(fig)
    for name, text in texts.items():
        assert not re.search(r"easier|harder|excerpt", text, re.I), (name, text)
    first = texts["target_distribution.png"]
    if which == "nlp-getting-started":
        p = df["target"].mean()
        assert f"({1 - p:.1%})" in first and f"({p:.1%})" in first
    if which == "multilabel":  # each label's count and prevalence, not a histogram of 0s and 1s
        for c in ML_LABELS:
            assert f"{df[c].sum()} ({df[c].mean():.1%})" in first
    if which in ("commonlit", PATENT):
        assert f"{comp.target_cols[0]}: mean" in first


def test_the_readability_figures_name_the_target_not_its_meaning():
    """Drawn against CommonLit's target, the statistics, formulas and correlations say 'target'
    and the sign of r; 'easier' appears only as the Flesch formula's own direction."""
    comp, df = shape("commonlit")
    df = df.head(120)
    f = eda.text_features(df["excerpt"])
    for fig in (plots.plot_stats_vs_target(f, df["target"]), plots.plot_readability_vs_target(f, df["target"]),
                plots.plot_correlations(f, df["target"]), plots.plot_target_vs_se(df, "target", "standard_error"),
                plots.plot_distributions(df, "target", "standard_error")):
        text = figure_text(fig).replace(FLESCH, "")
        plt.close(fig)
        assert "target" in text and not re.search(r"easier|harder|excerpts", text, re.I), text


def test_class_counts_and_baselines_in_the_descriptions_class_order(tmp_path):
    """A description's classes (here the sample submission's: Ineffective, Adequate, Effective) order
    the class counts and the baselines' probability columns, as training orders them."""
    comp = load_competition(init(effectiveness(tmp_path / "fpe", 30)))
    assert comp.classes == ("Ineffective", "Adequate", "Effective")
    df = read_table(comp, tmp_path / "fpe")
    fig = plots.plot_targets(df, comp)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list(comp.classes)
    plt.close(fig)
    assert eda.target_summary(comp, df) == ["discourse_effectiveness: Ineffective 33.3%, Adequate 33.3%, "
                                            "Effective 33.3%"]
    folds = competition_folds(comp, df, 2, 42)
    _, oof = eda.baseline_cv(comp, df, folds)["TF-IDF 1-2 grams + logistic regression"]
    eda.write_oof_run(tmp_path / "run", comp, df, folds, oof)
    assert runs.read_oof(tmp_path / "run").outputs == comp.classes


def test_label_prevalence_and_cooccurrence():
    comp, df = shape("multilabel")
    share = eda.label_cooccurrence(comp, df)
    y = df[list(ML_LABELS)]
    for a in ML_LABELS:
        for b in ML_LABELS:
            assert share.loc[a, b] == pytest.approx((y[a] & y[b]).sum() / y[a].sum())
    assert share.loc["obscene", "toxic"] == 1.0 and share.loc["toxic", "obscene"] < 1.0
    fig = plots.plot_label_cooccurrence(df, comp)
    text = figure_text(fig)
    plt.close(fig)
    assert f"{share.loc['toxic', 'obscene']:.2f}" in text and f"toxic ({y['toxic'].sum()})" in text
    lines = eda.target_summary(comp, df)
    assert lines[0] == "prevalence: " + ", ".join(f"{c} {y[c].mean():.1%}" for c in ML_LABELS)
    assert lines[1].startswith(f"rows with no label: {(y.sum(axis=1) == 0).mean():.1%}")


def test_us_patent_words_per_column_and_rows_per_anchor():
    comp, df = shape(PATENT)
    words = eda.column_words(comp, df)
    assert list(words.columns) == ["anchor", "target", "context"]
    assert words.median().tolist() == [2, 2, 1]
    fig = plots.plot_column_lengths(df, comp)
    assert [ax.get_title() for ax in fig.axes] == [
        f"{c}: median {words[c].median():.0f}, max {words[c].max()}" for c in words.columns]
    plt.close(fig)
    sizes = eda.group_sizes(comp, df)
    assert sizes.sum() == len(df) and len(sizes) == df["anchor"].nunique() == 586
    fig = plots.plot_group_sizes(df, comp)
    assert "586 values of 'anchor'" in fig.axes[0].get_title()
    plt.close(fig)
    assert eda.target_summary(comp, df) == ["score: mean 0.362, sd 0.258, 5 distinct values (0, 0.25, 0.5, 0.75, 1)"]
    with pytest.raises(ValueError, match="grouped by no column"):
        eda.group_sizes(*shape("commonlit"))


@pytest.mark.parametrize("which,title,left", [
    ("commonlit", "the texts with the highest and lowest target", "Highest #1"),
    ("feedback-prize-ell", "the texts with the highest and lowest mean of the 6 targets", "Highest #1"),
    ("nlp-getting-started", "texts of class 1 and of 0", "target = 1 #1"),
    (PATENT, "the texts with the highest and lowest score", "Highest #1"),
    ("multilabel", "the texts with the most labels and with none", "Most labels #1"),
])
def test_texts_to_read_as_each_shape_ranks_them(which, title, left):
    comp, df = shape(which)
    fig = plots.plot_examples(df, comp)
    text = figure_text(fig)
    plt.close(fig)
    assert title in text and left in text
    if which == PATENT:  # each column named, not run together
        assert re.search(r"anchor: .+ · +target: .+ · +context: [A-H]\d\d", text)
    if which == "multilabel":
        assert "No label #1" in text and "no label" in text


def eda_notebook(tmp_path: Path, params: dict):
    """notebooks/01_eda.ipynb executed by papermill into tmp_path; (notebook, what a reader reads:
    the markdown cells and every output's text)."""
    import nbformat

    nb = nbformat.read(papermill("01_eda", tmp_path, params), as_version=4)
    text = "\n".join([c.source for c in nb.cells if c.cell_type == "markdown"]
                     + [o.get("text", "") for c in nb.cells for o in c.get("outputs", [])])
    return nb, text


def test_eda_notebook_runs_end_to_end_on_commonlit(tmp_path):
    data, out = real_dir("commonlit"), tmp_path / "eda"
    nb, text = eda_notebook(tmp_path, dict(data_dir=str(data), out_dir=str(out), max_rows=400))
    for name in FIGURES:
        assert (out / name).stat().st_size > 5000, name
    baselines = json.loads((out / "baselines.json").read_text())
    assert baselines.pop("metric") == "rmse"
    assert set(baselines) == {"predict the mean", "readability features + ridge", "TF-IDF 1-2 grams + ridge"}
    assert all(math.isfinite(v) and v > 0 for v in baselines.values())
    train = read_table(COMMONLIT, data).sample(n=400, random_state=42).reset_index(drop=True)
    folds = competition_folds(COMMONLIT, train, 5, 42)
    expected = eda.baseline_cv(COMMONLIT, train, folds)
    assert baselines["TF-IDF 1-2 grams + ridge"] == pytest.approx(expected[TFIDF][0])
    assert baselines["predict the mean"] == pytest.approx(expected[MEAN][0])
    for name in ("tfidf-ridge", "readability-ridge"):  # blendable: the training folds' OOF
        oof = runs.read_oof(out / "baselines" / name).frame
        assert oof["id"].tolist() == train["id"].tolist() and oof["fold"].tolist() == folds.tolist()
    assert "400 rows" in text and "Prose (median" in text
    assert eda.bar_line(baselines, "rmse") in text  # the best of the three, whichever it is
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= len(FIGURES)  # each figure is also shown, not only saved


def test_eda_notebook_on_us_patent_reads_as_a_phrase_task(tmp_path):
    """Three short columns grouped by anchor, scored by Pearson: words per column and rows per
    anchor, no readability (one line says why), the constant at exactly 0 beside TF-IDF, the bar
    named by its score; not a word of CommonLit's."""
    data, out = real_dir(PATENT), tmp_path / "eda"
    comp = patent(data)
    nb, text = eda_notebook(tmp_path, dict(competition=comp.as_parameter(), data_dir=str(data), out_dir=str(out),
                                         max_rows=3000))
    made = sorted(p.name for p in out.glob("*.png"))
    assert made == sorted(["target_distribution.png", "text_lengths.png", "column_lengths.png", "group_sizes.png",
                           "extremes.png", "baselines.png"])
    baselines = json.loads((out / "baselines.json").read_text())
    assert baselines.pop("metric") == "pearson"
    assert baselines["predict the mean"] == 0.0 and baselines["TF-IDF 1-2 grams + ridge"] > 0.05
    assert list(out.joinpath("baselines").iterdir()) == [out / "baselines" / "tfidf-ridge"]
    assert "No readability formulas: the input is 3 columns of short phrases" in text
    assert re.search(r"anchor: \d+ values, median \d+ rows each", text)
    assert eda.bar_line(baselines, "pearson") in text
    assert not re.search(r"commonlit|easier|harder|excerpt", text, re.I)


@pytest.mark.parametrize("shape", ["joined answers", "rules"])
def test_eda_notebook_on_the_shapes_init_infers_from_2025s_competitions(shape, tmp_path):
    """Answers joined from two columns, answered top 3 (MAP 2025): the most frequent answers,
    overall and per question, scored MAP@3 on the same folds as the bar; a comment judged against
    a rule with a probability sample (Agile Community Rules): ROC AUC, the constant beside TF-IDF."""
    folder = map_folder(tmp_path / "data") if shape == "joined answers" else rules_folder(tmp_path / "data")
    out = tmp_path / "eda"
    nb, text = eda_notebook(tmp_path, dict(competition=init(folder), data_dir=str(folder), out_dir=str(out)))
    baselines = json.loads((out / "baselines.json").read_text())
    metric = baselines.pop("metric")
    if shape == "joined answers":
        assert metric == "map@3"
        assert set(baselines) == {"most frequent answers first", "most frequent answers per 'QuestionText'"}
    else:
        assert metric == "roc_auc" and len(baselines) == 2
    assert all(math.isfinite(v) for v in baselines.values())
    assert eda.bar_line(baselines, metric) in text


@pytest.mark.parametrize("slug,figures,metric", [
    ("feedback-prize-english-language-learning", ["target_correlations.png"], "mcrmse"),
    ("nlp-getting-started", ["column_lengths.png"], "f1"),
    ("multilabel", ["label_cooccurrence.png"], "roc_auc"),
])
def test_eda_notebook_adapts_to_the_task(slug, figures, metric, tmp_path):
    """Several targets: each one's distribution and their correlations; classes: the counts, and
    the words of each text column; several labels: prevalence and co-occurrence; no readability
    formulas nor standard error; baselines in the competition's metric."""
    if slug == "multilabel":
        data, competition = tmp_path / "data", MULTILABEL.as_parameter()
        data.mkdir()
        multilabel_frame().to_csv(data / "train.csv", index=False)
    else:
        data, competition = tiny_data(slug, tmp_path / "data", 40), slug
    out = tmp_path / "eda"
    _, text = eda_notebook(tmp_path, dict(competition=competition, data_dir=str(data), out_dir=str(out), folds=2))
    made = sorted(p.name for p in out.glob("*.png"))
    assert made == sorted(["target_distribution.png", "text_lengths.png", "extremes.png", "baselines.png", *figures])
    baselines = json.loads((out / "baselines.json").read_text())
    assert baselines.pop("metric") == metric and len(baselines) == 2
    assert all(math.isfinite(v) for v in baselines.values())
    assert eda.bar_line(baselines, metric) in text and "No readability formulas" in text


@pytest.mark.parametrize("slug", ["eedi-mining-misconceptions-in-mathematics", "kaggle-llm-science-exam"])
def test_eda_notebook_on_a_ranking_competitions_real_data(slug, tmp_path):
    """A catalogue: its coverage, rows per item and the unseen share per fold; options: the answer's
    share per option and the longest option's; the bar among the baselines that need no model,
    in MAP@k, equal to utils.eda's on the same rows and folds."""
    from utils.competition import BUILTIN

    data, out, comp = real_dir(slug), tmp_path / "eda", BUILTIN[slug]
    nb, text = eda_notebook(tmp_path, dict(competition=slug, data_dir=str(data), out_dir=str(out)))
    made = sorted(p.name for p in out.glob("*.png"))
    assert {"ranking.png", "ranking_lengths.png", "text_lengths.png", "baselines.png"} <= set(made)
    assert "extremes.png" not in made and "target_distribution.png" not in made
    baselines = json.loads((out / "baselines.json").read_text())
    assert baselines.pop("metric") == comp.metric_name
    df = read_table(comp, data)
    folds = competition_folds(comp, df, 5, 42)
    from utils.tables import read_catalogue

    expected = eda.ranking_baselines(comp, df, folds, read_catalogue(comp, data) if comp.catalogue else None)
    assert baselines == pytest.approx(expected)
    assert eda.bar_line(baselines, comp.metric_name) in text
    if comp.catalogue:
        assert "2587 items, 1412 tagged in training (54.6% coverage)" in text and "unseen per fold" in text
        assert 0.1 < baselines["TF-IDF cosine"] < 0.3 and baselines["most often tagged first"] < 0.05
    else:
        assert "the longest option is the answer in" in text
        assert baselines["random order"] == pytest.approx(0.3667, abs=1e-4) and baselines["longest option first"] > 0.4


@pytest.mark.parametrize("slug", ["tweet-sentiment-extraction", "nbme-score-clinical-patient-notes"])
def test_eda_notebook_on_a_span_competitions_real_data(slug, tmp_path, minilm_path):
    """Spans: rows with none, lengths, positions and per-condition figures, the spans a tokenizer
    cannot mark exactly (MiniLM's), texts with their spans marked, and the baselines that need no
    model in the competition's metric, equal to utils.eda's on the same rows and folds."""
    from transformers import AutoTokenizer

    from utils.competition import BUILTIN

    data, out, comp = real_dir(slug), tmp_path / "eda", BUILTIN[slug]
    nb, text = eda_notebook(tmp_path, dict(competition=slug, data_dir=str(data), out_dir=str(out),
                                           tokenizer=minilm_path, max_rows=3000, max_len=128))
    made = sorted(p.name for p in out.glob("*.png"))
    assert {"spans.png", "spans_per_condition.png", "span_examples.png", "text_lengths.png",
            "baselines.png"} <= set(made)
    assert "target_distribution.png" not in made and "extremes.png" not in made
    df = read_table(comp, data).sample(n=3000, random_state=42).reset_index(drop=True)
    facts = eda.span_facts(comp, df, AutoTokenizer.from_pretrained(minilm_path))
    for line in eda.span_lines(comp, facts):
        assert line in text
    baselines = json.loads((out / "baselines.json").read_text())
    assert baselines.pop("metric") == comp.metric_name
    assert baselines == pytest.approx(eda.span_baselines(comp, df, competition_folds(comp, df, 5, 42)))
    if comp.span_count == "one":  # Tweet: the whole tweet scores about 0.59 (Kaggle's figure)
        assert 0.55 < baselines["the whole text"] < 0.63 and facts["none"] < 0.001
    else:  # NBME: about 31% of rows express nothing; the dictionary of the other folds' labels
        assert 0.25 < facts["none"] < 0.37
        assert 0.45 < baselines["the condition's labels on the other folds, found in the text"] < 0.7
