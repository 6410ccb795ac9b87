"""Exploratory analysis: text statistics, readability formulas and classic baselines (no figures:
those are in utils.plots).

Word, sentence and length counts are the kit's own (regex words); syllables and the readability
formulas come from textstat, pinned to TEXTSTAT_VERSION so the numbers do not depend on the
environment. Baselines are cross-validated on `utils.data.competition_folds`, the folds training uses, and
return their out-of-fold predictions, so they can join a blend.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re

import numpy as np
import pandas as pd

from . import runs
from .competition import SEP, with_separator
from .data import competition_folds
from .metrics import get_metric
from .objective import objective_of

# Later releases download NLTK data at run time, which fails in an offline Kaggle kernel.
TEXTSTAT_VERSION = "0.7.8"
WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’\-][A-Za-z0-9]+)*")
# A sentence ends at . ! ? (runs such as "?!" or "..." count once), optionally followed by a quote.
SENTENCE_END_RE = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
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
FORMULAS = (  # textstat function names
    "flesch_reading_ease",
    "flesch_kincaid_grade",
    "gunning_fog",
    "smog_index",
    "coleman_liau_index",
    "automated_readability_index",
    "lix",
    "dale_chall_readability_score",
)
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
}


@functools.lru_cache(maxsize=1)
def load_textstat():
    """The textstat module, checked to be TEXTSTAT_VERSION; an ImportError saying how to get it."""
    how = (
        f"pip install textstat=={TEXTSTAT_VERSION} (offline Kaggle kernel: attach the kit's code "
        "dataset; the EDA notebook installs textstat from its wheels/ folder)"
    )
    try:
        found = importlib.metadata.version("textstat")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"the readability formulas need textstat: {how}") from None
    if found != TEXTSTAT_VERSION:
        raise ImportError(
            f"the readability formulas need textstat {TEXTSTAT_VERSION}, found {found}: {how}"
        )
    import textstat

    return textstat


def words(text: str) -> list:
    """Words of `text`: runs of letters/digits, keeping inner apostrophes and hyphens."""
    return WORD_RE.findall(text)


def sentence_count(text: str) -> int:
    """Sentences in `text`: terminal punctuation runs, plus a last one without it; at least 1."""
    ends = [m.end() for m in SENTENCE_END_RE.finditer(text)]
    n = len(ends)
    tail = text[ends[-1] :] if ends else text
    return max(1, n + (1 if WORD_RE.search(tail) else 0))


def text_stats(text: str) -> dict:
    """Counts for one excerpt: the STATS keys plus `letters` (syllables per word by textstat)."""
    ws = words(text)
    n_words = max(1, len(ws))
    letters = sum(sum(c.isalnum() for c in w) for w in ws)
    n_sent = sentence_count(text)
    return {
        "characters": len(text.strip()),
        "words": len(ws),
        "sentences": n_sent,
        "mean_word_length": letters / n_words,
        "mean_sentence_length": len(ws) / n_sent,
        "long_word_share": sum(len(w) >= LONG_WORD for w in ws) / n_words,
        "syllables_per_word": load_textstat().avg_syllables_per_word(text) if ws else 0.0,
        "letters": letters,
    }


def readability(text: str) -> dict:
    """The FORMULAS of one excerpt, by textstat."""
    ts = load_textstat()
    return {name: float(getattr(ts, name)(text)) for name in FORMULAS}


def text_features(texts) -> pd.DataFrame:
    """One row per text: STATS columns, then the FORMULAS columns."""
    rows = []
    for t in map(str, texts):
        s = text_stats(t)
        rows.append({**{k: s[k] for k in STATS}, **readability(t)})
    return pd.DataFrame(rows, columns=[*STATS, *FORMULAS])


# ----------------------------------------------------------------------------- baselines


def oof_predict(model, X, y, folds) -> np.ndarray:
    """(N,) out-of-fold predictions: rows of fold k by a clone of `model` fitted on the others."""
    from sklearn.base import clone

    y, folds = np.asarray(y, dtype=float), np.asarray(folds)
    if len(folds) != len(y) or len(X) != len(y):
        raise ValueError(f"{len(X)} inputs, {len(y)} targets and {len(folds)} folds: need one each")
    if len(np.unique(folds)) < 2:
        raise ValueError(f"need at least 2 folds, got {np.unique(folds).tolist()}")
    oof = np.empty(len(y))
    for k in np.unique(folds):
        held = folds == k
        oof[held] = clone(model).fit(X[~held], y[~held]).predict(X[held])
    return oof


def mean_oof(y, folds) -> np.ndarray:
    """(N,) each fold predicted by the mean target of the other folds."""
    from sklearn.dummy import DummyRegressor

    return oof_predict(DummyRegressor(), np.zeros((len(y), 1)), y, folds)


def readability_ridge_oof(features: pd.DataFrame, y, folds, alpha: float = 1.0) -> np.ndarray:
    """(N,) OOF predictions of standardized text statistics + readability formulas + ridge."""
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), Ridge(alpha=alpha))
    return oof_predict(model, np.asarray(features, dtype=float), y, folds)


def tfidf_ridge_oof(texts, y, folds, alpha: float = 1.0) -> np.ndarray:
    """(N,) OOF predictions of TF-IDF 1-2 grams + ridge; the vectorizer is fitted per fold."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), Ridge(alpha=alpha))
    return oof_predict(model, np.asarray(texts, dtype=str), y, folds)


def _folds(comp, df: pd.DataFrame, folds, n_folds: int, seed: int) -> np.ndarray:
    # The folds training uses: the competition's, with the same count and seed.
    return np.asarray(folds) if folds is not None else competition_folds(comp, df, n_folds, seed)


