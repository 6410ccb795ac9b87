"""Metrics, light (numpy, scikit-learn: no torch), importable by ensembling and EDA.

Each metric is one entry of METRICS and knows what it needs (the way scikit-learn's scorers do):
its direction, whether it scores values, labels or probabilities, and, for labels made from a
model's output, the decision rule that makes them (a threshold for F1 on probabilities, cut points
for quadratic weighted kappa on a regression output). Callers ask the metric, never its name.

Predictions are always (N, outputs): regression values, one column per target; class
probabilities, one column per class (binary: 2 columns); for rankings, a score per candidate (a
class, an option, a catalogue item), the answer being the k best; for spans (`needs` "spans"),
each row's answer as it is submitted: a text (Tweet's words) or its character spans (NBME's),
scored by utils.spans' functions. Truths are (N, targets) values or
(N,) class indices, or for rankings (N,) indices or an (N, candidates) 0/1 matrix (several true
items). MAP@k and recall@k exist for every k: `map@25`, `recall@100`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from . import spans


def rmse(y, p) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((np.asarray(y, float) - np.asarray(p, float)) ** 2)))


def mcrmse(y, p) -> float:
    """Mean over columns of each column's RMSE; y and p (N, T)."""
    y, p = np.asarray(y, float).reshape(len(y), -1), np.asarray(p, float).reshape(len(p), -1)
    return float(np.mean(np.sqrt(np.mean((y - p) ** 2, axis=0))))


def _correlation(y, p, ranks: bool = False) -> float:
    """Pearson's r (of ranks: Spearman's rho) of each target column with its prediction, averaged
    over the targets; y and p (N, T). A column predicted as one constant has no correlation to
    measure: it counts 0, not NaN, so checkpoints and blends still compare."""
    y, p = np.asarray(y, float).reshape(len(y), -1), np.asarray(p, float).reshape(len(p), -1)
    if ranks:
        from scipy.stats import rankdata

        y, p = rankdata(y, axis=0), rankdata(p, axis=0)
    rs = []
    for j in range(y.shape[1]):
        if np.ptp(y[:, j]) == 0 or np.ptp(p[:, j]) == 0:  # a constant (its mean is not exact in floats)
            rs.append(0.0)
            continue
        a, b = y[:, j] - y[:, j].mean(), p[:, j] - p[:, j].mean()
        rs.append(float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())))
    return float(np.mean(rs))


def pearson(y, p) -> float:
    """Pearson's correlation, averaged over targets (US Patent Phrase Matching's metric)."""
    return _correlation(y, p)


def spearman(y, p) -> float:
    """Spearman's rank correlation, averaged over targets."""
    return _correlation(y, p, ranks=True)


def _f1(y, labels) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(np.ravel(y).astype(int), np.ravel(labels).astype(int)))


def _accuracy(y, labels) -> float:
    return float(np.mean(np.ravel(y).astype(int) == np.ravel(labels).astype(int)))


def _qwk(y, labels) -> float:
    from sklearn.metrics import cohen_kappa_score

    y, labels = np.rint(np.ravel(y)).astype(int), np.rint(np.ravel(labels)).astype(int)
    return float(cohen_kappa_score(y, labels, weights="quadratic"))


def _roc_auc(y, prob) -> float:
    """ROC AUC: of P(class 1) for two classes, one-vs-rest for more; for several 0/1 labels (y
    (N, L) like prob), the mean column-wise ROC AUC (Jigsaw's)."""
    from sklearn.metrics import roc_auc_score

    prob = np.asarray(prob, float)
    if np.ndim(y) == 2 and np.shape(y) == prob.shape:
        y = np.asarray(y).astype(int)
        return float(np.mean([roc_auc_score(y[:, j], prob[:, j]) if 0 < y[:, j].sum() < len(y) else 0.5
                              for j in range(y.shape[1])]))
    if prob.shape[1] == 2:
        return float(roc_auc_score(np.ravel(y).astype(int), prob[:, 1]))
    return float(roc_auc_score(np.ravel(y).astype(int), prob, multi_class="ovr"))


