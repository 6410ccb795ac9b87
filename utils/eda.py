"""Exploratory analysis: text statistics, readability formulas (for prose: readability_plan says
whether they fit and why), facts about the targets of each shape, and classic baselines, the
text-blind constant beside TF-IDF, the better of them the bar (no figures: those are in
utils.plots). How each kind of target is read (its summary, its baselines, what its figures
count and show) is one class per kind, Targets (targets_of), which utils.plots asks too.

Word, sentence and length counts are the kit's own (regex words); syllables and the readability
formulas come from textstat, pinned to TEXTSTAT_VERSION so the numbers do not depend on the
environment. Baselines are cross-validated on `utils.tables.competition_folds`, the folds training uses, and
return their out-of-fold predictions, so they can join a blend.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from . import runs, spans
from .competition import SEP, with_separator
from .metrics import get_metric
from .objective import objective_of
from .tables import competition_folds

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
    """(N,) out-of-fold predictions (N, T for targets y (N, T)): rows of fold k by a clone of
    `model` fitted on the others."""
    from sklearn.base import clone

    y, folds = np.asarray(y, dtype=float), np.asarray(folds)
    if len(folds) != len(y) or len(X) != len(y):
        raise ValueError(f"{len(X)} inputs, {len(y)} targets and {len(folds)} folds: need one each")
    if len(np.unique(folds)) < 2:
        raise ValueError(f"need at least 2 folds, got {np.unique(folds).tolist()}")
    oof = np.empty(y.shape)
    for k in np.unique(folds):
        held = folds == k
        oof[held] = clone(model).fit(X[~held], y[~held]).predict(X[held]).reshape(oof[held].shape)
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
    """(N,) OOF predictions of TF-IDF 1-2 grams + ridge ((N, T) for targets y (N, T): one ridge
    per target on one vectorizer); the vectorizer is fitted per fold."""
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
    probabilities in the order baseline_cv gives them. Returns the metrics written."""
    folds = np.asarray(folds, dtype=int)
    pred = np.asarray(oof, dtype=float).reshape(len(df), -1)
    y, labels = _truth(comp, df)
    ids = df[comp.id_col].astype(str).to_numpy()
    frame = objective_of(comp).outputs.oof_frame(ids, df, y, pred, list(comp.target_cols), labels, folds)
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


PROSE_WORDS = 50  # median words per input: below, phrases, titles or tweets, not prose
PROSE_SENTENCES = 3  # median sentences per input: the formulas weigh words per sentence


def column_words(comp, df: pd.DataFrame) -> pd.DataFrame:
    """(N, text columns) words in each of the competition's text columns, per row."""
    return pd.DataFrame({c: [len(words(t)) for t in df[c].fillna("").astype(str)] for c in comp.text_cols},
                        index=df.index)


def readability_plan(comp, df: pd.DataFrame) -> tuple[bool, str]:
    """(whether the text statistics and readability formulas fit this competition, why, in one
    line). They fit prose (a median input of at least PROSE_WORDS words and PROSE_SENTENCES
    sentences) with one continuous target to draw them against; the formulas were made for
    passages, and on a phrase of a few words their counts (syllables per word, words per
    sentence) measure nothing."""
    texts = plain_texts(comp.input_texts(df))
    n_words = np.median([len(words(t)) for t in texts]) if texts else 0.0
    n_sent = np.median([sentence_count(t) for t in texts]) if texts else 0.0
    size = f"median {n_words:.0f} words and {n_sent:.0f} sentence{'s' if n_sent != 1 else ''} per row"
    if len(comp.text_cols) > 1:
        size += "; median words per column: " + ", ".join(
            f"{c} {v:.0f}" for c, v in column_words(comp, df).median().items())
    if n_words < PROSE_WORDS or n_sent < PROSE_SENTENCES:
        what = ("short phrases" if n_words < 0.2 * PROSE_WORDS else "short texts" if n_words < PROSE_WORDS
                else "texts of few sentences")
        cols = f"{len(comp.text_cols)} columns of " if len(comp.text_cols) > 1 else ""
        return False, (f"No readability formulas: the input is {cols}{what}, not prose ({size}; prose: "
                       f"{PROSE_WORDS}+ words, {PROSE_SENTENCES}+ sentences): the formulas were made for "
                       "passages, and their syllables per word and words per sentence of a few words or one "
                       "sentence measure nothing")
    if not (comp.continuous and len(comp.target_cols) == 1):
        kind = targets_of(objective_of(comp)).described(comp)
        return False, (f"No readability formulas: the input is prose ({size}), but they are drawn "
                       f"against one continuous target, and this competition has {kind}")
    return True, f"Prose ({size}): text statistics and readability formulas against {comp.target_cols[0]!r}"


