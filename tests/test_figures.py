"""Figures live in utils.plots and draw under the kit's style in a context: importing any kit module,
or drawing a figure, leaves matplotlib's backend and the caller's rcParams as they were."""

import inspect
import json
import os
import subprocess
import sys

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


def test_run_figures_read_the_run_through_its_home(tiny_csv, tiny_bert, tmp_path):
    """fold_table, learning_curves and oof_scatter read a run's metrics, history and OOF through
    utils.runs: its competition names the columns and the metric; a run saved before metrics.json
    had one vocabulary (cv_rmse, fold_rmse) gives the same table."""
    import matplotlib.pyplot as plt
    import pandas as pd
    import pytest
    from test_competition import tiny_data
    from test_train import cfg_for

    from utils import eda, runs
    from utils.competition import load_competition, read_table
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
    eda.write_oof_run(tmp_path / "tweets", comp, df, folds, eda.baseline_cv(comp, df, folds)["predict the most frequent class"][1])
    with pytest.raises(ValueError, match="class probabilities"):
        plots.oof_scatter(tmp_path / "tweets")
