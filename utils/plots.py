"""Every figure of the kit: the EDA's (target, text statistics, readability, extremes, baselines)
and the training notebooks' (learning curves, OOF scatter, attention over words, blends).

Every function returns a matplotlib Figure (or an HTML string or a table); `save_fig` writes it as
PNG. Figures are drawn under the kit's STYLE inside `kit_style()`: importing this module or drawing
a figure never changes matplotlib's backend or the caller's rcParams.
"""

from __future__ import annotations

import contextlib
import functools
import html
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import cm, colors

from . import eda, runs
from .eda import FORMULAS, LABELS, STATS, TEXTSTAT_VERSION, sentence_count, words
from .files import atomic_file, fold_dirs
from .metrics import METRICS, get_metric, rmse
from .objective import objective_of

STYLE = {
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
EASY_COLOR, HARD_COLOR, NEUTRAL_COLOR = "#2a9d8f", "#c8553d", "#3d5a80"


@contextlib.contextmanager
def kit_style():
    """Context: STYLE's rcParams while inside, the caller's values of those keys restored after.

    Not `rc_context`/`plt.style.context`: they restore every rcParam, so in Jupyter, where the
    inline backend loads during the first figure and turns `interactive` on, they would switch it
    back off and the notebook would stop showing later figures.
    """
    saved = {k: plt.rcParams[k] for k in STYLE}
    plt.rcParams.update(STYLE)
    try:
        yield
    finally:
        plt.rcParams.update(saved)


def styled(draw):
    """Decorator: `draw` makes its figure under kit_style()."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with kit_style():
            return draw(*args, **kwargs)

    return wrapper


def save_fig(fig, path, dpi: int = 110) -> Path:
    """Write a figure as PNG atomically (temp file + rename); a notebook still shows it after."""
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return Path(path)


def _run_metric(run) -> tuple[str, bool]:
    """(the score a run's checkpoints were chosen by, whether greater is better): the metric its
    metrics.json names (utils.runs.read_metrics, older runs' too), else its competition's."""
    name = runs.read_metrics(run).get("metric") or runs.run_competition(run).metric_name
    return name, METRICS[name].greater_is_better


def _histories(run) -> list:
    """The run's finished folds' history.json, in fold order (an error when there is none)."""
    fold_dirs(run)  # one line naming the run when it has no finished fold
    return [runs.read_history(run, k) for k in runs.finished_folds(run)]


def fold_table(run) -> pd.DataFrame:
    """One row per finished fold: best valid score in the competition's metric (the checkpoint
    kept, chosen on these same validation rows, so slightly optimistic), the last validation's
    score, steps, minutes, rows; plus the CV row."""
    name, greater = _run_metric(run)
    rows = []
    for info in _histories(run):
        h = pd.DataFrame(info["history"])
        best = (h[name].max() if greater else h[name].min()) if len(h) else np.nan
        last = h[name].iloc[-1] if len(h) else np.nan
        rows.append({"fold": info["fold"], f"valid_{name}": best, f"last_{name}": last,
                     "steps": info["steps"], "minutes": info["seconds"] / 60,
                     "n_train": info["n_train"], "n_valid": info["n_valid"]})
    table = pd.DataFrame(rows)
    cv_value = runs.read_metrics(run).get("cv")
    if cv_value is not None:
        n = table["n_valid"]
        last_cv = get_metric(name).pool(table[f"last_{name}"], n)  # the last checkpoints' CV
        cv = {"fold": "CV (all OOF)", f"valid_{name}": cv_value, f"last_{name}": last_cv,
              "steps": table["steps"].sum(), "minutes": table["minutes"].sum(), "n_train": np.nan,
              "n_valid": n.sum()}
        table = pd.concat([table, pd.DataFrame([cv])], ignore_index=True)
    return table


@styled
def learning_curves(run):
    """Validation score in the competition's metric (solid) and training loss (dashed) against
    optimizer steps, per fold."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    score, greater = _run_metric(run)
    for info in _histories(run):
        h = pd.DataFrame(info["history"])
        line = ax1.plot(h["step"], h[score], marker="o", ms=3, label=f"fold {info['fold']}")[0]
        best = h[score].idxmax() if greater else h[score].idxmin()
        ax1.scatter(h["step"][best], h[score][best], s=80, facecolors="none",
                    edgecolors=line.get_color())
        ax2.plot(h["step"], h["train_loss"], ls="--", color=line.get_color(),
                 label=f"fold {info['fold']}")
    ax1.set(title=f"Validation {score} (circle = kept checkpoint)", xlabel="optimizer step",
            ylabel=score)
    ax2.set(title="Training loss (mean since previous evaluation)", xlabel="optimizer step",
            ylabel="loss")
    ax1.legend()
    ax2.legend()
    fig.suptitle(Path(run).name)
    fig.tight_layout()
    return fig


@styled
def oof_scatter(run, target: str = ""):
    """Out-of-fold predictions of one target (default: the run's first) against the truth, the
    columns those of the run's competition (utils.runs.read_oof; `target` also names the target of
    a baseline folder that records none). A value: a scatter coloured by fold, with the identity
    line, RMSE and r. A 0/1 label predicted as a probability (several labels): the predicted
    probability's histogram for the rows without the label and for those with it, scored in the
    run's metric on that label."""
    oof = runs.read_oof(run, target or "target")
    read = eda.targets_of(oof.objective)
    if not read.scatter:
        raise ValueError(f"{run} predicts class probabilities ({', '.join(oof.preds)}): an OOF "
                         "scatter draws a regression target against its prediction")
    target = target or oof.truth[0]
    if target not in oof.truth:
        raise ValueError(f"{run} predicts {', '.join(oof.truth)}, not {target!r}")
    df, pred = oof.frame, oof.preds[oof.truth.index(target)]
    if read.histogram:  # a probability per 0/1 label
        return _label_histogram(run, df, target, pred, oof.metric)
    fig, ax = plt.subplots(figsize=(6, 6))
    for k, part in df.groupby("fold"):
        ax.scatter(part[target], part[pred], s=10, alpha=0.6, label=f"fold {k}")
    lo, hi = df[[target, pred]].min().min(), df[[target, pred]].max().max()
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="perfect")
    r = float(np.corrcoef(df[target], df[pred])[0, 1])
    ax.set(xlabel=f"true {target}", ylabel="OOF prediction",
           title=f"{Path(run).name}: OOF RMSE {rmse(df[target], df[pred]):.3f}, r = {r:.3f}")
    ax.set_aspect("equal")
    ax.legend(loc="upper left")
    return fig


def _label_histogram(run, df: pd.DataFrame, target: str, pred: str, metric_name: str):
    """The OOF probability of one 0/1 label, split by the truth (oof_scatter of a multilabel run)."""
    metric = get_metric(metric_name)
    y, p = df[target].to_numpy(dtype=float), df[pred].to_numpy(dtype=float)
    score = metric.score(y[:, None], p[:, None]) if not metric.rule else float("nan")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    bins = np.linspace(0, 1, 26)
    for value, color in ((0, "#98c1d9"), (1, HARD_COLOR)):
        part = p[y == value]
        ax.hist(part, bins=bins, color=color, alpha=0.7, edgecolor="white",
                label=f"{target} = {value} ({len(part)} rows)")
    ax.set_yscale("log" if min((y == 0).sum(), (y == 1).sum()) < 0.05 * len(y) else "linear")
    ax.set(xlabel=f"OOF P({target} = 1)", ylabel="rows", xlim=(0, 1),
           title=f"{Path(run).name}: {target}, prevalence {y.mean():.1%}, OOF {metric.name} "
                 f"{score:.3f}")
    ax.legend(frameon=False, loc="upper center")
    return fig


def _color(weight: float, vmax: float):
    return cm.YlOrRd(min(weight / vmax, 1.0) * 0.85) if vmax > 0 else (1, 1, 1, 1)


def token_weights_html(frames, titles=None) -> str:
    """Words highlighted by their attention weight (darker = more weight), one block per text."""
    blocks = []
    for i, df in enumerate(frames):
        vmax = float(df["weight"].max()) if len(df) else 0.0
        spans = []
        for word, w in zip(df["word"], df["weight"]):
            hexcol = colors.to_hex(_color(w, vmax))
            spans.append(f'<span title="{w:.4f}" style="background:{hexcol};padding:1px 2px;'
                         f'border-radius:3px">{html.escape(word)}</span>')
        title = html.escape(titles[i]) if titles else f"text {i}"
        blocks.append(f"<p><b>{title}</b><br>{' '.join(spans)}</p>")
    return "<div style='font-family:sans-serif;line-height:1.9'>" + "".join(blocks) + "</div>"


@styled
def token_weights_figure(frames, titles=None, max_lines: int = 9):
    """The same highlighting as a matplotlib figure (for PNG files): monospace, word-wrapped."""
    fig_width, fontsize = 12.0, 9
    # One x unit = one monospace character (advance 0.6 em): the axes span the figure's width.
    chars = fig_width * 72 * 0.98 / (0.6 * fontsize)
    width = int(chars) - 6
    layouts = []
    for df in frames:
        lines, line, col = [], [], 0
        for word, w in zip(df["word"], df["weight"]):
            if col + len(word) > width and line:
                lines.append(line)
                line, col = [], 0
            line.append((col, word, w))
            col += len(word) + 1
        lines.append(line)
        layouts.append(lines[:max_lines])
    heights = [len(lines) + 1.6 for lines in layouts]
    fig, axes = plt.subplots(len(frames), 1, figsize=(fig_width, 0.26 * sum(heights) + 0.5),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    fig.subplots_adjust(left=0.01, right=0.99, top=1 - 0.35 / fig.get_figheight(), bottom=0.01,
                        hspace=0.05)
    for i, (ax, lines, df) in enumerate(zip(axes[:, 0], layouts, frames)):
        ax.axis("off")
        ax.set_xlim(0, chars)
        ax.set_ylim(len(lines) + 0.5, -1.1)
        vmax = float(df["weight"].max()) if len(df) else 0.0
        ax.text(0, -0.8, titles[i] if titles else f"text {i}", fontsize=10, fontweight="bold")
        for y, line in enumerate(lines):
            for col, word, w in line:
                ax.text(col, y + 0.3, word, family="monospace", fontsize=fontsize,
                        bbox={"facecolor": _color(w, vmax), "edgecolor": "none", "pad": 1.0})
    fig.suptitle("Attention pooling weight per word (darker = more weight)", y=1.0)
    return fig


@styled
def top_words_figure(table: pd.DataFrame, lengths: pd.DataFrame | None = None):
    """Bar chart of the most-weighted words; beside it, relative weight against word length."""
    n = 2 if lengths is not None and len(lengths) else 1
    fig, axes = plt.subplots(1, n, figsize=(6 * n, max(4, 0.3 * len(table))), squeeze=False)
    ax = axes[0, 0]
    ax.barh(table["word"][::-1], table["relative_weight"][::-1], color="tab:red")
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.set(title="Words the attention head weighs most\n(1.0 = equal share, validation texts)",
           xlabel="mean relative weight")
    if n == 2:
        ax = axes[0, 1]
        g = lengths.groupby("word_length")["relative_weight"]
        stats = pd.DataFrame({"mean": g.mean(), "n": g.size()}).query("n >= 5")
        ax.bar(stats.index, stats["mean"], color="tab:orange")
        ax.axhline(1.0, color="black", lw=1, ls="--")
        rho = lengths.attrs.get("spearman", np.nan)
        ax.set(title=f"Relative weight by word length (Spearman {rho:.2f})",
               xlabel="word length (characters)", ylabel="mean relative weight")
    fig.tight_layout()
    return fig


@styled
def blend_figure(report: dict, oofs: pd.DataFrame | None = None):
    """The competition's metric for each member, their equal-weight average and the fitted blend
    (in-sample and CV; none when the blend is the average), the weights (per target when fitted
    per target), and how alike the members are: for two, one's OOF predictions against the
    other's (given the OOF frame of one output); for more, the correlation matrix of their OOF
    predictions."""
    names = report["runs"]
    pair = len(names) == 2 and oofs is not None
    n = 3 if pair or len(names) > 2 else 2
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.5))
    fitted = not report.get("equal")  # an equal-weight blend is the average: no bars of its own
    labels = [*report["scores"], "equal average", *(["blend (in-sample)", "blend (CV)"] if fitted else [])]
    values = [*report["scores"].values(), report["score_equal_average"],
              *([report["score_blend_in_sample"], report["score_blend_cv"]] if fitted else [])]
    colors = ["tab:blue"] * len(report["scores"]) + ["tab:gray", "tab:green", "tab:olive"]
    bars = axes[0].bar(range(len(values)), values, color=colors[:len(values)])
    axes[0].bar_label(bars, fmt="%.4f", fontsize=8)
    axes[0].set_xticks(range(len(values)), labels, rotation=20, ha="right")
    lo = min(values)
    axes[0].set_ylim(lo - 0.15 * (max(values) - lo + 1e-3) - 0.005, max(values) + 0.01)
    better = "higher" if report["greater_is_better"] else "lower"
    metric = report["metric"]
    axes[0].set(title=f"OOF {metric} ({better} is better)", ylabel=metric)
    w = np.asarray(report["weights"], float).reshape(len(names), -1)
    outputs = report.get("outputs") or ["weight"]
    width = 0.8 / w.shape[1]
    for j in range(w.shape[1]):
        axes[1].bar(np.arange(len(names)) + (j - (w.shape[1] - 1) / 2) * width, w[:, j], width,
                    label=outputs[j] if w.shape[1] > 1 else None)
    if w.shape[1] > 1:
        axes[1].legend(fontsize=7, ncol=2)
    axes[1].set_xticks(range(len(names)), names)
    axes[1].set(title=("Blend weights (non-negative, sum 1" + (" per target)" if w.shape[1] > 1 else ")"))
                if fitted else "Blend weights (equal: nothing fitted)",
                ylim=(0, 1))
    axes[1].tick_params(axis="x", rotation=20)
    if pair:
        a, b = names
        axes[2].scatter(oofs[a], oofs[b], s=8, alpha=0.5)
        lo, hi = oofs[[a, b]].min().min(), oofs[[a, b]].max().max()
        axes[2].plot([lo, hi], [lo, hi], color="black", lw=1)
        r = report["correlation"][0][1]
        axes[2].set(xlabel=a, ylabel=b, title=f"OOF predictions, r = {r:.4f}")
    elif len(names) > 2:
        corr = np.asarray(report["correlation"])
        axes[2].imshow(corr, cmap="viridis", vmin=min(corr.min(), 0.9), vmax=1.0)
        axes[2].set_xticks(range(len(names)), names, rotation=30, ha="right")
        axes[2].set_yticks(range(len(names)), names)
        axes[2].grid(False)
        for (i, j), v in np.ndenumerate(corr):
            axes[2].text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=8, color="white")
        axes[2].set(title="Correlation of OOF predictions")
    fig.tight_layout()
    return fig