def target_summary(comp, df: pd.DataFrame) -> list:
    """Lines of facts about the targets: each target's mean, sd and distinct values; the class
    shares (in the description's order); each label's prevalence; the per-row standard error
    against the target's spread, where the description names one."""
    return targets_of(objective_of(comp)).summary(comp, df)


def group_sizes(comp, df: pd.DataFrame) -> pd.Series:
    """Rows per value of the column the folds group by (comp.group_col), largest first."""
    if not comp.group_col:
        raise ValueError(f"{comp.slug}: its folds are {comp.folds!r}, grouped by no column")
    return df[comp.group_col].astype(str).value_counts()


def label_cooccurrence(comp, df: pd.DataFrame) -> pd.DataFrame:
    """(L, L) of several 0/1 labels: row a, column b = the share of rows labelled a that are also
    labelled b (diagonal 1; NaN for a label no row has)."""
    y = df[list(comp.target_cols)].astype(float)
    both = y.T @ y  # (L, L) rows with both labels
    n = np.diag(both.to_numpy())
    with np.errstate(invalid="ignore", divide="ignore"):
        return both.div(np.where(n > 0, n, np.nan), axis=0)


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


# ----------------------------------------------------------------------------- each kind of target, as read


@dataclass(frozen=True)
class Targets:
    """How the EDA and its figures (utils.plots) read a kind of target, one class per kind of the
    objective (its `kind`: TARGETS); they ask it and never compare the kind's name. A kind without
    a reading of its own (options, items, spans: their own facts and figures) is read as values."""

    constant: ClassVar[str] = ""  # the text-blind baseline's name (constant_oof)
    # What plots.oof_scatter draws: each target's prediction against its truth (none for class
    # probabilities), or a 0/1 label's probability as a histogram per truth.
    scatter: ClassVar[bool] = True
    histogram: ClassVar[bool] = False
    # The figures beside the targets' own (plots.target_figures): how several targets correlate,
    # and how often several 0/1 labels come together.
    correlations: ClassVar[bool] = False
    cooccurrence: ClassVar[bool] = False

    def described(self, comp) -> str:
        """The competition's targets in words ("class labels")."""
        raise NotImplementedError

    def summary(self, comp, df: pd.DataFrame) -> list:
        """target_summary's lines."""
        raise NotImplementedError

    def tfidf_oof(self, texts, y, folds, labels, alpha: float) -> tuple[str, np.ndarray]:
        """(name, OOF predictions (N, outputs)) of the TF-IDF 1-2 grams baseline of `texts` (N,)
        against y as _truth gives it, on `folds`."""
        raise NotImplementedError

    def counts(self, comp, df: pd.DataFrame):
        """(rows per class or per label, title, x label) of plots.plot_targets' bars; None: the
        targets are values, drawn as histograms."""
        return None

    def examples(self, comp, shown: pd.DataFrame, n: int) -> tuple:
        """([(panel name, rows)], value(row) -> the words heading a text, title) of plots.plot_examples;
        `shown`: the training rows, each text in column "_text"."""
        raise NotImplementedError