def readability_ridge_cv(comp, df, folds=None, *, features: pd.DataFrame | None = None,
                         n_folds: int = 5, seed: int = 42, alpha: float = 1.0):
    """(score in the competition's metric, OOF (N,)) of readability_ridge_oof on its one
    regression target; `features` default: text_features of the competition's input texts.

    `folds`: fold per row; None makes them with competition_folds(comp, df, n_folds, seed), as training does.
    """
    y = df[comp.target_cols[0]].to_numpy(dtype=float)
    folds = _folds(comp, df, folds, n_folds, seed)
    features = text_features(plain_texts(comp.input_texts(df))) if features is None else features
    oof = readability_ridge_oof(features, y, folds, alpha)
    return get_metric(comp.metric_name).honest_score(y[:, None], oof[:, None], folds)[0], oof


def write_oof_run(folder, comp, df: pd.DataFrame, folds, oof) -> dict:
    """A baseline as a run folder (utils.runs writes its files): its out-of-fold rows (id, the
    truth, the predictions, fold, as a trained run's), its folds, and its metrics naming the
    competition, so `utils.runs.read_oof` reads its columns and `utils.ensemble` blends it with
    transformer runs trained on the same folds. `oof`: (N,) or (N, outputs) predictions, class
    probabilities in sorted label order. Returns the metrics written."""
    folds = np.asarray(folds, dtype=int)
    pred = np.asarray(oof, dtype=float).reshape(len(df), -1)
    y, labels = _truth(comp, df)
    ids = df[comp.id_col].astype(str).to_numpy()
    frame = objective_of(comp).oof_frame(ids, df, y, pred, list(comp.target_cols), labels, folds)
    runs.write_oof(folder, frame)
    runs.write_folds(folder, ids, folds)
    metric = get_metric(comp.metric_name)
    metrics = {"competition": comp.to_dict(), "metric": metric.name,
               "cv": metric.honest_score(y, pred, folds)[0]}
    runs.write_metrics(folder, metrics)
    return metrics


# ----------------------------------------------------------------------------- any competition


def plain_texts(texts) -> list:
    """Input texts as single strings (a text pair, or columns joined by the separator, joined by a
    blank line), for counts and TF-IDF."""
    joined = (t if isinstance(t, str) else "\n\n".join(map(str, t)) for t in texts)
    return [t.replace(SEP, "\n\n") for t in joined]


def token_lengths(texts, tokenizer=None) -> tuple[np.ndarray, str]:
    """(length of each input text, the unit): tokens of `tokenizer` (a loaded tokenizer, special
    tokens included, as the model counts them), else regex words when no tokenizer is at hand."""
    texts = list(texts)
    if tokenizer is None:
        return np.array([len(words(t)) for t in plain_texts(texts)]), "words"
    texts = with_separator(texts, tokenizer)
    pairs = bool(texts) and not isinstance(texts[0], str)
    first = [t[0] if pairs else t for t in texts]
    second = [t[1] for t in texts] if pairs else None
    enc = tokenizer(first, second, truncation=False, verbose=False)
    return np.array([len(ids) for ids in enc["input_ids"]]), "tokens"


def baseline_cv(comp, df: pd.DataFrame, folds=None, *, n_folds: int = 5, seed: int = 42,
                alpha: float = 1.0) -> dict:
    """The classic baselines of a competition, on the training folds, in its metric (a rule
    metric: each fold's rule fitted on the other folds): predict the mean (or the most frequent
    class), and TF-IDF 1-2 grams + ridge per target (or + logistic regression). {name: (score,
    OOF predictions (N, outputs))}; class probabilities in sorted label order.

    `folds`: fold per row; None makes them with competition_folds(comp, df, n_folds, seed), as training does.
    """
    from sklearn.dummy import DummyClassifier
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    metric = get_metric(comp.metric_name)
    folds = _folds(comp, df, folds, n_folds, seed)
    texts = np.asarray(plain_texts(comp.input_texts(df)), dtype=object)
    y, labels = _truth(comp, df)
    out = {}
    if labels is not None:
        for name, make in (("predict the most frequent class", lambda: DummyClassifier(strategy="prior")),
                           ("TF-IDF 1-2 grams + logistic regression", lambda: make_pipeline(
                               TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                               LogisticRegression(C=4.0, max_iter=2000)))):
            oof = np.zeros((len(y), len(labels)))
            for k in np.unique(folds):
                held = folds == k
                model = make().fit(texts[~held], y[~held])
                oof[np.ix_(held, model.classes_)] = model.predict_proba(texts[held])
            out[name] = (metric.honest_score(y, oof, folds)[0], oof)
        return out
    means = np.stack([mean_oof(y[:, j], folds) for j in range(y.shape[1])], axis=1)
    tfidf = np.stack([tfidf_ridge_oof(texts.astype(str), y[:, j], folds, alpha) for j in range(y.shape[1])], axis=1)
    for name, oof in (("predict the mean", means), ("TF-IDF 1-2 grams + ridge", tfidf)):
        out[name] = (metric.honest_score(y, oof, folds)[0], oof)
    return out


def _truth(comp, df: pd.DataFrame) -> tuple[np.ndarray, list | None]:
    """(truth, labels) as the metrics take them: class indices (N,) and the sorted class labels,
    or the targets (N, T) and None."""
    obj, targets = objective_of(comp), list(comp.target_cols)
    labels = obj.labels(df[targets[0]])  # as training orders them
    if labels is None:
        return df[targets].to_numpy(dtype=float), None
    return obj.targets(df, targets, labels), labels
