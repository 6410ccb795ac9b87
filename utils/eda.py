"""Exploratory analysis: text statistics, readability formulas, classic baselines and EDA figures.

Counts and formulas are the kit's own (regex words, a vowel-group syllable heuristic); the formulas
come from `textstat` 0.7.8 when it is importable and works offline (newer versions fetch NLTK data,
which fails without internet), else from those counts. Every plot function returns a Figure.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
import textwrap

import matplotlib
import numpy as np
import pandas as pd

# Scripts and tests on a headless machine get Agg; notebooks and desktops keep their own backend.
if (
    sys.platform.startswith("linux")
    and not os.environ.get("MPLBACKEND")
    and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    and "ipykernel" not in sys.modules
):
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from .plots import save_fig  # noqa: E402,F401  (re-exported for the EDA notebook)

WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’\-][A-Za-z0-9]+)*")
# A sentence ends at . ! ? (runs such as "?!" or "..." count once), optionally followed by a quote.
SENTENCE_END_RE = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
VOWEL_GROUP_RE = re.compile(r"[aeiouy]+")
LONG_WORD = 7  # letters; LIX counts words of more than 6 letters as long
STATS = (
    "characters",
    "words",
    "sentences",
    "mean_word_length",
    "mean_sentence_length",
    "long_word_share",
    "syllables_per_word",
)
FORMULAS = (
    "flesch_reading_ease",
    "flesch_kincaid_grade",
    "gunning_fog",
    "smog_index",
    "coleman_liau_index",
    "automated_readability_index",
    "lix",
)
# Only with textstat: it needs the Dale-Chall list of 3,000 familiar words.
OPTIONAL_FORMULAS = ("dale_chall_readability_score",)
LABELS = {
    "characters": "characters",
    "words": "words",
    "sentences": "sentences",
    "mean_word_length": "letters per word",
    "mean_sentence_length": "words per sentence",
    "long_word_share": f"share of words with ≥ {LONG_WORD} letters",
    "syllables_per_word": "syllables per word",
    "flesch_reading_ease": "Flesch reading ease (higher = easier)",
    "flesch_kincaid_grade": "Flesch-Kincaid grade",
    "gunning_fog": "Gunning fog index",
    "smog_index": "SMOG index",
    "coleman_liau_index": "Coleman-Liau index",
    "automated_readability_index": "automated readability index",
    "lix": "LIX",
    "dale_chall_readability_score": "Dale-Chall score",
    "predict_mean_rmse": "predict the mean",
    "readability_ridge_rmse": "readability features + ridge",
    "tfidf_ridge_rmse": "TF-IDF 1-2 grams + ridge",
}
EASY_COLOR, HARD_COLOR, NEUTRAL_COLOR = "#2a9d8f", "#c8553d", "#3d5a80"


def words(text: str) -> list:
    """Words of `text`: runs of letters/digits, keeping inner apostrophes and hyphens."""
    return WORD_RE.findall(text)


def sentence_count(text: str) -> int:
    """Sentences in `text`: terminal punctuation runs, plus a last one without it; at least 1."""
    ends = [m.end() for m in SENTENCE_END_RE.finditer(text)]
    n = len(ends)
    tail = text[ends[-1] :] if ends else text
    return max(1, n + (1 if WORD_RE.search(tail) else 0))


def syllables(word: str) -> int:
    """Syllables of one word by vowel groups, minus a silent final 'e' (not '-le'); at least 1."""
    w = word.lower()
    n = len(VOWEL_GROUP_RE.findall(w))
    if n > 1 and w.endswith("e") and not w.endswith(("le", "ee", "ye")):
        n -= 1
    return max(1, n)


def text_stats(text: str) -> dict:
    """Counts for one excerpt: the STATS keys plus letters, long, complex (≥3 syllables) words."""
    ws = words(text)
    n_words = max(1, len(ws))
    sylls = [syllables(w) for w in ws] or [1]
    letters = sum(sum(c.isalnum() for c in w) for w in ws)
    n_sent = sentence_count(text)
    return {
        "characters": len(text.strip()),
        "words": len(ws),
        "sentences": n_sent,
        "mean_word_length": letters / n_words,
        "mean_sentence_length": len(ws) / n_sent,
        "long_word_share": sum(len(w) >= LONG_WORD for w in ws) / n_words,
        "syllables_per_word": sum(sylls) / n_words,
        "letters": letters,
        "complex_words": sum(s >= 3 for s in sylls),
        "long_words": sum(len(w) >= LONG_WORD for w in ws),
        "syllables": sum(sylls),
    }


def formulas_from_stats(s: dict) -> dict:
    """The FORMULAS from `text_stats` counts (textbook coefficients)."""
    w, n_sent = max(1, s["words"]), s["sentences"]
    wps, spw = w / n_sent, s["syllables"] / w
    return {
        "flesch_reading_ease": 206.835 - 1.015 * wps - 84.6 * spw,
        "flesch_kincaid_grade": 0.39 * wps + 11.8 * spw - 15.59,
        "gunning_fog": 0.4 * (wps + 100 * s["complex_words"] / w),
        "smog_index": 1.043 * math.sqrt(30 * s["complex_words"] / n_sent) + 3.1291,
        "coleman_liau_index": 0.0588 * 100 * s["letters"] / w - 0.296 * 100 * n_sent / w - 15.8,
        "automated_readability_index": 4.71 * s["letters"] / w + 0.5 * wps - 21.43,
        "lix": wps + 100 * s["long_words"] / w,
    }


@functools.lru_cache(maxsize=1)
def _textstat():
    """The textstat module if it imports and scores a probe offline, else None."""
    try:
        import textstat

        textstat.flesch_reading_ease("A probe. It must work offline.")
        textstat.dale_chall_readability_score("A probe. It must work offline.")
    except Exception:  # ImportError, or a newer version failing to download NLTK data
        return None
    return textstat


def readability_backend() -> str:
    """Where the formulas come from: 'textstat X.Y.Z' or 'kit counts'."""
    ts = _textstat()
    if ts is None:
        return "kit counts"
    version = getattr(ts, "__version__", "?")
    return "textstat " + (".".join(map(str, version)) if isinstance(version, tuple) else version)


def readability(text: str) -> dict:
    """Readability formulas of one excerpt: FORMULAS (+ OPTIONAL_FORMULAS with textstat)."""
    ts = _textstat()
    if ts is None:
        return formulas_from_stats(text_stats(text))
    return {name: float(getattr(ts, name)(text)) for name in FORMULAS + OPTIONAL_FORMULAS}


def text_features(texts) -> pd.DataFrame:
    """One row per text: STATS columns, then the readability formula columns."""
    rows = []
    for t in texts:
        s = text_stats(str(t))
        rows.append({**{k: s[k] for k in STATS}, **readability(str(t))})
    return pd.DataFrame(rows)


def _cv_rmse(model, X, y, folds: int, seed: int):
    """(RMSE, out-of-fold predictions) of an sklearn model under KFold(shuffle, seed)."""
    from sklearn.model_selection import KFold, cross_val_predict

    y = np.asarray(y, dtype=float)
    cv = KFold(n_splits=folds, shuffle=True, random_state=seed)
    oof = cross_val_predict(model, X, y, cv=cv)
    return float(np.sqrt(np.mean((oof - y) ** 2))), oof


def mean_cv(df: pd.DataFrame, folds: int = 5, seed: int = 42, target_col: str = "target"):
    """(RMSE, OOF) of predicting each fold's training mean: the floor any model must clear."""
    from sklearn.dummy import DummyRegressor

    return _cv_rmse(DummyRegressor(), np.zeros((len(df), 1)), df[target_col], folds, seed)