def _log_loss(y, prob) -> float:
    """Log-loss of class probabilities; for several 0/1 labels (y (N, L) like prob), the binary
    log-loss averaged over labels."""
    if np.ndim(y) == 2 and np.shape(y) == np.shape(prob):
        y, prob = np.asarray(y, float), np.clip(np.asarray(prob, float), 1e-15, 1 - 1e-15)
        return float(-np.mean(y * np.log(prob) + (1 - y) * np.log(1 - prob)))
    prob = np.clip(np.asarray(prob, float), 1e-15, 1.0)
    return float(-np.mean(np.log(prob[np.arange(len(prob)), np.ravel(y).astype(int)])))


def top_k(scores, k: int) -> np.ndarray:
    """(N, min(k, candidates)) indices of each row's k best scores, best first (ties: the lower
    index first, as a stable sort keeps them)."""
    scores = np.asarray(scores, float)
    k = min(k, scores.shape[1])
    if 0 < k < scores.shape[1] // 4:  # a partial sort first: catalogues of thousands
        # argpartition finds the k-th score but picks any of the items tied with it: keep every item
        # above it and, of those tied with it, the lowest indices (the rule a stable sort keeps).
        kth = -np.partition(-scores, k - 1, axis=1)[:, k - 1 : k]  # (N, 1)
        above, tied = scores > kth, scores == kth
        keep = above | (tied & (np.cumsum(tied, 1) <= k - above.sum(1, keepdims=True)))
        if (keep.sum(1) == k).all():  # else a NaN row: the full sort below
            part = np.nonzero(keep)[1].reshape(len(scores), k)  # each row's kept indices, ascending
            order = np.argsort(-np.take_along_axis(scores, part, 1), axis=1, kind="stable")
            return np.take_along_axis(part, order, 1)
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def _relevant(y, n: int, c: int) -> np.ndarray:
    """The truth as an (N, candidates) boolean matrix: from (N,) indices (-1: no candidate of the
    row is a true item, e.g. a reranker's candidates that miss it: the row scores 0), or an (N, C)
    0/1 one."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape == (n, c):
        return y.astype(bool)
    y = np.ravel(y).astype(int)
    rel = np.zeros((n, c), dtype=bool)
    rel[np.flatnonzero(y >= 0), y[y >= 0]] = True
    return rel


def map_at_k(y, scores, k: int) -> float:
    """Mean average precision at k, as Kaggle computes it (Eedi, LLM Science Exam, MAP 2025): per
    row, the sum of the precision at each rank i <= k that holds a true item, over min(true items,
    k); mean over rows (one true item: 1/its rank, 0 past k)."""
    scores = np.asarray(scores, float)
    n, c = scores.shape
    rel = _relevant(y, n, c)
    hits = np.take_along_axis(rel, top_k(scores, k), 1).astype(float)  # (N, k)
    precision = np.cumsum(hits, 1) / np.arange(1, hits.shape[1] + 1)
    m = np.minimum(rel.sum(1), k)
    return float(np.mean(np.where(m > 0, (precision * hits).sum(1) / np.maximum(m, 1), 0.0)))


def recall_at_k(y, scores, k: int) -> float:
    """The share of each row's true items in its top k, mean over rows (a retriever's figure:
    what a reranker over its top k can still find)."""
    scores = np.asarray(scores, float)
    n, c = scores.shape
    rel = _relevant(y, n, c)
    hits = np.take_along_axis(rel, top_k(scores, k), 1).sum(1)
    return float(np.mean(hits / np.maximum(rel.sum(1), 1)))


# ----------------------------------------------------------------------------- decision rules


def threshold_rule(y, prob) -> dict:
    """The threshold on P(class 1) that maximises F1 on (y, prob), from the observed scores."""
    p1 = np.asarray(prob, float)[:, 1]
    y = np.ravel(y).astype(int)
    candidates = np.unique(np.round(p1, 4))
    if len(candidates) > 200:  # enough resolution, bounded cost
        candidates = np.unique(np.quantile(p1, np.linspace(0, 1, 201)))
    best = max(candidates, key=lambda t: (_f1(y, p1 >= t), -abs(t - 0.5)))
    return {"threshold": float(best)}


def cutpoints_rule(y, values) -> dict:
    """Cut points on a regression output that maximise quadratic weighted kappa: start at the
    midpoints between the integer scores, then coordinate search, one cut at a time."""
    v = np.asarray(values, float).reshape(len(values), -1)[:, 0]
    y = np.rint(np.asarray(y, float).reshape(len(y), -1)[:, 0]).astype(int)
    lo, hi = int(y.min()), int(y.max())
    cuts = np.arange(lo, hi) + 0.5
    if len(cuts) == 0:
        return {"cutpoints": [], "low": lo}
    score = lambda c: _qwk(y, lo + np.searchsorted(np.sort(c), v))  # noqa: E731
    best = score(cuts)
    for _ in range(3):
        for i in range(len(cuts)):
            left = cuts[i - 1] if i else v.min() - 1
            right = cuts[i + 1] if i + 1 < len(cuts) else v.max() + 1
            for c in np.linspace(left, right, 22)[1:-1]:
                trial = cuts.copy()
                trial[i] = c
                s = score(trial)
                if s > best + 1e-12:
                    best, cuts = s, trial
    return {"cutpoints": [float(c) for c in cuts], "low": lo}


def apply_rule(rule: dict | None, pred: np.ndarray) -> np.ndarray:
    """Labels (N,) from predictions (N, outputs) under a fitted rule; None: the default rule
    (argmax of probabilities, the rounded value for one regression output)."""
    pred = np.asarray(pred, float)
    if rule and "threshold" in rule:
        return (pred[:, 1] >= rule["threshold"]).astype(int)
    if rule and "cutpoints" in rule:
        return rule["low"] + np.searchsorted(np.asarray(rule["cutpoints"]), pred[:, 0])
    if pred.shape[1] > 1:
        return pred.argmax(1)
    return np.rint(pred[:, 0]).astype(int)


RULES = {"threshold": threshold_rule, "cutpoints": cutpoints_rule}


# ----------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Metric:
    name: str
    fn: Callable  # (truth, what `needs` says) -> float
    greater_is_better: bool
    needs: str  # "values" (regression outputs), "labels" or "probabilities"
    rule: str = ""  # labels from outputs: "threshold" (probabilities) or "cutpoints" (values)
    title: str = ""  # as the competition's page writes it
    squares: bool = False  # a root of a mean of squares: folds pool through their squares
    top: int = 0  # a ranking metric's k: it scores the top `top` candidates of each row (MAP@k)
    # With a rule: whether its default (rule None) labels fairly when no other fold can fit one.
    rule_has_default: ClassVar[bool] = False

    def pool(self, scores, rows) -> float:
        """The score over several folds from each fold's score and row count, when only those are
        known (e.g. the last checkpoints'): RMSE pools its squared errors; other metrics do not
        pool exactly, so the folds' mean weighted by their rows."""
        scores, rows = np.asarray(scores, float), np.asarray(rows, float)
        if self.squares:
            return float(np.sqrt((rows * scores**2).sum() / rows.sum()))
        return float((rows * scores).sum() / rows.sum())

    def score(self, y, pred, rule: dict | None = None) -> float:
        """The metric of predictions (N, outputs) against the truth, labels made under `rule`."""
        if self.needs == "labels":
            return self.fn(y, self.labels_of(y, pred, rule))
        return self.fn(y, pred)

    def labels_of(self, y, pred, rule: dict | None) -> np.ndarray:
        """The labels (N,) the metric scores, made from predictions under `rule` (None: the default)."""
        return apply_rule(rule, pred)

    def loss(self, y, pred, rule: dict | None = None) -> float:
        """The score as a number to minimise (checkpoints, blends)."""
        s = self.score(y, pred, rule)
        return -s if self.greater_is_better else s

    def fit_rule(self, y, pred) -> dict | None:
        """The decision rule fitted on (y, pred); None when the metric needs none."""
        return RULES[self.rule](y, pred) if self.rule else None

    def honest_score(self, y, pred, folds) -> tuple[float, dict]:
        """The score with each fold's rule fitted on the other folds' rows (so no row is scored
        under a rule fitted on it); (score, {fold: rule}). Without a rule: the plain score."""
        if not self.rule:
            return self.score(y, pred), {}
        y, pred, folds = np.asarray(y), np.asarray(pred), np.asarray(folds)
        rules = {int(k): self.fit_rule(y[folds != k], pred[folds != k]) for k in np.unique(folds)}
        return self.score_under(y, pred, folds, rules), rules

    def score_under(self, y, pred, folds, rules: dict) -> float:
        """The score with each fold k's rows labelled under rules[k] (keys as ints or as blend.json's
        strings); every fold of `folds` must have its rule."""
        y, pred, folds = np.asarray(y), np.asarray(pred), np.asarray(folds)
        rules = {int(k): rule for k, rule in rules.items()}
        missing = sorted({int(k) for k in np.unique(folds)} - set(rules))
        if missing:
            raise ValueError(f"no decision rule for fold(s) {missing} (rules for {sorted(rules)})")
        labels = None
        for k, rule in rules.items():
            held = folds == k
            part = self.labels_of(y[held], pred[held], rule)
            labels = np.zeros(len(folds), dtype=part.dtype) if labels is None else labels
            labels[held] = part
        return self.fn(y, labels)


class _Registry(dict):
    """The metrics by name; `map@K` and `recall@K` (K a positive integer) exist for every K, made
    when first asked for."""

    def _made(self, name) -> bool:
        m = re.fullmatch(r"(map|recall)@([1-9][0-9]*)", str(name))
        if m and not dict.__contains__(self, name):
            k = int(m[2])
            fn, title = ((lambda y, p: map_at_k(y, p, k)), f"MAP@{k}") if m[1] == "map" else \
                ((lambda y, p: recall_at_k(y, p, k)), f"recall@{k}")
            self[name] = Metric(name, fn, True, "probabilities", title=title, top=k)
        return dict.__contains__(self, name)

    def __contains__(self, name):
        return self._made(name)

    def __missing__(self, name):
        if self._made(name):
            return dict.__getitem__(self, name)
        raise KeyError(name)


METRICS = _Registry(
    (m.name, m)
    for m in (
        Metric("rmse", rmse, False, "values", title="RMSE", squares=True),
        Metric("mcrmse", mcrmse, False, "values", title="MCRMSE"),
        Metric("f1", _f1, True, "labels", "threshold", "F1"),
        Metric("accuracy", _accuracy, True, "labels", title="accuracy"),
        Metric("roc_auc", _roc_auc, True, "probabilities", title="ROC AUC (mean column-wise for several labels)"),
        Metric("log_loss", _log_loss, False, "probabilities", title="log-loss"),
        Metric("qwk", _qwk, True, "labels", "cutpoints", "quadratic weighted kappa"),
        Metric("pearson", pearson, True, "values", title="Pearson correlation"),
        Metric("spearman", spearman, True, "values", title="Spearman correlation"),
        # parts of the text: the answers as submitted (utils.spans)
        Metric("jaccard", spans.word_jaccard, True, "spans", title="word-level Jaccard"),
        Metric("char_f1", spans.char_micro_f1, True, "spans", title="micro F1 over characters"),
        Metric("f5", spans.span_fbeta, True, "spans", title="micro F5 over entities (each row's spans)"),
    )
)


BUILTIN_METRICS = tuple(METRICS)


def run_source(code: str, source: str, module: str) -> dict:
    """The names a file of one's own defines (a description's metric or reshape file), run as
    module `module`; a ValueError, one line naming `source`, on any error in it."""
    scope: dict = {"__name__": module}
    try:
        exec(compile(code, source, "exec"), scope)  # noqa: S102 (the user's own file)
    except Exception as e:  # noqa: BLE001 (any error in the user's file, named)
        raise ValueError(f"{source} cannot be run: {type(e).__name__}: {e}") from None
    return scope


def register_code(code: str, name: str, source: str = "metric_file") -> Metric:
    """Run a metric file's source (a competition's metric of its own) and register the Metric it
    defines called `name` in METRICS, where every part of the kit finds it. The file is Python that
    defines a utils.metrics.Metric, e.g.

        from utils.metrics import Metric

        def _score(y, p):      # y: the truth; p: (N, outputs) values or probabilities, or labels
            ...
        METRIC = Metric("my_metric", _score, greater_is_better=True, needs="values")

    Registering the same name again replaces it (the file was edited); a built-in's name is refused."""
    if name in BUILTIN_METRICS or re.fullmatch(r"(map|recall)@[0-9]+", str(name)):
        raise ValueError(f"{source}: {name!r} is a built-in metric; give yours another name")
    scope = run_source(code, source, f"competition_metric_{name}")
    found = [v for v in scope.values() if isinstance(v, Metric)]
    mine = [m for m in found if m.name == name]
    if not mine:
        names = ", ".join(repr(m.name) for m in found) or "none"
        raise ValueError(f"{source} defines no Metric named {name!r} (the description's metric); found: {names}")
    m = mine[0]
    if m.needs not in ("values", "labels", "probabilities", "spans") or m.rule not in ("", *RULES):
        raise ValueError(f"{source}: Metric {name!r}: needs is values, labels, probabilities or spans; rule is "
                         f"'', {', '.join(RULES)}; got needs={m.needs!r}, rule={m.rule!r}")
    METRICS[name] = m
    return m


def check_on_sample(metric: Metric, y, pred, source: str = "metric_file") -> None:
    """Score made-up predictions once, of the shapes training passes (truth y; outputs pred (N,
    outputs), made labels as `metric.needs` says), so that a metric of one's own that fails, or
    returns anything but a finite number on ordinary input, says so when its description is read,
    not after a fold has trained: a ValueError, one line naming `source` (its file)."""
    given = apply_rule(None, pred) if metric.needs == "labels" else pred
    what = (f"a sample of {len(y)} ordinary rows (truth {np.shape(y)}, {metric.needs} {np.shape(given)}, "
            "as training passes them)")
    try:
        s = metric.score(y, pred)
    except Exception as e:  # noqa: BLE001 (any error in the user's metric, named)
        raise ValueError(f"{source}: metric {metric.name!r} fails on {what}: {type(e).__name__}: {e}") from None
    dtype = np.asarray(s).dtype if np.ndim(s) == 0 else None
    if dtype is None or not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)):
        shown = repr(s) if len(repr(s)) <= 60 else repr(s)[:57] + "..."
        raise ValueError(f"{source}: metric {metric.name!r} returns {shown} ({type(s).__name__}) on {what}: "
                         "a metric returns one number")
    if not np.isfinite(float(s)):
        raise ValueError(f"{source}: metric {metric.name!r} returns {float(s)} on {what}: a metric returns a "
                         "finite number on ordinary predictions (else every checkpoint's score is NaN)")


def get_metric(name: str) -> Metric:
    """The metric called `name`; an error listing the known ones."""
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; valid: {', '.join(BUILTIN_METRICS)}, map@K, recall@K")
    return METRICS[name]
