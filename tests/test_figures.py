"""Figures live in utils.plots and draw under the kit's style in a context: importing any kit module,
or drawing a figure, leaves matplotlib's backend and the caller's rcParams as they were."""

import inspect
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from utils import plots

# A fresh interpreter: the user picks a backend, then imports every kit module and draws figures.
CHILD = r"""
import importlib, json, pathlib, sys
import matplotlib

def snapshot():
    rc = matplotlib.rcParams
    get = getattr(rc, "_get", lambda k: dict.__getitem__(rc, k))  # 'backend' read, not resolved
    return {k: repr(get(k)) for k in rc}

matplotlib.use("pdf")  # the user's choice (pdf: non-interactive, works headless)
import matplotlib.pyplot as plt
before = snapshot()
names = sorted(p.stem for p in pathlib.Path("utils").glob("*.py") if not p.stem.startswith("__"))
for name in names:
    importlib.import_module(f"utils.{name}")
after_import = snapshot()
from utils import plots
fig = plots.plot_scores({"predict the mean": 1.0, "TF-IDF 1-2 grams + ridge": 0.7}, "RMSE", False)
ax = fig.axes[0]
styled = {"top_spine": ax.spines["top"].get_visible(),
          "grid": any(g.get_visible() for g in ax.get_xgridlines())}
plain = plt.subplots()[1]
unstyled = {"top_spine": plain.spines["top"].get_visible(),
            "grid": any(g.get_visible() for g in plain.get_xgridlines())}
changed = lambda b, a: sorted(k for k in b if b[k] != a.get(k))
print(json.dumps({"modules": names, "backend": matplotlib.get_backend(),
                  "changed_by_import": changed(before, after_import),
                  "changed_by_drawing": changed(before, snapshot()),
                  "styled": styled, "unstyled": unstyled}))
"""


@pytest.mark.versions
def test_importing_kit_modules_and_drawing_leave_backend_and_rcparams_alone():
    # No MPLBACKEND or display: the conditions under which a module might pick a backend itself.
    env = {
        k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "DISPLAY", "WAYLAND_DISPLAY")
    }
    res = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert {"eda", "plots", "train", "kaggle", "wheels"} <= set(out["modules"])
    assert out["backend"] == "pdf"
    assert out["changed_by_import"] == []
    assert out["changed_by_drawing"] == []
    # The kit's figure got STYLE (grid on, no top spine); a plain figure afterwards did not.
    assert out["styled"] == {"top_spine": False, "grid": True}
    assert out["unstyled"] == {"top_spine": True, "grid": False}


def test_every_figure_function_draws_under_the_style():
    not_figures = {"save_fig", "fold_table", "token_weights_html", "styled", "kit_style"}
    public = [
        name
        for name, fn in inspect.getmembers(plots, inspect.isfunction)
        if fn.__module__ == plots.__name__ and not name.startswith("_") and name not in not_figures
    ]
    assert len(public) >= 14, public
    unstyled = [name for name in public if not hasattr(getattr(plots, name), "__wrapped__")]
    assert unstyled == [], f"figure functions without @styled: {unstyled}"


@pytest.mark.versions
def test_run_figures_read_the_run_through_its_home(tiny_csv, tiny_bert, tmp_path):
    """fold_table, learning_curves and oof_scatter read a run's metrics, history and OOF through
    utils.runs: its competition names the columns and the metric; a run saved before metrics.json
    had one vocabulary (cv_rmse, fold_rmse) gives the same table."""
    import matplotlib.pyplot as plt
    import pandas as pd
    import pytest
    from helpers import cfg_for, tiny_data

    from utils import eda, runs
    from utils.competition import load_competition
    from utils.tables import read_table
    from utils.train import run_cv

    run = tmp_path / "a"
    run_cv(cfg_for(tiny_csv, run, tiny_bert, max_steps=2))
    m = runs.read_metrics(run)
    table = plots.fold_table(run)
    assert table["fold"].tolist()[:2] == [0, 1] and table["valid_rmse"].iloc[-1] == m["cv"]
    old = {k: v for k, v in m.items() if k not in ("metric", "cv", "fold_score")}
    runs.write_metrics(run, {**old, "cv_rmse": m["cv"], "fold_rmse": m["fold_score"]})
    pd.testing.assert_frame_equal(plots.fold_table(run), table)
    plt.close(plots.learning_curves(run))
    fig = plots.oof_scatter(run)
    assert fig.axes[0].get_xlabel() == "true target" and "OOF RMSE" in fig.axes[0].get_title()
    plt.close(fig)
    # A baseline of several targets: the target asked for, beside its own prediction column.
    comp = load_competition("feedback-prize-english-language-learning")
    df = read_table(comp, tiny_data(comp.slug, tmp_path / "ell", 20))
    folds = [0, 0, 1, 1] * 5
    eda.write_oof_run(tmp_path / "ell-mean", comp, df, folds, eda.baseline_cv(comp, df, folds)["predict the mean"][1])
    fig = plots.oof_scatter(tmp_path / "ell-mean", "syntax")
    assert fig.axes[0].get_xlabel() == "true syntax"
    plt.close(fig)
    with pytest.raises(ValueError, match="not 'target'"):
        plots.oof_scatter(tmp_path / "ell-mean", "target")
    # Class probabilities have no scatter of a value against its prediction.
    comp = load_competition("nlp-getting-started")
    df = read_table(comp, tiny_data(comp.slug, tmp_path / "tweets", 20))
    eda.write_oof_run(
        tmp_path / "tweets", comp, df, folds, eda.baseline_cv(comp, df, folds)["predict the class shares"][1]
    )
    with pytest.raises(ValueError, match="class probabilities"):
        plots.oof_scatter(tmp_path / "tweets")