@dataclass(frozen=True)
class ValueTargets(Targets):
    """One value per target column (regression)."""

    constant: ClassVar[str] = "predict the mean"
    correlations: ClassVar[bool] = True

    def described(self, comp):
        return f"{len(comp.target_cols)} targets"

    def summary(self, comp, df):
        """Each target's mean, sd and distinct values; the per-row standard error against the
        target's spread, where the description names one."""
        cols, lines = list(comp.target_cols), []
        for c in cols:
            y = df[c].astype(float)
            values = np.unique(y)
            distinct = (f"{len(values)} distinct values ({', '.join(f'{v:g}' for v in values)})"
                        if len(values) <= 10 else f"range {y.min():.2f} to {y.max():.2f}")
            lines.append(f"{c}: mean {y.mean():.3f}, sd {y.std():.3f}, {distinct}")
        se = comp.standard_error_col
        if se and se in df.columns and len(cols) == 1:
            err, sd = df.loc[df[se] > 0, se].astype(float), df[cols[0]].astype(float).std()
            lines.append(f"{se}: median {err.median():.3f}, {err.median() / sd:.2f} of the target's sd: the labels "
                         "are noisy, and no model's error gets far below it")
        return lines

    def tfidf_oof(self, texts, y, folds, labels, alpha):
        return "TF-IDF 1-2 grams + ridge", tfidf_ridge_oof(texts.astype(str), y, folds, alpha)

    def examples(self, comp, shown, n):
        """The highest and lowest target (or mean of the targets)."""
        cols = list(comp.target_cols)
        score = cols[0] if len(cols) == 1 else f"mean of the {len(cols)} targets"
        order = shown.assign(**{score: shown[cols].astype(float).mean(axis=1)}).sort_values(score, kind="stable")
        return ([("Highest", order.tail(n).iloc[::-1]), ("Lowest", order.head(n))],
                lambda r: f"{score} {r[score]:+.2f}",
                f"{comp.title or comp.slug}: the texts with the highest and lowest {score}")


@dataclass(frozen=True)
class ClassTargets(Targets):
    """One class label per row, in the description's class order (else sorted)."""

    constant: ClassVar[str] = "predict the class shares"
    scatter: ClassVar[bool] = False

    def described(self, comp):
        return "class labels"

    def summary(self, comp, df):
        """The class shares."""
        col = comp.target_cols[0]
        labels = objective_of(comp).labels(df[col], order=comp.classes)
        share = df[col].value_counts(normalize=True)
        return [f"{col}: " + ", ".join(f"{lab} {share.get(lab, 0.0):.1%}" for lab in labels)]

    def tfidf_oof(self, texts, y, folds, labels, alpha):
        """+ logistic regression over the classes (a class a fold never trains on: 0)."""
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        tfidf = np.zeros((len(y), len(labels)))
        for k in np.unique(folds):
            held = folds == k
            model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                                  LogisticRegression(C=4.0, max_iter=2000)).fit(texts[~held], y[~held])
            tfidf[np.ix_(held, model.classes_)] = model.predict_proba(texts[held])
        return "TF-IDF 1-2 grams + logistic regression", tfidf

    def counts(self, comp, df):
        col = comp.target_cols[0]
        labels = objective_of(comp).labels(df[col], order=comp.classes)
        counts = df[col].value_counts().reindex(labels, fill_value=0)
        return counts, f"{comp.title or comp.slug}: class counts of {col!r} (n = {len(df)})", col

    def examples(self, comp, shown, n):
        """Texts of the last and the first class."""
        col = comp.target_cols[0]
        labels = objective_of(comp).labels(shown[col], order=comp.classes)
        pair = [labels[-1], labels[0]]
        return ([(f"{col} = {lab}", shown[shown[col] == lab]) for lab in pair], lambda r: "",
                f"{comp.title or comp.slug}: texts of class {pair[0]} and of {pair[1]}")