@styled
def prediction_hist(preds, train_target=None):
    """Distribution of the submission's predictions (and of the training target, if given)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    if train_target is not None:
        ax.hist(train_target, bins=40, density=True, alpha=0.4, label="train target")
    ax.hist(preds, bins=min(40, max(5, len(preds) // 3)), density=True, alpha=0.7,
            label=f"predictions (n={len(preds)})")
    ax.set(title="Submission predictions vs the training target", xlabel="target", ylabel="density")
    ax.legend()
    return fig


@styled
def pseudo_figure(pseudo: pd.DataFrame, output: str, train_target=None, max_std=None):
    """Pseudo-labels from utils.pseudo of one output (a target, or prob_<label>): their values
    (beside the training target, if given) and their spread, how much the teachers' fold models
    disagree (the `max_std` cut, if given)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    bins = min(40, max(5, len(pseudo) // 3))
    if train_target is not None:
        a.hist(train_target, bins=40, density=True, alpha=0.4, color="#98c1d9", label="train target")
    a.hist(pseudo[output], bins=bins, density=True, alpha=0.75, color=NEUTRAL_COLOR,
           label=f"pseudo-labels (n={len(pseudo)})")
    a.set(title=f"Pseudo-labels vs the training target ({output})", xlabel=output, ylabel="density")
    a.legend(frameon=False)
    # The spread --max-std filters on: per fold, over the teachers' fold-k models (zero with one
    # teacher: then the spread over every fold model, which no filter uses).
    per_fold = [c for c in pseudo.columns if str(c).startswith(f"{output}_std_fold")]
    values = pseudo[per_fold].to_numpy().ravel() if per_fold else np.zeros(0)
    if values.size and np.nanmax(values) > 0:
        std, title, unit = pd.Series(values).dropna(), "sd of the fold-k models, per fold", "texts x folds"
    else:
        std, title, unit = pseudo[f"{output}_std"], "sd over every fold model", "texts"
    b.hist(std, bins=bins, color=HARD_COLOR, alpha=0.8, edgecolor="white")
    b.axvline(std.median(), color="black", ls="--", lw=1.2, label=f"median {std.median():.3f}")
    if max_std:
        b.axvline(max_std, color=HARD_COLOR, lw=1.5, label=f"max_std {max_std:g} (above: out of that fold)")
    b.set(title=f"Teacher disagreement: {title}", xlabel="standard deviation", ylabel=unit)
    b.legend(frameon=False)
    return fig


# ----------------------------------------------------------------------------- EDA


def _name(target) -> str:
    """The name of a target given as a Series (else "target")."""
    return str(getattr(target, "name", None) or "target")


def _pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _points(n: int) -> dict:
    """Scatter style: small faint dots for thousands of points, larger solid ones for a few."""
    return dict(s=6, alpha=0.3) if n > 500 else dict(s=18, alpha=0.7)


@styled
def plot_distributions(df: pd.DataFrame, target: str, se_col: str) -> plt.Figure:
    """Histograms of the target and its per-row standard error (`se_col`); rows of standard error 0
    (a reference row) are left out of the second."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    y = df[target]
    a.hist(y, bins=40, color=NEUTRAL_COLOR, alpha=0.85, edgecolor="white")
    a.axvline(y.mean(), color="black", ls="--", lw=1.2, label=f"mean {y.mean():.2f}")
    a.set(
        title=f"{target}: mean {y.mean():.2f}, sd {y.std():.2f} (n = {len(y)})",
        xlabel=target,
        ylabel="rows",
    )
    a.legend(frameon=False)
    se = df.loc[df[se_col] > 0, se_col]
    b.hist(se, bins=40, color="#98c1d9", edgecolor="white")
    b.axvline(se.median(), color="black", ls="--", lw=1.2, label=f"median {se.median():.3f}")
    dropped = int((df[se_col] <= 0).sum())
    note = f"; {dropped} row with se 0 left out" if dropped == 1 else ""
    note = f"; {dropped} rows with se 0 left out" if dropped > 1 else note
    b.set(title=f"standard error of {target}{note}", xlabel=se_col, ylabel="rows")
    b.legend(frameon=False)
    fig.suptitle("Target and label noise", fontsize=14, fontweight="bold")
    return fig


@styled
def plot_target_vs_se(df: pd.DataFrame, target: str, se_col: str, id_col: str = "id") -> plt.Figure:
    """Scatter of the standard error (`se_col`) vs the target, with a quadratic fit: whether some
    targets were judged with more uncertainty than others (rows of standard error 0 left out)."""
    fig, ax = plt.subplots(figsize=(7.5, 5), layout="constrained")
    keep = (df[se_col] > 0).to_numpy()
    x, se = df.loc[keep, target], df.loc[keep, se_col]
    ax.scatter(x, se, color=NEUTRAL_COLOR, edgecolors="none", **_points(len(x)))
    if keep.sum() >= 3:
        coef = np.polyfit(x, se, 2)
        grid = np.linspace(x.min(), x.max(), 100)
        ax.plot(grid, np.polyval(coef, grid), color=HARD_COLOR, lw=2, label="quadratic fit")
        ax.legend(frameon=False, loc="upper center")
    ref = df.loc[~keep]
    if len(ref):
        ids = ", ".join(ref[id_col].astype(str).head(3)) if id_col in ref.columns else ""
        rows = "1 row" if len(ref) == 1 else f"{len(ref)} rows"
        ax.text(
            0.01,
            0.01,
            f"not shown: {rows} of standard error 0" + (f" ({ids})" if ids else ""),
            transform=ax.transAxes,
            fontsize=8.5,
            color="dimgray",
            va="bottom",
        )
    ax.set(
        title=f"Standard error vs {target}",
        xlabel=target,
        ylabel=se_col,
    )
    return fig


@styled
def plot_features_vs_target(
    features: pd.DataFrame, target, columns, title: str, ncols: int = 4
) -> plt.Figure:
    """Grid of feature-vs-target scatters with a least-squares line; Pearson r in each title
    (green: the target rises with the feature, red: it falls). `target`: a named Series (its name
    labels the axis) or an array."""
    columns = [c for c in columns if c in features.columns]
    nrows = -(-len(columns) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4 * ncols, 3.4 * nrows), layout="constrained", squeeze=False
    )
    y = np.asarray(target, dtype=float)
    for ax, col in zip(axes.flat, columns):
        x = features[col].to_numpy(dtype=float)
        r = _pearson(x, y)
        color = EASY_COLOR if r > 0 else HARD_COLOR
        ax.scatter(x, y, color=NEUTRAL_COLOR, edgecolors="none", **_points(len(x)))
        if np.isfinite(r):
            coef = np.polyfit(x, y, 1)
            grid = np.linspace(np.nanmin(x), np.nanmax(x), 50)
            ax.plot(grid, np.polyval(coef, grid), color=color, lw=2)
        ax.set_title(f"{LABELS.get(col, col)}\nr = {r:+.2f}", fontsize=10, color=color)
        ax.set_xlabel(col, fontsize=8, color="dimgray")
    for ax in axes[:, 0]:
        ax.set_ylabel(_name(target))
    for ax in axes.flat[len(columns) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=14, fontweight="bold")
    return fig


@styled
def plot_stats_vs_target(features: pd.DataFrame, target) -> plt.Figure:
    """Length, sentence and word statistics vs target (grid, r in titles)."""
    return plot_features_vs_target(features, target, STATS, f"Text statistics vs {_name(target)}")


@styled
def plot_readability_vs_target(features: pd.DataFrame, target) -> plt.Figure:
    """Classic readability formulas vs target (grid, r in titles)."""
    return plot_features_vs_target(
        features,
        target,
        FORMULAS,
        f"Readability formulas vs {_name(target)} (textstat {TEXTSTAT_VERSION})",
    )


@styled
def plot_correlations(features: pd.DataFrame, target) -> plt.Figure:
    """Horizontal bars: Pearson r of every feature with the target, strongest first."""
    r = pd.Series({c: _pearson(features[c], target) for c in features.columns}).dropna()
    r = r.reindex(r.abs().sort_values().index)
    fig, ax = plt.subplots(figsize=(8, 0.38 * len(r) + 1.4), layout="constrained")
    colors = [EASY_COLOR if v > 0 else HARD_COLOR for v in r]
    ax.barh([LABELS.get(c, c) for c in r.index], r.to_numpy(), color=colors)
    for i, v in enumerate(r):
        ax.text(
            v + (0.02 if v >= 0 else -0.02),
            i,
            f"{v:+.2f}",
            va="center",
            ha="left" if v >= 0 else "right",
            fontsize=9,
        )
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlim(-1.1, 1.1)
    name = _name(target)
    ax.set(
        title=f"Correlation with {name} (green: {name} rises with it, red: falls)",
        xlabel=f"Pearson r with {name}",
    )
    return fig


def _excerpt_block(text: str, chars: int, width: int) -> str:
    text = " ".join(text.split())
    if len(text) > chars:
        text = text[:chars].rsplit(" ", 1)[0] + " …"
    return textwrap.fill(text, width=width)


@styled
def plot_extremes(
    df: pd.DataFrame, *, text_col: str, target_col: str, n: int = 3, chars: int = 900, width: int = 92,
    names=("Highest", "Lowest"), title: str = "",
) -> plt.Figure:
    """The n highest-`target_col` (left) and n lowest (right) texts of `text_col`, wrapped, with
    the target and counts (words; per sentence and per word when a text has several sentences)."""
    order = df.sort_values(target_col, kind="stable")
    n = max(1, min(n, len(df) // 2 or 1))
    columns = [(names[0], order.tail(n).iloc[::-1]), (names[1], order.head(n))]
    return _text_panels(columns, text_col, lambda r: f"{target_col} {r[target_col]:+.2f}",
                        title or f"The texts with the highest and lowest {target_col}", n, chars, width)


def _text_panels(columns, text_col: str, value, title: str, n: int, chars: int = 900,
                 width: int = 92) -> plt.Figure:
    """Two columns of up to n wrapped texts: [(name, rows)], the left green, the right red; each
    text headed by its name, rank, `value(row)` and counts; each row of panels as tall as its
    longest text."""
    columns = [(name, rows.head(n)) for name, rows in columns]
    blocks = [[_excerpt_block(str(t), chars, width) for t in rows[text_col]] for _, rows in columns]
    lines = [max((b[i].count("\n") + 1 for b in blocks if i < len(b)), default=1) for i in range(n)]
    heights = [0.75 + 0.19 * k for k in lines]  # inches: the heading, then the text's lines
    fig, axes = plt.subplots(n, 2, figsize=(17, sum(heights) + 0.7), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for col, ((name, rows), (color, bg)) in enumerate(zip(columns, [(EASY_COLOR, "#e9f5f3"),
                                                                   (HARD_COLOR, "#fbecea")])):
        for i, (_, r) in enumerate(rows.iterrows()):
            ax = axes[i, col]
            ax.set_axis_off()
            text = str(r[text_col])
            ws, n_sent = words(text), sentence_count(text)
            head = "   ".join(x for x in (f"{name} #{i + 1}", value(r), f"{len(ws)} words") if x)
            if n_sent > 1 and ws:
                head += (f" · {len(ws) / n_sent:.0f} words/sentence · "
                         f"{sum(len(w) for w in ws) / len(ws):.1f} letters/word")
            ax.text(0, 1, head, transform=ax.transAxes, va="top", fontsize=10.5, fontweight="bold",
                    color=color, parse_math=False)
            ax.text(0.005, 1 - 0.42 / heights[i], blocks[col][i], transform=ax.transAxes, va="top",
                    fontsize=9, family="DejaVu Serif", parse_math=False, linespacing=1.35,
                    bbox=dict(boxstyle="round,pad=0.6", facecolor=bg, edgecolor=color, lw=1))
        for ax in axes[len(rows) :, col]:
            ax.set_axis_off()
    fig.suptitle(title, fontsize=14, fontweight="bold")
    fig.subplots_adjust(left=0.02, right=0.98, top=1 - 0.55 / fig.get_figheight(), bottom=0.02,
                        wspace=0.08, hspace=0.12)
    return fig


# ----------------------------------------------------------------------------- any competition


@styled
def plot_targets(df: pd.DataFrame, comp) -> plt.Figure:
    """The targets as the competition's objective trains them: each target's distribution
    (values), the class counts in the description's class order (classes), or each 0/1 label's
    prevalence (several labels)."""
    cols, name = list(comp.target_cols), comp.title or comp.slug
    counted = eda.targets_of(objective_of(comp)).counts(comp, df)
    if counted is not None:  # rows per class, or per 0/1 label
        counts, title, xlabel = counted
        fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(counts) + 3), 4), layout="constrained")
        bars = ax.bar([str(c) for c in counts.index], counts.to_numpy(), color=NEUTRAL_COLOR)
        ax.bar_label(bars, labels=[f"{n} ({n / len(df):.1%})" for n in counts], fontsize=9)
        ax.set(title=title, xlabel=xlabel, ylabel="rows")
        if len(counts) > 4:
            ax.tick_params(axis="x", rotation=20)
        return fig
    ncols = min(3, len(cols))
    nrows = -(-len(cols) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows), squeeze=False, layout="constrained")
    for ax, col in zip(axes.ravel(), cols):
        y = df[col].astype(float)
        values = np.unique(y)
        few = 1 < len(values) <= 20  # integer scores: a bar per value
        bins = np.append(values, values[-1] + 1) - 0.5 * np.min(np.diff(values)) if few else 40
        ax.hist(y, bins=bins, color=NEUTRAL_COLOR, alpha=0.85, edgecolor="white")
        ax.axvline(y.mean(), color="black", ls="--", lw=1.2)
        ax.set(title=f"{col}: mean {y.mean():.2f}, sd {y.std():.2f}", xlabel=col, ylabel="rows")
    for ax in axes.ravel()[len(cols):]:
        ax.set_axis_off()
    fig.suptitle(f"{name}: the target{'s' if len(cols) > 1 else ''} (n = {len(df)})",
                 fontsize=14, fontweight="bold")
    return fig


@styled
def target_figures(df: pd.DataFrame, comp) -> dict:
    """{PNG file name: figure} of the targets, as fit the competition's shape: one continuous
    target with a per-row standard error column: both distributions and one against the other;
    else plot_targets; several targets: their correlations; several 0/1 labels: their
    co-occurrence."""
    cols, read = list(comp.target_cols), eda.targets_of(objective_of(comp))
    se = comp.standard_error_col
    if se and se in df.columns and comp.continuous and len(cols) == 1:
        return {"target_distribution.png": plot_distributions(df, cols[0], se),
                "target_vs_standard_error.png": plot_target_vs_se(df, cols[0], se, comp.id_col)}
    figs = {"target_distribution.png": plot_targets(df, comp)}
    if read.correlations and len(cols) > 1:
        figs["target_correlations.png"] = plot_target_correlations(df, comp)
    if read.cooccurrence:
        figs["label_cooccurrence.png"] = plot_label_cooccurrence(df, comp)
    return figs


@styled
def plot_label_cooccurrence(df: pd.DataFrame, comp) -> plt.Figure:
    """Several 0/1 labels: of the rows with the label of a row, the share that also has the label
    of a column (eda.label_cooccurrence); labels that come together are learnt together."""
    share = eda.label_cooccurrence(comp, df)
    cols = list(share.columns)
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 3, 1.0 * len(cols) + 2), layout="constrained")
    ax.imshow(share.to_numpy(dtype=float), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(cols)), [f"{c} ({int(df[c].sum())})" for c in cols])
    ax.grid(False)
    for (i, j), v in np.ndenumerate(share.to_numpy(dtype=float)):
        ax.text(j, i, "-" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=9,
                color="white" if np.isnan(v) or v < 0.6 else "black")
    ax.set(title=f"{comp.title or comp.slug}: of the rows with the row's label,\nthe share that also has "
           "the column's", xlabel="also labelled", ylabel="rows labelled (count)")
    return fig


@styled
def plot_column_lengths(df: pd.DataFrame, comp) -> plt.Figure:
    """Words in each text column of a several-column input, one histogram per column."""
    lengths = eda.column_words(comp, df)
    cols = list(lengths.columns)
    fig, axes = plt.subplots(1, len(cols), figsize=(4.2 * len(cols), 3.6), squeeze=False, layout="constrained")
    for ax, col in zip(axes[0], cols):
        n = lengths[col]
        bins = np.arange(n.min(), n.max() + 2) - 0.5 if n.max() - n.min() <= 40 else 40
        ax.hist(n, bins=bins, color=NEUTRAL_COLOR, alpha=0.85, edgecolor="white")
        ax.set(title=f"{col}: median {n.median():.0f}, max {n.max()}", xlabel="words", ylabel="rows")
    fig.suptitle(f"{comp.title or comp.slug}: words per input column ({comp.input_description})",
                 fontsize=13, fontweight="bold")
    return fig


@styled
def plot_group_sizes(df: pd.DataFrame, comp) -> plt.Figure:
    """Rows per value of the column the folds group by: each value's rows stay in one fold, so a
    few large groups make uneven folds."""
    sizes = eda.group_sizes(comp, df)
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    ax.hist(sizes.to_numpy(), bins=min(40, max(5, sizes.nunique())), color=NEUTRAL_COLOR, alpha=0.85,
            edgecolor="white")
    ax.axvline(sizes.median(), color="black", ls="--", lw=1.2, label=f"median {sizes.median():.0f} rows")
    ax.legend(frameon=False)
    ax.set(title=f"{comp.title or comp.slug}: {len(sizes)} values of {comp.group_col!r}, "
           f"{sizes.min()} to {sizes.max()} rows each\n(folds keep each value's rows together)",
           xlabel=f"rows per {comp.group_col}", ylabel=f"{comp.group_col} values")
    return fig


@styled
def plot_examples(df: pd.DataFrame, comp, n: int = 3) -> plt.Figure:
    """Texts to read, as the competition's targets rank them: the highest and lowest target (or
    mean of the targets), rows of the last and the first class in the description's order, or
    rows with the most labels and with none. Several text columns (no template) are shown as
    `column: text`."""
    if len(comp.text_cols) > 1 and not comp.text_template:
        parts = [df[c].fillna("").astype(str).radd(f"{c}: ") for c in comp.text_cols]
        text = parts[0].str.cat(parts[1:], sep="   ·   ").to_numpy()
    else:
        text = eda.plain_texts(comp.input_texts(df))
    n = max(1, min(n, len(df) // 2 or 1))
    columns, value, title = eda.targets_of(objective_of(comp)).examples(comp, df.assign(_text=text), n)
    return _text_panels(columns, "_text", value, title, n)


@styled
def plot_target_correlations(df: pd.DataFrame, comp) -> plt.Figure:
    """Pearson correlations between the targets: highly correlated scores share most of what a
    model learns (one head predicting all of them is no loss)."""
    cols = list(comp.target_cols)
    corr = df[cols].astype(float).corr().to_numpy()
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 3, 1.0 * len(cols) + 2), layout="constrained")
    ax.imshow(corr, cmap="viridis", vmin=min(0.0, corr.min()), vmax=1.0)
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(cols)), cols)
    ax.grid(False)
    for (i, j), v in np.ndenumerate(corr):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=9, color="white")
    ax.set(title=f"{comp.title or comp.slug}: correlation of the targets")
    return fig


@styled
def plot_lengths(lengths, max_len: int, unit: str = "tokens", title: str = "") -> plt.Figure:
    """Text lengths against max_len: the share of texts the model sees only in part."""
    lengths = np.asarray(lengths)
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    ax.hist(lengths, bins=50, color=NEUTRAL_COLOR, alpha=0.85, edgecolor="white")
    if unit == "tokens":  # max_len counts tokens: words would understate what is cut
        over = float(np.mean(lengths > max_len))
        ax.axvline(max_len, color=HARD_COLOR, lw=2, label=f"max_len {max_len}: {over:.1%} of texts are longer")
        ax.legend(frameon=False)
    ax.set(title=title or f"Input length in {unit}: median {np.median(lengths):.0f}, "
           f"95th percentile {np.percentile(lengths, 95):.0f}", xlabel=unit, ylabel="texts")
    return fig


@styled
def plot_scores(scores: dict, metric: str, greater_is_better: bool, title: str = "") -> plt.Figure:
    """Horizontal bars of a CV score per model, best at the top and highlighted: the bar."""
    items = sorted(scores.items(), key=lambda kv: kv[1] if greater_is_better else -kv[1])
    names, values = [k for k, _ in items], [float(v) for _, v in items]
    fig, ax = plt.subplots(figsize=(8, 0.7 * len(items) + 1.5), layout="constrained")
    best = max(values) if greater_is_better else min(values)
    ax.barh(names, values, color=[EASY_COLOR if v == best else "#98c1d9" for v in values])
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.4f}" + ("  ← the bar" if v == best else ""), va="center", fontsize=10)
    lo, hi = min(0.0, min(values)), max(0.0, max(values))
    ax.set_xlim(lo - 0.05 * (hi - lo) * (lo < 0), hi + 0.35 * (hi - lo or 1.0))
    better = "higher" if greater_is_better else "lower"
    ax.set(title=title or f"Baselines: cross-validated {metric} ({better} is better)", xlabel=metric)
    return fig


@styled
def ranking_figures(comp, facts: dict) -> dict:
    """{PNG file name: figure} of a ranking competition's training rows (utils.eda.ranking_facts):
    a catalogue's rows per tagged item and unseen share per fold, beside the lengths of queries
    and items; options' answer shares beside the lengths of prompts and options."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    if "items" in facts:
        r = facts["rows_per_item"]
        a.hist(r, bins=np.arange(1, r.max() + 2) - 0.5, color=NEUTRAL_COLOR, edgecolor="white")
        a.set(yscale="log", xlabel="training rows per tagged item", ylabel="items",
              title=f"{facts['tagged']} of {facts['items']} items tagged ({facts['coverage']:.0%}); "
                    f"{facts['once']:.0%} of them once")
        folds = facts["unseen_per_fold"]
        b.bar([f"fold {k}" for k in folds], list(folds.values()), color="#98c1d9")
        b.set(ylabel="share of validation rows", ylim=(0, 1),
              title="validation rows whose item no other fold holds (unseen)")
        lengths = {"queries": facts["query_words"], "items": facts["item_words"]}
    else:
        share = facts["answer_share"]
        a.bar(list(share), list(share.values()), color="#98c1d9")
        a.axhline(1 / len(share), color="black", ls="--", lw=1, label="chance")
        a.legend(frameon=False)
        a.set(ylabel="share of rows", title="the answer, per option")
        b.axis("off")
        lengths = {"prompts": facts["query_words"], "options": facts["option_words"]}
    figs = {"ranking.png": fig}
    fig2, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    for (name, w), color in zip(lengths.items(), (NEUTRAL_COLOR, EASY_COLOR)):
        ax.hist(w, bins=40, alpha=0.6, color=color, label=f"{name} (median {np.median(w):.0f})")
    ax.legend(frameon=False)
    ax.set(xlabel="words", ylabel="count", title=f"{comp.title or comp.slug}: lengths")
    figs["ranking_lengths.png"] = fig2
    return figs


@styled
def span_figures(comp, facts: dict) -> dict:
    """{PNG file name: figure} of a span competition's training rows (utils.eda.span_facts): span
    lengths in words and where spans start in their text; the share of rows with no span and the
    median span per condition value (Tweet's sentiment, NBME's most frequent features)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    w = facts["span_words"]
    a.hist(w, bins=np.arange(0, min(w.max(), 60) + 2) - 0.5 if len(w) else 10, color=NEUTRAL_COLOR,
           edgecolor="white")
    a.set(xlabel="words in a span", ylabel="spans", title=f"{len(w)} spans; {facts['none']:.0%} of rows have none")
    b.hist(facts["span_start"], bins=20, range=(0, 1), color=EASY_COLOR, edgecolor="white")
    b.set(xlabel="where the span starts (share of its text before it)", ylabel="spans", title="span positions")
    figs = {"spans.png": fig}
    per = facts.get("per_condition") or {}
    if len(per) > 1:
        fig2, ax = plt.subplots(figsize=(10, 0.45 * len(per) + 1.2), layout="constrained")
        names = list(per)[::-1]
        ax.barh(names, [per[n]["none"] for n in names], color=HARD_COLOR, label="rows with no span")
        for y, n in enumerate(names):
            ax.text(per[n]["none"] + 0.01, y, f"{per[n]['rows']} rows, median span {per[n]['median_span_words']:.0f} "
                    "words", va="center", fontsize=8)
        ax.set(xlim=(0, 1.4), xlabel="share of rows with no span", title=f"per {comp.text_cols[0]}")
        figs["spans_per_condition.png"] = fig2
    return figs


SPAN_COLORS = {"true": "#b7e4c7", "predicted": "#ffb4a2", "both": "#90caf9"}


def _span_marks(n: int, true_spans, pred_spans) -> np.ndarray:
    """Per character: 0 outside, 1 true only, 2 predicted only, 3 both."""
    marks = np.zeros(n, dtype=int)
    for spans, bit in ((true_spans, 1), (pred_spans, 2)):
        for s, e in spans:
            marks[max(0, s):min(n, e)] |= bit
    return marks


@styled
def spans_figure(rows, titles=None, max_lines: int = 8, title: str = "True and predicted spans"):
    """Texts with their true and predicted spans highlighted (green: true only, red: predicted
    only, blue: both): the span tasks' counterpart of the attention-weight figure. `rows`: (text,
    true spans, predicted spans), spans as utils.spans' (start, end) offsets."""
    fill = {1: SPAN_COLORS["true"], 2: SPAN_COLORS["predicted"], 3: SPAN_COLORS["both"]}
    fig_width, fontsize = 12.0, 9
    chars = fig_width * 72 * 0.98 / (0.6 * fontsize)  # one x unit = one monospace character
    width = int(chars) - 4
    layouts = []
    for text, true_spans, pred_spans in rows:
        marks, lines, start = _span_marks(len(text), true_spans, pred_spans), [], 0
        flat = text.replace("\r", " ").replace("\n", " ").replace("\t", " ")
        while start < len(flat) and len(lines) < max_lines:
            end = min(len(flat), start + width)
            if end < len(flat) and " " in flat[start:end]:  # wrap at a space
                end = start + flat[start:end].rindex(" ") + 1
            lines.append([(flat[i:j], int(marks[i])) for i, j in _runs(marks, start, end)])
            start = end
        layouts.append(lines or [[("", 0)]])
    heights = [len(lines) + 1.6 for lines in layouts]
    fig, axes = plt.subplots(len(rows), 1, figsize=(fig_width, 0.26 * sum(heights) + 0.8),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    fig.subplots_adjust(left=0.01, right=0.99, top=1 - 0.6 / fig.get_figheight(), bottom=0.01, hspace=0.05)
    for i, (ax, lines) in enumerate(zip(axes[:, 0], layouts)):
        ax.axis("off")
        ax.set_xlim(0, chars)
        ax.set_ylim(len(lines) + 0.5, -1.1)
        ax.text(0, -0.8, titles[i] if titles else f"text {i}", fontsize=10, fontweight="bold")
        for y, line in enumerate(lines):
            col = 0
            for piece, mark in line:
                box = {"facecolor": fill[mark], "edgecolor": "none", "pad": 1.0} if mark else None
                ax.text(col, y + 0.3, piece, family="monospace", fontsize=fontsize, bbox=box)
                col += len(piece)
    if any(p for _, _, p in rows):  # a legend where there are predictions to tell from the truth
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in SPAN_COLORS.values()]
        fig.legend(handles, list(SPAN_COLORS), loc="upper right", ncol=3, frameon=False)
    fig.suptitle(title, x=0.02, ha="left")
    return fig


