"""Figures for the notebooks: learning curves, OOF scatter, attention over words, blends.

Every function returns a matplotlib Figure (or an HTML string); `save_fig` writes it as PNG.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import uuid
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import cm, colors

plt.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3,
                     "axes.spines.top": False, "axes.spines.right": False})


def save_fig(fig, path, dpi: int = 110) -> Path:
    """Write a figure as PNG atomically (temp file + rename); a notebook still shows it after."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its 0600 mode would survive the rename; a plain open keeps the umask's mode.
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    return path


def _folds(run):
    run = Path(run)
    return sorted((p for p in run.glob("fold[0-9]*") if p.is_dir()), key=lambda p: int(p.name[4:]))


def fold_table(run) -> pd.DataFrame:
    """One row per finished fold: best valid score (the checkpoint kept, chosen on these same
    validation rows, so slightly optimistic), the last validation's score, steps, minutes, rows;
    plus the CV row."""
    rows = []
    for folder in _folds(run):
        info = json.loads((folder / "history.json").read_text())
        last = info["history"][-1].get("rmse", np.nan) if info["history"] else np.nan
        rows.append({"fold": info["fold"], "valid_rmse": info["best_score"], "last_rmse": last,
                     "steps": info["steps"], "minutes": info["seconds"] / 60,
                     "n_train": info["n_train"], "n_valid": info["n_valid"]})
    table = pd.DataFrame(rows)
    metrics = json.loads((Path(run) / "metrics.json").read_text())
    if "cv_rmse" in metrics:
        # The last checkpoints' CV over the same rows: RMSE pooled from the folds' squared errors.
        n = table["n_valid"]
        last_cv = float(np.sqrt((n * table["last_rmse"] ** 2).sum() / n.sum()))
        cv = {"fold": "CV (all OOF)", "valid_rmse": metrics["cv_rmse"], "last_rmse": last_cv,
              "steps": table["steps"].sum(), "minutes": table["minutes"].sum(), "n_train": np.nan,
              "n_valid": n.sum()}
        table = pd.concat([table, pd.DataFrame([cv])], ignore_index=True)
    return table


def learning_curves(run):
    """Validation RMSE (solid) and training loss (dashed) against optimizer steps, per fold."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    for folder in _folds(run):
        info = json.loads((folder / "history.json").read_text())
        h = pd.DataFrame(info["history"])
        score = "rmse" if "rmse" in h else "log_loss"
        line = ax1.plot(h["step"], h[score], marker="o", ms=3, label=f"fold {info['fold']}")[0]
        best = h[score].idxmin()
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


def oof_scatter(run, target: str = "target"):
    """Out-of-fold predictions against the truth, coloured by fold, with the identity line."""
    oof = pd.read_csv(Path(run) / "oof.csv")
    fig, ax = plt.subplots(figsize=(6, 6))
    for k, part in oof.groupby("fold"):
        ax.scatter(part[target], part["pred"], s=10, alpha=0.6, label=f"fold {k}")
    lo, hi = oof[[target, "pred"]].min().min(), oof[[target, "pred"]].max().max()
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="perfect")
    rmse = float(np.sqrt(np.mean((oof[target] - oof["pred"]) ** 2)))
    r = float(np.corrcoef(oof[target], oof["pred"])[0, 1])
    ax.set(xlabel=f"true {target}", ylabel="OOF prediction",
           title=f"{Path(run).name}: OOF RMSE {rmse:.3f}, r = {r:.3f}")
    ax.set_aspect("equal")
    ax.legend(loc="upper left")
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


def blend_figure(report: dict, oofs: pd.DataFrame | None = None):
    """RMSE of each run, their 0.5/0.5 average and the fitted blend (in-sample and CV), the weights,
    and (given the OOF frame) one run's predictions against the other's."""
    n = 3 if oofs is not None else 2
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.5))
    labels = [*report["rmse"], "0.5 / 0.5", "blend (in-sample)", "blend (CV)"]
    values = [*report["rmse"].values(), report["rmse_equal_average"],
              report["rmse_blend_in_sample"], report["rmse_blend_cv"]]
    bars = axes[0].bar(range(len(values)), values,
                       color=["tab:blue"] * len(report["rmse"]) + ["tab:gray", "tab:green", "tab:olive"])
    axes[0].bar_label(bars, fmt="%.4f", fontsize=8)
    axes[0].set_xticks(range(len(values)), labels, rotation=20, ha="right")
    lo = min(values)
    axes[0].set_ylim(lo - 0.15 * (max(values) - lo + 1e-3) - 0.005, max(values) + 0.01)
    axes[0].set(title="OOF RMSE (lower is better)", ylabel="RMSE")
    axes[1].bar(report["runs"], report["weights"], color="tab:green")
    axes[1].set(title="Blend weights (non-negative, sum 1)", ylim=(0, 1))
    axes[1].tick_params(axis="x", rotation=20)
    if oofs is not None:
        a, b = report["runs"][:2]
        axes[2].scatter(oofs[a], oofs[b], s=8, alpha=0.5)
        lo, hi = oofs[[a, b]].min().min(), oofs[[a, b]].max().max()
        axes[2].plot([lo, hi], [lo, hi], color="black", lw=1)
        r = report["correlation"][0][1]
        axes[2].set(xlabel=a, ylabel=b, title=f"OOF predictions, r = {r:.4f}")
    fig.tight_layout()
    return fig


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