@dataclass(frozen=True)
class LabelTargets(Targets):
    """Several 0/1 labels per row, a probability each."""

    constant: ClassVar[str] = "predict each label's prevalence"
    histogram: ClassVar[bool] = True
    cooccurrence: ClassVar[bool] = True

    def described(self, comp):
        return f"{len(comp.target_cols)} 0/1 labels"

    def summary(self, comp, df):
        """Each label's prevalence; the rows with none, and the labels per row."""
        cols = list(comp.target_cols)
        prev = df[cols].astype(float).mean()
        none = float((df[cols].astype(float).sum(axis=1) == 0).mean())
        return ["prevalence: " + ", ".join(f"{c} {v:.1%}" for c, v in prev.items()),
                f"rows with no label: {none:.1%}; labels per row: {df[cols].astype(float).sum(axis=1).mean():.2f}"]

    def tfidf_oof(self, texts, y, folds, labels, alpha):
        return "TF-IDF 1-2 grams + logistic regression", tfidf_labels_oof(texts, y, folds)

    def counts(self, comp, df):
        counts = df[list(comp.target_cols)].astype(float).sum().astype(int)
        return counts, f"{comp.title or comp.slug}: rows with each label (n = {len(df)})", "label"

    def examples(self, comp, shown, n):
        """The texts with the most labels and with none."""
        cols = list(comp.target_cols)
        count = shown[cols].astype(float).sum(axis=1)
        order = shown.assign(_labels=count).sort_values("_labels", ascending=False, kind="stable")
        return ([("Most labels", order[order["_labels"] > 0]), ("No label", order[order["_labels"] == 0])],
                lambda r: ", ".join(c for c in cols if r[c] == 1) or "no label",
                f"{comp.title or comp.slug}: the texts with the most labels and with none")


TARGETS = {"values": ValueTargets(), "classes": ClassTargets(), "labels": LabelTargets()}  # by the objective's kind
CONSTANT = {kind: t.constant for kind, t in TARGETS.items()}  # the text-blind baseline of each kind of target


def targets_of(objective) -> Targets:
    """How the EDA reads the targets of `objective` (utils.objective): TARGETS by its kind, values
    where it has no reading of its own."""
    return TARGETS.get(objective.kind, TARGETS["values"])


def target_kind(comp) -> str:
    """What the competition's targets are, as its objective trains them: "values" (one value per
    target: regression), "classes" (one class label per row) or "labels" (several 0/1 labels, a
    probability each)."""
    return objective_of(comp).kind


def constant_oof(comp, df: pd.DataFrame) -> np.ndarray:
    """(N, outputs) the same prediction for every row, blind to the text: the training targets'
    mean, the class shares (in the order training gives the classes) or each label's prevalence.

    One value for all rows, not one per fold: fitted on each fold's other rows, the values would
    differ by noise from fold to fold, which a correlation, a ROC AUC or a fitted threshold reads as
    signal (on US Patent, Pearson -0.003 instead of 0; on the tweets, F1 0.41 instead of the
    always-positive 0.60). The held-out rows count in the mean: on CommonLit its RMSE moves in the
    fourth decimal."""
    y, labels = _truth(comp, df)
    n_out = len(labels) if labels is not None else y.shape[1]
    mean = objective_of(comp).target_mean(y, n_out, n_out)
    return np.tile(mean, (len(df), 1))