def tfidf_ridge_cv(
    df: pd.DataFrame,
    folds: int = 5,
    seed: int = 42,
    text_col: str = "excerpt",
    target_col: str = "target",
    alpha: float = 1.0,
):
    """(RMSE, OOF of shape (n,)) of TF-IDF 1-2 grams + ridge; the vectorizer is fitted per fold."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), Ridge(alpha=alpha))
    return _cv_rmse(model, df[text_col].astype(str).to_numpy(), df[target_col], folds, seed)


def readability_ridge_cv(
    df: pd.DataFrame,
    features: pd.DataFrame | None = None,
    folds: int = 5,
    seed: int = 42,
    text_col: str = "excerpt",
    target_col: str = "target",
    alpha: float = 1.0,
):
    """(RMSE, OOF) of standardized text statistics + readability formulas + ridge."""
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if features is None:
        features = text_features(df[text_col])
    model = make_pipeline(StandardScaler(), Ridge(alpha=alpha))
    return _cv_rmse(model, features.to_numpy(dtype=float), df[target_col], folds, seed)


def _pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _points(n: int) -> dict:
    """Scatter style: small faint dots for thousands of points, larger solid ones for a few."""
    return dict(s=6, alpha=0.3) if n > 500 else dict(s=18, alpha=0.7)


def _tidy(ax) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(alpha=0.25)


def plot_distributions(df: pd.DataFrame) -> plt.Figure:
    """Histograms of target (easiness) and standard_error; the reference row (se 0) is left out."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    y = df["target"]
    a.hist(y, bins=40, color=NEUTRAL_COLOR, alpha=0.85, edgecolor="white")
    a.axvline(y.mean(), color="black", ls="--", lw=1.2, label=f"mean {y.mean():.2f}")
    a.set(
        title=f"target: mean {y.mean():.2f}, sd {y.std():.2f} (n = {len(y)})",
        xlabel="target  (← harder · easier →)",
        ylabel="excerpts",
    )
    a.legend(frameon=False)
    se = df.loc[df["standard_error"] > 0, "standard_error"]
    b.hist(se, bins=40, color="#98c1d9", edgecolor="white")
    b.axvline(se.median(), color="black", ls="--", lw=1.2, label=f"median {se.median():.3f}")
    dropped = int((df["standard_error"] <= 0).sum())
    note = f"; {dropped} row with se 0 left out" if dropped == 1 else ""
    note = f"; {dropped} rows with se 0 left out" if dropped > 1 else note
    b.set(title=f"standard error of the target{note}", xlabel="standard_error", ylabel="excerpts")
    b.legend(frameon=False)
    for ax in (a, b):
        _tidy(ax)
    fig.suptitle("Target and label noise", fontsize=14, fontweight="bold")
    return fig