@styled
def span_examples(df: pd.DataFrame, comp, n: int = 2):
    """Texts with their labelled spans marked (spans_figure): `n` rows per condition value (Tweet's
    sentiments; NBME's first features), rows with a span first, one with none where there is."""
    from .objective import objective_of  # plots stays light: only when a span figure is drawn

    obj = objective_of(comp)
    cond = df[comp.text_cols[0]].astype(str) if comp.text_pair else pd.Series("", index=df.index)
    picked = []
    for c in cond.drop_duplicates().head(3):
        rows = df[cond == c]
        answers = [obj.answer(a) for a in rows[comp.target_cols[0]]]
        has = [i for i, (t, a) in enumerate(zip(rows[comp.span_col], answers)) if obj.spans_of(str(t), a)]
        none = [i for i in range(len(rows)) if i not in has]
        picked += [(rows.iloc[i], answers[i], c) for i in (has[:n] + none[:1])[:n + 1]]
    items = [(str(r[comp.span_col]), obj.spans_of(str(r[comp.span_col]), a), ()) for r, a, _ in picked]
    titles = [f"{comp.id_col} {r[comp.id_col]}" + (f" | {comp.text_cols[0]}: {c}" if c else "") for r, _, c in picked]
    return spans_figure(items, titles, title="Labelled spans")