def test_a_multilabel_runs_oof_figures_are_probabilities_per_label(tmp_path):
    """A multilabel run's oof.csv (MULTILABEL.oof_frame: each 0/1 label beside prob_<label>) is no
    value against its prediction: notebook 02's oof_scatter of each label draws the predicted
    probability of the rows without the label and of those with it, scored in the run's metric
    (ROC AUC), never called RMSE nor an identity line."""
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    import pytest
    from sklearn.metrics import roc_auc_score

    from utils import ensemble, runs
    from utils.competition import Competition
    from utils.objective import MULTILABEL, objective_of

    labels = ("toxic", "obscene", "threat")
    comp = Competition(slug="jigsaw-toxic-comment-classification-challenge", id_col="id",
                       text_cols=("comment_text",), target_cols=labels, task="multilabel")
    assert objective_of(comp) is MULTILABEL
    rng = np.random.default_rng(0)
    n = 200
    y = (rng.random((n, 3)) < [0.3, 0.1, 0.02]).astype(int)
    prob = np.clip(0.6 * y + rng.uniform(0, 0.5, (n, 3)), 0, 1)  # better than chance, not perfect
    df = pd.DataFrame({"id": [f"c{i}" for i in range(n)], "comment_text": "a comment",
                       **{c: y[:, j] for j, c in enumerate(labels)}})
    folds = np.arange(n) % 4
    frame = MULTILABEL.outputs.oof_frame(df["id"], df, y, prob, list(labels), None, folds)
    run = tmp_path / "multilabel-run"
    runs.write_oof(run, frame)
    runs.write_folds(run, df["id"], folds)
    runs.write_metrics(run, {"competition": comp.to_dict(), "metric": comp.metric_name, "cv": 0.9})
    for j, label in enumerate(labels):  # as notebook 02 loops over the competition's targets
        fig = plots.oof_scatter(run, label)
        ax = fig.axes[0]
        title = ax.get_title()
        assert ax.get_xlabel() == f"OOF P({label} = 1)" and "RMSE" not in title
        assert f"roc_auc {roc_auc_score(y[:, j], prob[:, j]):.3f}" in title
        assert f"prevalence {y[:, j].mean():.1%}" in title
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert legend == [f"{label} = 0 ({(y[:, j] == 0).sum()} rows)", f"{label} = 1 ({y[:, j].sum()} rows)"]
        assert not ax.get_lines()  # no identity line: a probability is not a 0/1 value's estimate
        plt.close(fig)
    fig = plots.oof_scatter(run)  # the first label by default
    assert fig.axes[0].get_xlabel() == "OOF P(toxic = 1)"
    plt.close(fig)
    # Notebook 03's figure of a blend of two such runs: scored by ROC AUC, weights per label.
    other = tmp_path / "other-run"
    runs.write_oof(other, MULTILABEL.outputs.oof_frame(df["id"], df, y, prob[::-1], list(labels), None, folds))
    runs.write_folds(other, df["id"], folds)
    runs.write_metrics(other, {"competition": comp.to_dict(), "metric": comp.metric_name, "cv": 0.5})
    report = ensemble.blend_report([run, other])
    fig = plots.blend_figure(report, None)
    assert fig.axes[0].get_title() == "OOF roc_auc (higher is better)"
    assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == list(labels)
    plt.close(fig)
    with pytest.raises(ValueError, match="not 'insult'"):
        plots.oof_scatter(run, "insult")