def plot_target_vs_se(df: pd.DataFrame) -> plt.Figure:
    """Scatter of standard_error vs target: extreme excerpts were judged with more uncertainty."""
    fig, ax = plt.subplots(figsize=(7.5, 5), layout="constrained")
    keep = (df["standard_error"] > 0).to_numpy()
    x, se = df.loc[keep, "target"], df.loc[keep, "standard_error"]
    ax.scatter(x, se, color=NEUTRAL_COLOR, edgecolors="none", **_points(len(x)))
    if keep.sum() >= 3:
        coef = np.polyfit(x, se, 2)
        grid = np.linspace(x.min(), x.max(), 100)
        ax.plot(grid, np.polyval(coef, grid), color=HARD_COLOR, lw=2, label="quadratic fit")
        ax.legend(frameon=False, loc="upper center")
    ref = df.loc[~keep]
    if len(ref):
        ids = ", ".join(ref["id"].astype(str).head(3))
        ax.text(
            0.01,
            0.01,
            f"not shown: the reference excerpt {ids} (target 0, standard error 0)",
            transform=ax.transAxes,
            fontsize=8.5,
            color="dimgray",
            va="bottom",
        )
    ax.set(
        title="Standard error vs target: the extremes are the least certain",
        xlabel="target  (← harder · easier →)",
        ylabel="standard_error",
    )
    _tidy(ax)
    return fig


def plot_features_vs_target(
    features: pd.DataFrame, target, columns, title: str, ncols: int = 4
) -> plt.Figure:
    """Grid of feature-vs-target scatters with a least-squares line; Pearson r in each title."""
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
        _tidy(ax)
    for ax in axes[:, 0]:
        ax.set_ylabel("target (higher = easier)")
    for ax in axes.flat[len(columns) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=14, fontweight="bold")
    return fig