def tfidf_labels_oof(texts, y, folds, C: float = 4.0) -> np.ndarray:
    """(N, L) OOF probabilities of TF-IDF 1-2 grams + logistic regression, one per 0/1 label column
    of y (N, L); a label that one training side never shows gets that side's constant."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    texts, y, folds = np.asarray(texts, dtype=object), np.asarray(y, dtype=int), np.asarray(folds)
    oof = np.zeros(y.shape, dtype=float)
    for k in np.unique(folds):
        held = folds == k
        vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        x_fit, x_held = vec.fit_transform(texts[~held]), vec.transform(texts[held])
        for j in range(y.shape[1]):
            seen = y[~held, j]
            if seen.min() == seen.max():
                oof[held, j] = seen[0]
                continue
            model = LogisticRegression(C=C, max_iter=2000).fit(x_fit, seen)
            oof[held, j] = model.predict_proba(x_held)[:, 1]
    return oof


def baseline_cv(comp, df: pd.DataFrame, folds=None, *, n_folds: int = 5, seed: int = 42,
                alpha: float = 1.0) -> dict:
    """The classic baselines of a competition, on the training folds, in its metric (a rule
    metric: each fold's rule fitted on the other folds): the text-blind constant (CONSTANT: the
    mean, the class shares, or each label's prevalence; constant_oof), and TF-IDF 1-2 grams +
    ridge per target (or + logistic regression: per class, or per label). {name: (score, OOF
    predictions (N, outputs))}, the constant first; class probabilities in the order training
    gives the classes. The better of the two is the bar a model has to beat (`bar`).

    `folds`: fold per row; None makes them with competition_folds(comp, df, n_folds, seed), as training does.
    """
    metric = get_metric(comp.metric_name)
    folds = _folds(comp, df, folds, n_folds, seed)
    texts = np.asarray(plain_texts(comp.input_texts(df)), dtype=object)
    y, labels = _truth(comp, df)
    targets = targets_of(objective_of(comp))
    name, tfidf = targets.tfidf_oof(texts, y, folds, labels, alpha)
    return {n: (metric.honest_score(y, oof, folds)[0], oof)
            for n, oof in ((targets.constant, constant_oof(comp, df)), (name, tfidf))}


def bar(scores: dict, metric_name: str) -> tuple[str, float]:
    """(name, score) of the best baseline by the metric's direction: the bar a model has to beat.
    `scores`: {name: score} or baseline_cv's {name: (score, OOF)}."""
    metric = get_metric(metric_name)
    scores = {k: v[0] if isinstance(v, tuple) else v for k, v in scores.items()}
    pick = max if metric.greater_is_better else min
    name = pick(scores, key=scores.get)
    return name, float(scores[name])


def bar_and_others(scores: dict, metric_name: str) -> tuple[str, float, str]:
    """(the bar's name, its score, the other baselines as "name 0.1234, ...")."""
    scores = {k: v[0] if isinstance(v, tuple) else v for k, v in scores.items()}
    name, best = bar(scores, metric_name)
    return name, best, ", ".join(f"{k} {v:.4f}" for k, v in scores.items() if k != name)


def bar_line(scores: dict, metric_name: str) -> str:
    """One sentence naming the bar (the best baseline, whichever it is) beside the others' scores."""
    metric = get_metric(metric_name)
    name, best, others = bar_and_others(scores, metric_name)
    better = "higher" if metric.greater_is_better else "lower"
    blind = ": ignoring the text beats every baseline that reads it" if name in CONSTANT.values() else ""
    return (f"The bar, the number every model must beat: {name}, CV {metric.title or metric.name} "
            f"{best:.4f} ({better} is better; {others or 'no other baseline'}){blind}")


def _truth(comp, df: pd.DataFrame) -> tuple[np.ndarray, list | None]:
    """(truth, labels) as the metrics take them: class indices (N,) and the class labels in the
    order training gives them (the description's `classes`, else sorted), or the targets (N, T)
    (values, or 0/1 labels) and None."""
    obj, targets = objective_of(comp), list(comp.target_cols)
    labels = obj.labels(df[targets[0]], order=comp.classes)  # as training orders them
    if labels is None:
        return df[targets].to_numpy(dtype=float), None
    return obj.targets(df, targets, labels), labels


# ----------------------------------------------------------------------------- rankings


def ranking_facts(comp, df: pd.DataFrame, folds: np.ndarray, catalogue: pd.DataFrame | None = None) -> dict:
    """What a ranking competition's training rows say, per shape. A catalogue (retrieval): its size,
    the share of its items some row is tagged with (coverage), rows per tagged item, and per fold
    the share of validation rows whose item no other fold holds (unseen: what a model must rank
    without having trained on it); the lengths in words of queries and items. Options (multiple
    choice): the answer's share per option, and how often the longest option is the answer."""
    y = df[comp.target_cols[0]].astype(str).to_numpy()
    words = lambda texts: np.array([len(str(t).split()) for t in texts])  # noqa: E731
    out = {"rows": len(df), "query_words": words(plain_texts(comp.input_texts(df)))}
    if catalogue is not None:
        per_item = pd.Series(y).value_counts()
        out.update(items=len(catalogue), tagged=len(per_item), coverage=len(per_item) / len(catalogue),
                   rows_per_item=per_item.to_numpy(), once=float((per_item == 1).mean()),
                   item_words=words(catalogue["text"]))
        out["unseen_per_fold"] = {int(k): float(np.mean(~np.isin(y[folds == k], y[folds != k])))
                                  for k in np.unique(folds)}
    if comp.options:
        out["answer_share"] = {o: float(np.mean(y == o)) for o in comp.options}
        lengths = df[list(comp.options)].fillna("").astype(str).apply(lambda c: c.str.len()).to_numpy()
        longest = np.array(comp.options)[lengths.argmax(1)]
        out["longest_is_answer"] = float(np.mean(longest == y))
        out["option_words"] = words(df[list(comp.options)].fillna("").to_numpy().ravel())
    return out


def ranking_lines(comp, facts: dict) -> list:
    """ranking_facts in words."""
    q = facts["query_words"]
    lines = [f"{facts['rows']} rows; queries: median {np.median(q):.0f} words (90% under {np.percentile(q, 90):.0f})"]
    if "items" in facts:
        r = facts["rows_per_item"]
        lines += [f"catalogue: {facts['items']} items, {facts['tagged']} tagged in training ({facts['coverage']:.1%} "
                  f"coverage); {facts['once']:.1%} of the tagged items on one row only, the most on {r.max()} rows",
                  f"items: median {np.median(facts['item_words']):.0f} words",
                  "unseen per fold (validation rows whose item no other fold holds): "
                  + ", ".join(f"fold {k} {v:.1%}" for k, v in facts["unseen_per_fold"].items())]
    if "answer_share" in facts:
        lines += ["answers: " + ", ".join(f"{o} {s:.1%}" for o, s in facts["answer_share"].items()),
                  f"the longest option is the answer in {facts['longest_is_answer']:.1%} of the rows "
                  f"(chance {1 / len(comp.options):.0%}); options: median {np.median(facts['option_words']):.0f} words"]
    return lines


def scored(metric, y, pred, folds, rows=None) -> float:
    """The metric of `pred` on `rows` (a boolean mask; None: every row), each fold's decision rule
    (if the metric has one) fitted on the other folds' rows."""
    y, pred, folds = np.asarray(y), np.asarray(pred), np.asarray(folds)
    rows = np.ones(len(y), dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
    if not metric.rule:
        return metric.score(y[rows], pred[rows])
    rules = {int(k): metric.fit_rule(y[folds != k], pred[folds != k]) for k in np.unique(folds[rows])}
    return metric.score_under(y[rows], pred[rows], folds[rows], rules)


def ranking_baselines(comp, df: pd.DataFrame, folds: np.ndarray, catalogue: pd.DataFrame | None = None,
                      rows=None) -> dict:
    """{baseline: the competition's MAP@k} of what needs no transformer, on `rows` (None: every
    row). Retrieval: the items most often tagged on the other folds first (per fold, honest), and
    TF-IDF cosine of query and item (fitted on the texts only, no label). Classes answered top k:
    answer_baselines. Multiple choice: random order (its expectation), and the longest option
    first."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    metric = get_metric(comp.metric_name)
    score = lambda truth, pred: scored(metric, truth, pred, folds, rows)  # noqa: E731
    y = df[comp.target_cols[0]].astype(str).to_numpy()
    out = {}
    if catalogue is not None:
        ids = catalogue["id"].to_numpy()
        truth = pd.Series(np.arange(len(ids)), index=ids).loc[y].to_numpy()
        freq = np.zeros((len(df), len(ids)))
        for k in np.unique(folds):
            counts = pd.Series(y[folds != k]).value_counts().reindex(ids, fill_value=0).to_numpy(float)
            freq[folds == k] = counts - np.arange(len(ids)) * 1e-9  # ties: catalogue order
        out["most often tagged first"] = score(truth, freq)
        queries = plain_texts(comp.input_texts(df))
        vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(list(queries) + list(catalogue["text"]))
        sims = (vec.transform(queries) @ vec.transform(catalogue["text"]).T).toarray()
        out["TF-IDF cosine"] = score(truth, sims)
    if not comp.candidates:  # classes answered top k
        out.update(answer_baselines(comp, df, folds, rows))
    if comp.options:  # a reranker's row whose candidates miss the true item (no_answer): -1, scored 0
        truth = pd.Series(np.arange(len(comp.options)), index=list(comp.options)).reindex(y).fillna(-1)
        truth = truth.to_numpy(dtype=int)
        n = len(comp.options)
        # Random order, in expectation: the answer at each rank with chance 1/n.
        out["random order"] = float(sum(1 / r for r in range(1, min(comp.answer_k, n) + 1)) / n)
        lengths = df[list(comp.options)].fillna("").astype(str).apply(lambda c: c.str.len()).to_numpy(float)
        out["longest option first"] = score(truth, lengths)
    return out


def condition_columns(comp, df: pd.DataFrame) -> list:
    """The columns rows are grouped or conditioned by (the group column, a pair's first text,
    the stratification column) whose values repeat: what a most-frequent-answer baseline reads."""
    pair = comp.text_cols[0] if len(comp.text_cols) == 2 and not comp.text_template else ""
    cols = [c for c in dict.fromkeys((comp.group_col, pair, comp.stratify_col)) if c and c in df.columns]
    return [c for c in cols if c not in comp.target_cols and df[c].nunique() <= len(df) / 2]


def answer_baselines(comp, df: pd.DataFrame, folds: np.ndarray, rows=None) -> dict:
    """{baseline: score on `rows`} of a classification answered top k that reads no text: the
    answers most frequent on the other folds first, overall and per value of each
    condition_columns column (the answers most frequent among the other folds' rows of the same
    question or rule; the overall order where a value is new or counts tie)."""
    metric = get_metric(comp.metric_name)
    y, labels = _truth(comp, df)
    n, folds = len(labels), np.asarray(folds)
    overall = np.zeros((len(df), n))
    for k in np.unique(folds):
        counts = np.bincount(y[folds != k], minlength=n).astype(float)
        overall[folds == k] = counts - np.arange(n) * 1e-9  # ties: the classes' order
    out = {"most frequent answers first": scored(metric, y, overall, folds, rows)}
    tie = overall / (np.abs(overall).max() + 1) / 2  # below one count: orders only where counts tie
    for col in condition_columns(comp, df):
        values, scores = df[col].astype(str).to_numpy(), tie.copy()
        for k in np.unique(folds):
            held = folds == k
            table = pd.crosstab(values[~held], y[~held]).reindex(columns=range(n), fill_value=0)
            scores[held] += table.reindex(values[held]).fillna(0).to_numpy(float)
        out[f"most frequent answers per {col!r}"] = scored(metric, y, scores, folds, rows)
    return out


def cheap_baselines(comp, df: pd.DataFrame, folds: np.ndarray, rows=None) -> dict:
    """{baseline: score in the competition's metric on `rows`} of what fits nothing on the text,
    each row's prediction from the other folds (so a run's finished folds are scored as its CV
    is): what training prints beside its CV. A ranking's (answer_baselines; the options' random
    and longest-first order) or the text-blind constant; {} for a catalogue or spans, whose
    baselines the EDA computes."""
    if comp.catalogue or comp.span_task:
        return {}
    if comp.ranking:
        return ranking_baselines(comp, df, folds, rows=rows)
    y, _ = _truth(comp, df)
    return {targets_of(objective_of(comp)).constant:
            scored(get_metric(comp.metric_name), y, constant_oof(comp, df), folds, rows)}


def span_facts(comp, df: pd.DataFrame, tokenizer=None) -> dict:
    """What a span competition's training rows say: the share of rows with no span, spans per row,
    their lengths (characters, words) and where they start (share of the text before them), per
    condition value (Tweet's sentiment, NBME's features: the ten most frequent); the texts' lengths
    in tokens (a `tokenizer`: a fast one's; else words); how many spans a tokenizer cannot mark
    exactly (an edge inside a token: decoded back, the span gains or loses characters)."""
    obj = objective_of(comp)
    texts = df[comp.span_col].astype(str).tolist()
    found = [obj.spans_of(t, obj.answer(a)) for t, a in zip(texts, df[comp.target_cols[0]].tolist())]
    condition = df[comp.text_cols[0]].astype(str).to_numpy() if comp.text_pair else np.full(len(df), "")
    flat = [(i, s, e) for i, f in enumerate(found) for s, e in f]
    out = {"rows": len(df), "none": float(np.mean([not f for f in found])),
           "spans_per_row": np.array([len(f) for f in found]),
           "span_chars": np.array([e - s for _, s, e in flat]),
           "span_words": np.array([len(texts[i][s:e].split()) for i, s, e in flat]),
           "span_start": np.array([s / max(len(texts[i]), 1) for i, s, _ in flat]),
           "text_chars": np.array([len(t) for t in texts])}
    top = pd.Series(condition).value_counts().index[:10]
    words = {c: [len(texts[i][s:e].split()) for i, s, e in flat if condition[i] == c] for c in top}
    out["per_condition"] = {str(c): {"rows": int((condition == c).sum()),
                                     "none": float(np.mean([not found[i] for i in np.flatnonzero(condition == c)])),
                                     "median_span_words": float(np.median(words[c] or [0]))} for c in top}
    if tokenizer is not None and getattr(tokenizer, "is_fast", False):
        enc = tokenizer(texts, return_offsets_mapping=True, add_special_tokens=False)
        out["text_tokens"] = np.array([len(ids) for ids in enc["input_ids"]])
        inexact = 0
        for i, f in enumerate(found):
            if not f:
                continue
            offsets = enc["offset_mapping"][i]
            chars = spans.token_to_char_probs(offsets, spans.token_targets(offsets, f, texts[i]), len(texts[i]))
            back = spans.decode_threshold(chars, 0.5, texts[i], join_whitespace=False)
            inexact += back != spans.strip_spans(f, texts[i])
        out["inexact_rows"] = int(inexact)
    return out


def span_lines(comp, facts: dict) -> list:
    """span_facts in words."""
    w, c = facts["span_words"], facts["span_chars"]
    lines = [f"{facts['rows']} rows; {facts['none']:.1%} with no span; spans per row: mean "
             f"{facts['spans_per_row'].mean():.2f}, at most {facts['spans_per_row'].max()}",
             f"spans: median {np.median(w):.0f} words ({np.median(c):.0f} characters), 90% under "
             f"{np.percentile(w, 90):.0f} words; texts: median {np.median(facts['text_chars']):.0f} characters"]
    if "text_tokens" in facts:
        t = facts["text_tokens"]
        lines.append(f"texts: median {np.median(t):.0f} tokens, the longest {t.max()}; {facts['inexact_rows']} rows "
                     "have a span whose edge falls inside a token (decoded back, it gains or loses characters)")
    if comp.text_pair:
        lines.append(f"per {comp.text_cols[0]} (most frequent first): " + "; ".join(
            f"{k} {v['rows']} rows, {v['none']:.0%} none, median {v['median_span_words']:.0f} words"
            for k, v in facts["per_condition"].items()))
    return lines


def span_baselines(comp, df: pd.DataFrame, folds: np.ndarray) -> dict:
    """{baseline: the competition's metric} of answers that need no model, on every row: no span;
    the whole text; where rows answer with any number of spans (NBME), the labels' texts of the same
    condition on the other folds found again in the text (case ignored, whole words)."""
    obj = objective_of(comp)
    metric = get_metric(comp.metric_name)
    texts = df[comp.span_col].astype(str).tolist()
    truth = [obj.answer(a) for a in df[comp.target_cols[0]].tolist()]
    found = [obj.spans_of(t, a) for t, a in zip(texts, truth)]
    condition = df[comp.text_cols[0]].astype(str).to_numpy() if comp.text_pair else np.full(len(df), "")
    out = {"no span": metric.score(truth, [obj.written(t, ()) for t in texts]),
           "the whole text": metric.score(truth, [obj.written(t, ((0, len(t)),) if t else ()) for t in texts])}
    if obj.heads == 2:
        return out
    pred = [None] * len(df)
    for k in np.unique(folds):
        phrases: dict = {}
        for i in np.flatnonzero(folds != k):
            phrases.setdefault(condition[i], set()).update(texts[i][s:e].lower() for s, e in found[i])
        patterns = {c: re.compile("|".join(rf"(?<!\w){re.escape(p)}(?!\w)" for p in sorted(ps, key=len, reverse=True)
                                           if p.strip()) or r"(?!)", re.IGNORECASE) for c, ps in phrases.items()}
        for i in np.flatnonzero(folds == k):
            hits = [m.span() for m in patterns.get(condition[i], re.compile(r"(?!)")).finditer(texts[i])]
            pred[i] = obj.written(texts[i], tuple(hits))
    out["the condition's labels on the other folds, found in the text"] = metric.score(truth, pred)
    return out