@styled
def span_predictions(oof, df: pd.DataFrame, comp, n: int = 4, fold: int = 0):
    """A run's out-of-fold answers on its texts (utils.runs.read_oof's `oof`; `df` the training rows
    as the kit reads them): fold `fold`'s first `n` rows with a true or a predicted span, both
    marked (spans_figure), each titled with its condition and its own score."""
    from .metrics import get_metric  # plots stays light: only when a span figure is drawn

    obj, metric = oof.objective, get_metric(comp.metric_name)
    rows = oof.frame[oof.frame["fold"] == fold]
    texts = df.set_index(df[comp.id_col].astype(str))
    truth, pred = obj.outputs.oof_arrays(rows, list(oof.truth))
    items, titles = [], []
    for i, t, p in zip(rows["id"].astype(str), truth, pred):
        text = str(texts.loc[i, comp.span_col])
        true_spans, pred_spans = obj.spans_of(text, t), obj.spans_of(text, p)
        if not (true_spans or pred_spans):
            continue
        cond = f" | {comp.text_cols[0]}: {texts.loc[i, comp.text_cols[0]]}" if comp.text_pair else ""
        items.append((text, true_spans, pred_spans))
        titles.append(f"{comp.id_col} {i}{cond} | {metric.name} {metric.score([t], [p]):.2f}")
        if len(items) == n:
            break
    return spans_figure(items, titles, title=f"Fold {fold}'s validation rows: true and predicted spans")


def _runs(marks: np.ndarray, start: int, end: int) -> list:
    """[(i, j)] pieces of [start, end) over which `marks` is constant."""
    out, i = [], start
    for j in range(start + 1, end + 1):
        if j == end or marks[j] != marks[i]:
            out.append((i, j))
            i = j
    return out