def plot_stats_vs_target(features: pd.DataFrame, target) -> plt.Figure:
    """Length, sentence and word statistics vs target (grid, r in titles)."""
    return plot_features_vs_target(
        features, target, STATS, "Text statistics vs target: longer words and sentences → harder"
    )


def plot_readability_vs_target(features: pd.DataFrame, target) -> plt.Figure:
    """Classic readability formulas vs target (grid, r in titles)."""
    return plot_features_vs_target(
        features,
        target,
        FORMULAS + OPTIONAL_FORMULAS,
        f"Readability formulas vs target ({readability_backend()})",
    )


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
    ax.set(
        title="Correlation with target (green: easier as it grows, red: harder)",
        xlabel="Pearson r with target",
    )
    _tidy(ax)
    return fig


def _excerpt_block(text: str, chars: int, width: int) -> str:
    text = " ".join(text.split())
    if len(text) > chars:
        text = text[:chars].rsplit(" ", 1)[0] + " …"
    return textwrap.fill(text, width=width)


def plot_extremes(
    df: pd.DataFrame, n: int = 3, chars: int = 900, width: int = 92, text_col: str = "excerpt"
) -> plt.Figure:
    """The n easiest (left) and n hardest (right) excerpts, wrapped text with target and counts."""
    order = df.sort_values("target")
    n = max(1, min(n, len(df) // 2 or 1))
    columns = [
        ("Easiest", order.tail(n).iloc[::-1], EASY_COLOR, "#e9f5f3"),
        ("Hardest", order.head(n), HARD_COLOR, "#fbecea"),
    ]
    fig, axes = plt.subplots(n, 2, figsize=(17, 2.8 * n + 0.6), squeeze=False)
    for col, (name, rows, color, bg) in enumerate(columns):
        for i, (_, r) in enumerate(rows.iterrows()):
            ax = axes[i, col]
            ax.set_axis_off()
            s = text_stats(r[text_col])
            head = (
                f"{name} #{i + 1}   target {r['target']:+.2f}   "
                f"{s['words']} words · {s['mean_sentence_length']:.0f} words/sentence · "
                f"{s['mean_word_length']:.1f} letters/word"
            )
            ax.text(
                0,
                1,
                head,
                transform=ax.transAxes,
                va="top",
                fontsize=10.5,
                fontweight="bold",
                color=color,
                parse_math=False,
            )
            ax.text(
                0,
                0.86,
                _excerpt_block(str(r[text_col]), chars, width),
                transform=ax.transAxes,
                va="top",
                fontsize=9,
                family="DejaVu Serif",
                parse_math=False,
                linespacing=1.35,
                bbox=dict(boxstyle="round,pad=0.6", facecolor=bg, edgecolor=color, lw=1),
            )
        for ax in axes[len(rows) :, col]:
            ax.set_axis_off()
    fig.suptitle("The easiest and the hardest excerpts", fontsize=14, fontweight="bold")
    fig.subplots_adjust(
        left=0.02,
        right=0.98,
        top=1 - 0.6 / fig.get_figheight(),
        bottom=0.02,
        wspace=0.08,
        hspace=0.25,
    )
    return fig


def plot_baselines(rmse: dict) -> plt.Figure:
    """Horizontal bars of CV RMSE per baseline name (lower is better), the best highlighted."""
    items = sorted(rmse.items(), key=lambda kv: -kv[1])
    names, values = [LABELS.get(k, k) for k, _ in items], [v for _, v in items]
    fig, ax = plt.subplots(figsize=(8, 0.7 * len(items) + 1.5), layout="constrained")
    best = min(values)
    colors = [EASY_COLOR if v == best else "#98c1d9" for v in values]
    ax.barh(names, values, color=colors)
    for i, v in enumerate(values):
        ax.text(v + 0.01, i, f"{v:.3f}", va="center", fontsize=10)
    ax.set_xlim(0, max(values) * 1.15)
    ax.set(title="Baselines: cross-validated RMSE (lower is better)", xlabel="RMSE")
    _tidy(ax)
    return fig
