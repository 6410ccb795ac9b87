"""What a model learns, one class per kind: its labels and targets, its loss, its activation and
its head's first bias, and what its metrics may score. Chosen once from the competition
(`objective_of`); the rest of the kit asks it and never compares a task's name. What a run's files
hold of its outputs (oof.csv's columns, blends, the submission) is its `outputs`
(utils.outputs, one class per kind there too). A new kind is one more subclass of Objective, one
more entry of OBJECTIVES and one more class of utils.outputs, named by its OUTPUTS.

The kinds are what a model is trained as (a competition's task maps onto one of them in
utils.competition.TASKS): `regression` (Regression: one value per target, T >= 1),
`classification` (Classification: one probability per class, K >= 2, softmax), `multilabel`
(MultiLabel: one probability per 0/1 label, L >= 2, sigmoid), `multiple_choice` (a score per
option), `retrieval` (an embedding, ranked against a catalogue) and `spans` (character scores).
The name is what kit_config.json and config.json record; `kind` says what a row's target is
("values", "classes", "labels", "options", "items", "spans"), and is what utils.eda reads the
targets by.

Light: numpy and pandas; torch only inside the training functions.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from . import outputs, spans
from .data import DataError, _rows, item_id, label_text
from .metrics import METRICS, rmse
from .outputs import Decoded, read_chars  # noqa: F401  (their home is utils.outputs; named here as before)


def softened(p: np.ndarray, temperature: float) -> np.ndarray:
    """Probabilities (..., classes) at a temperature: p ** (1 / T) renormalised, as a softmax of
    the logits divided by T (T > 1 flattens them, a teacher's "dark knowledge"; T = 1 keeps them)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.where(p > 0, np.power(np.clip(p, 1e-12, 1.0), 1.0 / temperature), 0.0)  # 0 stays 0 (a text's edge)
    return q / np.maximum(q.sum(axis=-1, keepdims=True), 1e-12)


def softened_labels(p: np.ndarray, temperature: float) -> np.ndarray:
    """0/1 labels' probabilities (...), each softened as two classes."""
    p = np.asarray(p, dtype=np.float64)
    return softened(np.stack([1 - p, p], axis=-1), temperature)[..., 1]


@dataclass(frozen=True)
class Objective:
    """What the kinds share: one output per target column (Classification has one per class
    instead) and the checks of a metric against the outputs. Each kind implements the rest."""

    name: str  # what kit_config.json's "task" and config.json's "task" record
    blend_metric: str  # what blend weights are fitted on (smooth, unlike F1)
    own_metrics: tuple  # the loss's own figures, reported beside the competition's metric
    submissions: tuple  # what its submission may hold (utils.competition.SUBMISSIONS)
    scores: tuple  # what its metrics may score: Metric.needs ("values", "labels", "probabilities")
    rules: tuple  # the decision rules (Metric.rule) that make labels of its outputs
    # What a row's target is: "values" (one value per target), "classes" (one class label per row)
    # or "labels" (several 0/1 labels, a probability each).
    kind: ClassVar[str] = ""
    stratified: ClassVar[bool] = True  # folds stratified on the target (not on a retriever's thousands of ids)
    blank_answers: ClassVar[bool] = False  # a row's label may be empty (a span task's row with no span)
    default_rule: ClassVar[str] = "argmax / rounding"  # how labels are made where no rule was fitted
    # What its outputs need of every run, whatever the flags ("": nothing): a span task's model reads
    # every token (pooling "tokens") and a long text in windows (fit "windows").
    pooling: ClassVar[str] = ""
    fit: ClassVar[str] = ""
    OUTPUTS: ClassVar[type] = outputs.Outputs  # what a run's files hold of its outputs (utils.outputs)

    @property
    def outputs(self) -> outputs.Outputs:
        """What a run's files hold of this objective's outputs: oof.csv's columns, blends, the
        submission (utils.outputs)."""
        return self.OUTPUTS(self)

    @property
    def classes(self) -> bool:
        """The outputs are class probabilities (an option's for multiple choice): oof.csv's
        prob_<label> columns, class-stratified folds."""
        return self.kind in ("classes", "options")

    @property
    def labelled(self) -> bool:
        """The target is a label (a class, an option's letter, a catalogue id), not a number."""
        return self.kind in ("classes", "options", "items", "spans")

    def for_competition(self, comp) -> Objective:
        """This objective as a competition trains it (most keep nothing of their own)."""
        return self

    def refuses(self, metric) -> str:
        """Why `metric` cannot score this kind of output ("" when it can)."""
        if metric.needs not in self.scores or metric.rule and metric.rule not in self.rules:
            what = f"{metric.needs}" + (f" made by a {metric.rule} rule" if metric.rule else "")
            return f"{metric.name} scores {what}; a {self.name} model's outputs are scored as {', '.join(self.scores)}"
        return ""

    # ---- training
    def check_labels(self, comp, df: pd.DataFrame, name: str, items=None) -> None:
        """What a training file's labels must be, refused in one line naming the file `name`, the
        column and a row (values: anything numeric, read as such by utils.data); `items`: a
        retriever's catalogue ids."""

    def labels_as_read(self, values: pd.Series) -> pd.Series:
        """A training file's label column as the rest of the kit compares it: as it is (a
        retriever's ids as its catalogue writes them: 583.0 is 583)."""
        return values

    def labels(self, values: pd.Series, num_labels: int = 0, source: str = "", order=()) -> list | None:
        """The class labels of a target column (None: no classes): `order` (the description's
        classes) when given, else sorted; checked against --num-labels."""
        return None

    def num_outputs(self, target_cols, labels, num_labels: int = 0) -> int:
        """The head's width: a value per target, or a logit per class."""
        return len(target_cols)

    def output_names(self, target_cols, labels) -> tuple:
        """What the model's outputs are named (ModelSpec.target_names): targets, or class labels."""
        return tuple(target_cols)

    def targets(self, df: pd.DataFrame, target_cols, labels, extra_cols=()) -> np.ndarray:
        """(N,) class ids, or (N, T + extra) float targets (extra: e.g. a standard error column)."""
        raise NotImplementedError

    def soft(self, y: np.ndarray, n_out: int) -> np.ndarray:
        """Targets as the rows they are mixed with (pseudo-labels): one-hot class probabilities."""
        return y

    # Which rows a teacher's outputs are made for and mixed into a student's targets: "texts" (other
    # texts: pseudo-labels, utils.train --pseudo-csv), "training" (the training rows: --distil-csv);
    # `answers`: what a row's answer is, in signal_not_made's line.
    signals: ClassVar[tuple] = ()
    answers: ClassVar[str] = ""

    def taught(self, texts: pd.DataFrame, teacher: np.ndarray) -> np.ndarray:
        """The targets of pseudo-labelled texts (no label) from their teacher's outputs: the
        outputs themselves (values; class or label probabilities, soft labels)."""
        return teacher

    def distilled(self, y: np.ndarray, teacher: np.ndarray, weight: float, temperature: float) -> np.ndarray:
        """Training targets (n, outputs) mixing the labels y with a teacher's outputs (n, outputs):
        (1 - weight) x the label + weight x the teacher's prediction (values) or its probabilities
        softened by `temperature` (classes, labels)."""
        raise NotImplementedError

    def target_mean(self, y: np.ndarray, n_targets: int, n_out: int) -> np.ndarray:
        """The training rows' mean output (N,) -> (outputs,): class shares, or target means."""
        return y[:, :n_targets].astype(float).mean(0)

    def head_bias(self, mean: np.ndarray) -> np.ndarray:
        """The head's bias that outputs `mean` before any training (logits: log shares)."""
        raise NotImplementedError

    def target_dtype(self, soft: bool):
        """The dtype of a batch's targets: class ids, or floats (values, soft labels)."""
        import torch

        return torch.float32

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        """Training loss in fp32: preds (B, outputs); y (B,) class ids or (B, K) probabilities, or
        (B, T[+1]) values; `weight` (B,): per-row weights (pseudo rows mixed with real ones);
        `kind` (regression): mse, rmse, or se (the last column of y is the target's standard
        error)."""
        raise NotImplementedError

    def activate(self, logits):
        """The head's raw outputs (B, outputs) -> predictions: class probabilities, or values."""
        raise NotImplementedError

    def own_scores(self, y: np.ndarray, pred: np.ndarray, target_cols) -> dict:
        """The loss's own figures (from utils.metrics) on predictions (N, outputs); 'score': the one
        a checkpoint minimises when the competition's metric is among them."""
        raise NotImplementedError

    def scored(self, y, pred: np.ndarray):
        """What the competition's metric scores of predictions (N, outputs) at its default rule:
        the predictions themselves (a span task's: the answers decoded from them)."""
        return pred

    def truth(self, y: np.ndarray, n_targets: int) -> np.ndarray:
        """The truth a metric scores: class ids, or the target columns (no extra ones)."""
        return y[:, :n_targets]

    def unlearnable(self, df: pd.DataFrame) -> tuple[np.ndarray | None, str, str]:
        """(the rows nothing can be learnt from nor scored on, what is wrong with them, why), left
        out of training and of the CV after the folds are made (utils.train.learnable_rows); (None,
        "", "") when every row can be."""
        return None, "", ""

    def trainable(self, y: np.ndarray) -> np.ndarray:
        """(N,) bool: the rows a model can learn from (all, but a multiple-choice row that no option
        answers: it is validated, scoring 0, never trained on)."""
        return np.ones(len(y), dtype=bool)

    def sample(self, comp, rows: int = 16) -> tuple[np.ndarray, np.ndarray]:
        """Made-up (truth, predictions (rows, outputs)) of the shapes training scores for the
        competition `comp`, ordinary ones (every class or label present, predictions near the
        truth): what a metric of one's own is tried on before any training
        (utils.metrics.check_on_sample)."""
        raise NotImplementedError


def _weighted_mean(per_row, weight):
    """The mean of a per-row loss (B,), weighted by `weight` (B,) when given."""
    if weight is None:
        return per_row.mean()
    return (weight * per_row).sum() / weight.sum().clamp(min=1e-8)


@dataclass(frozen=True)
class Regression(Objective):
    """One value per target (T >= 1): mean squared error (or RMSE, or a standard-error weighted
    one)."""

    kind: ClassVar[str] = "values"
    signals: ClassVar[tuple] = ("texts", "training")

    def distilled(self, y, teacher, weight, temperature):
        mixed = np.asarray(y, dtype=np.float32).copy()
        t = teacher.shape[1]
        mixed[:, :t] = (1 - weight) * mixed[:, :t] + weight * teacher
        return mixed
    OUTPUTS: ClassVar[type] = outputs.RegressionOutputs

    def targets(self, df, target_cols, labels, extra_cols=()):
        return df[list(target_cols) + list(extra_cols)].to_numpy(dtype=np.float32)

    def head_bias(self, mean):
        return mean

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        import torch
        import torch.nn.functional as F

        preds = preds.float()
        if kind == "se":
            # KL(N(target, se) || N(pred, se)) = (pred - target)^2 / (2 se^2): the model is trained
            # against the target's distribution, trusting precise targets more.
            se = y[:, n_targets].clamp(min=min_se)
            return ((preds[:, 0] - y[:, 0]) ** 2 / (2 * se**2)).mean()
        if weight is None:
            mse = F.mse_loss(preds, y[:, :n_targets])
        else:
            per_row = ((preds - y[:, :n_targets]) ** 2).mean(1)
            mse = (weight * per_row).sum() / weight.sum().clamp(min=1e-8)
        return torch.sqrt(mse + 1e-8) if kind == "rmse" else mse

    def activate(self, logits):
        return logits

    def own_scores(self, y, pred, target_cols):
        per = {c: rmse(y[:, i], pred[:, i]) for i, c in enumerate(target_cols)}
        out = {"score": float(np.mean(list(per.values()))), "rmse": float(np.mean(list(per.values())))}
        if len(target_cols) > 1:
            out["rmse_per_target"] = per
        return out

    def sample(self, comp, rows=16):
        rng = np.random.default_rng(0)
        lo, hi = comp.target_range or (0.0, 4.0)
        y = rng.uniform(lo, hi, (rows, len(comp.target_cols)))
        y = y if comp.continuous else np.rint(y)  # integer scores
        return y, np.clip(y + rng.normal(0, 0.1 * (hi - lo), y.shape), lo, hi)


@dataclass(frozen=True)
class Classification(Objective):
    """One class label per row (K >= 2 classes): a logit per class, softmax, cross-entropy; labels
    made by argmax, or a threshold fitted for F1."""

    kind: ClassVar[str] = "classes"
    OUTPUTS: ClassVar[type] = outputs.ClassificationOutputs

    def check_labels(self, comp, df, name, items=None):
        """Every label among `classes`; string labels of a binary task only with `classes` (which one
        is positive); at least two classes. A class of `classes` (the sample submission's) that no
        training row holds is trained and submitted all the same: a warning on stderr names it."""
        col = comp.target_cols[0]
        text = df[col].map(label_text)
        if comp.classes:
            bad = ~text.isin([label_text(c) for c in comp.classes]).to_numpy()
            if bad.any():
                raise DataError(f"{name}: column {col!r} holds {text[bad].iloc[0]!r}, not one of the description's "
                                f"classes {list(comp.classes)}, at {_rows(df, bad, comp.id_col)}")
        elif comp.binary and not set(text) <= {"0", "1"}:
            raise DataError(f"{name}: column {col!r} holds labels {sorted(set(text))[:2]}: a binary task with labels "
                            "other than 0/1 needs \"classes\": [negative, positive] in its description (F1 and "
                            "the submission's probability are for the positive one)")
        if text.nunique() < 2:
            raise DataError(f"{name}: column {col!r} holds one class only ({text.iloc[0]!r}): a classifier needs "
                            "rows of two classes or more")
        unseen = [label_text(c) for c in comp.classes if label_text(c) not in set(text)]
        if unseen:
            what = f"class {unseen[0]!r}" if len(unseen) == 1 else f"classes {', '.join(map(repr, unseen))}"
            print(f"warning: {name}: column {col!r} has no row of {what} (of the description's classes "
                  f"{list(comp.classes)}): the model is trained and submits without ever seeing one (its "
                  "probability stays near 0)", file=sys.stderr, flush=True)

    def labels(self, values, num_labels: int = 0, source: str = "", order=()):
        if order:
            as_text = {label_text(v): v for v in values.unique().tolist()}
            labels = [as_text.get(label_text(c), c) for c in order]  # the column's own values, in order
        else:
            labels = sorted(values.unique().tolist())
        if num_labels and len(labels) > num_labels:
            raise ValueError(f"{source}: column {values.name!r} has {len(labels)} classes but "
                             f"--num-labels is {num_labels}")
        return labels

    def num_outputs(self, target_cols, labels, num_labels: int = 0):
        return num_labels or len(labels)

    def output_names(self, target_cols, labels):
        return tuple(map(str, labels))

    def targets(self, df, target_cols, labels, extra_cols=()):
        return df[target_cols[0]].map({v: i for i, v in enumerate(labels)}).to_numpy()

    def soft(self, y, n_out):
        return np.eye(n_out, dtype=np.float32)[y.astype(int)]

    signals: ClassVar[tuple] = ("texts", "training")

    def distilled(self, y, teacher, weight, temperature):
        return ((1 - weight) * self.soft(y, teacher.shape[1]) + weight * softened(teacher, temperature)).astype(
            np.float32)

    def target_mean(self, y, n_targets, n_out):
        return np.bincount(y.astype(int), minlength=n_out) / len(y)

    def head_bias(self, mean):
        return np.log(np.maximum(mean, 1e-6))

    def target_dtype(self, soft):
        import torch

        return torch.float32 if soft else torch.long

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        import torch.nn.functional as F

        logp = F.log_softmax(preds.float(), -1)
        per_row = -(y * logp).sum(1) if y.ndim == 2 else F.nll_loss(logp, y.long(), reduction="none")
        return _weighted_mean(per_row, weight)

    def activate(self, logits):
        import torch

        return torch.softmax(logits, dim=-1)

    def own_scores(self, y, pred, target_cols):
        out = {name: METRICS[name].score(y, pred) for name in self.own_metrics}
        return {"score": out["log_loss"], **out}

    def truth(self, y, n_targets):
        return y

    def sample(self, comp, rows=16):
        rng = np.random.default_rng(0)
        n_classes = len(comp.classes) or (2 if comp.binary else 3)  # 3 stand for a multiclass task's
        y = np.arange(rows) % n_classes
        logits = rng.normal(0, 1, (rows, n_classes))
        logits[np.arange(rows), y] += 1.5
        p = np.exp(logits)
        return y, p / p.sum(1, keepdims=True)




@dataclass(frozen=True)
class MultiLabel(Objective):
    """Several 0/1 labels (Jigsaw's toxic comments): one logit per label, sigmoid, binary
    cross-entropy."""

    kind: ClassVar[str] = "labels"
    signals: ClassVar[tuple] = ("texts", "training")

    def distilled(self, y, teacher, weight, temperature):
        p = softened_labels(teacher, temperature)
        return ((1 - weight) * np.asarray(y, dtype=np.float32) + weight * p).astype(np.float32)
    OUTPUTS: ClassVar[type] = outputs.MultiLabelOutputs

    def check_labels(self, comp, df, name, items=None):
        """Every target 0 or 1."""
        for c in comp.target_cols:
            bad = ~df[c].isin([0, 1]).to_numpy()
            if bad.any():
                raise DataError(f"{name}: column {c!r} of a multilabel task holds {df[c][bad].iloc[0]!r}, not 0 "
                                f"or 1, at {_rows(df, bad, comp.id_col)}")

    def targets(self, df, target_cols, labels, extra_cols=()):
        return df[list(target_cols)].to_numpy(dtype=np.float32)

    def head_bias(self, mean):
        m = np.clip(mean, 1e-6, 1 - 1e-6)
        return np.log(m / (1 - m))

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        import torch.nn.functional as F

        per_row = F.binary_cross_entropy_with_logits(preds.float(), y[:, :n_targets].float(),
                                                     reduction="none").mean(1)
        return _weighted_mean(per_row, weight)

    def activate(self, logits):
        import torch

        return torch.sigmoid(logits)

    def own_scores(self, y, pred, target_cols):
        out = {name: METRICS[name].score(y[:, : len(target_cols)], pred) for name in self.own_metrics}
        return {"score": out["log_loss"], **out}

    def sample(self, comp, rows=16):
        rng = np.random.default_rng(0)
        y = (rng.uniform(size=(rows, len(comp.target_cols))) < 0.5).astype(float)
        y[0], y[1] = 0.0, 1.0  # each label both present and absent
        return y, np.clip(0.3 + 0.4 * y + rng.normal(0, 0.15, y.shape), 0.01, 0.99)


@dataclass(frozen=True)
class MultipleChoice(Classification):
    """Options in columns of the row (LLM Science Exam's A-E): each (text, option) pair is one
    sequence through the model and gets one score; the row's scores compared with each other
    (softmax over its options), cross-entropy on the true one. The classes are the option columns;
    the answer the top answer_k of them."""

    kind: ClassVar[str] = "options"
    signals: ClassVar[tuple] = ("training",)  # the teacher's probabilities over a training row's options
    answers: ClassVar[str] = "a ranking of its options"
    OUTPUTS: ClassVar[type] = outputs.MultipleChoiceOutputs

    def check_labels(self, comp, df, name, items=None):
        """The answer names one of the row's option columns (or the description's no-answer)."""
        col = comp.target_cols[0]
        text = df[col].map(label_text)
        bad = ~text.isin([*comp.options, *([comp.no_answer] if comp.no_answer else [])]).to_numpy()
        if bad.any():
            raise DataError(f"{name}: column {col!r} holds {text[bad].iloc[0]!r}, not one of the options "
                            f"{', '.join(comp.options)}, at {_rows(df, bad, comp.id_col)}")

    def labels(self, values, num_labels: int = 0, source: str = "", order=()):
        return list(order)  # the option columns, in the description's order

    def num_outputs(self, target_cols, labels, num_labels: int = 0):
        return 1  # one score per (text, option) sequence; a row's K scores are its outputs

    def target_mean(self, y, n_targets, n_out):
        return np.zeros(0)  # nothing to predict a blank row as: a row's options are always read

    def head_bias(self, mean):
        return np.zeros(1)  # a bias every option shares cancels in the softmax

    def targets(self, df, target_cols, labels, extra_cols=()):
        """The true option's index; -1 for a row none of whose options is right (no_answer)."""
        index = {str(v): i for i, v in enumerate(labels)}
        return df[target_cols[0]].map(label_text).map(index).fillna(-1).astype(int).to_numpy()

    def trainable(self, y):
        return np.asarray(y) >= 0

    def own_scores(self, y, pred, target_cols):
        """Log-loss and accuracy of the rows an option answers (a row none answers has no true
        option to score: MAP@k counts it 0)."""
        ok = np.asarray(y) >= 0
        out = {name: METRICS[name].score(np.asarray(y)[ok], pred[ok]) if ok.any() else float("nan")
               for name in self.own_metrics}
        return {"score": out["log_loss"], **out}

    def sample(self, comp, rows=16):
        rng = np.random.default_rng(0)
        k = len(comp.options)
        y = np.arange(rows) % k
        scores = rng.normal(0, 1, (rows, k))
        scores[np.arange(rows), y] += 1.5
        p = np.exp(scores)
        return y, p / p.sum(1, keepdims=True)


@dataclass(frozen=True)
class Retrieval(Objective):
    """Items of a catalogue (Eedi's 2,587 misconceptions): a query and an item are each embedded by
    the backbone and pooling (no head), L2-normalised; trained with a contrastive loss (InfoNCE:
    the true item against the batch's other items and mined hard negatives, at a temperature); a
    query's outputs are its cosine similarity to every item of the catalogue, the answer its top
    answer_k items. The labels are the catalogue's ids, in its order; a query's out-of-fold row
    keeps its top `keep` ids (CANDIDATES, or answer_k when larger: what a reranker reads)."""

    answers: ClassVar[str] = "a ranking of a catalogue"
    kind: ClassVar[str] = "items"
    OUTPUTS: ClassVar[type] = outputs.RetrievalOutputs
    stratified: ClassVar[bool] = False
    CANDIDATES: ClassVar[int] = 100
    keep: int = CANDIDATES  # candidates kept per query: CANDIDATES, or answer_k when larger (for_competition)

    def labels_as_read(self, values):
        return values.map(item_id)

    def check_labels(self, comp, df, name, items=None):
        """Every true item is in the catalogue (`items`; not checked without it)."""
        if items is None:
            return
        col = comp.target_cols[0]
        text = df[col].map(label_text)
        bad = ~text.isin(items).to_numpy()
        if bad.any():
            raise DataError(f"{name}: column {col!r} holds {text[bad].iloc[0]!r}, an id the catalogue "
                            f"{comp.catalogue[0]} lacks, at {_rows(df, bad, comp.id_col)}")

    def labels(self, values, num_labels: int = 0, source: str = "", order=()):
        return [str(v) for v in order]  # the catalogue's ids

    def num_outputs(self, target_cols, labels, num_labels: int = 0):
        return 0  # no head: the pooled embedding is the output

    def output_names(self, target_cols, labels):
        return ()

    def targets(self, df, target_cols, labels, extra_cols=()):
        index = {v: i for i, v in enumerate(labels)}
        return df[target_cols[0]].astype(str).map(index).to_numpy()

    def target_mean(self, y, n_targets, n_out):
        return np.zeros(0)

    def head_bias(self, mean):
        return np.zeros(0)

    def target_dtype(self, soft):
        import torch

        return torch.long

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        """preds: (B, candidates) similarity logits (already over the temperature, false negatives
        at -inf: utils.shapes' forward); y (B,): each query's true column."""
        import torch.nn.functional as F

        return _weighted_mean(F.cross_entropy(preds.float(), y.long(), reduction="none"), weight)

    def activate(self, logits):
        import torch.nn.functional as F

        return F.normalize(logits.float(), dim=-1)  # embeddings: cosine is their dot product

    def for_competition(self, comp) -> Retrieval:
        """Kept candidates enough for the submission's answer_k: the CV (MAP@k of oof.csv) is then
        the MAP@k of the lists submitted, never of lists cut shorter."""
        return dataclasses.replace(self, keep=max(self.CANDIDATES, comp.answer_k))

    def own_scores(self, y, pred, target_cols):
        k = self.keep
        return {"score": -METRICS[f"recall@{k}"].score(y, pred), f"recall@{k}": METRICS[f"recall@{k}"].score(y, pred)}

    def truth(self, y, n_targets):
        return y

    def sample(self, comp, rows=16):
        rng = np.random.default_rng(0)
        n_items = max(comp.answer_k * 2, 8)
        y = np.arange(rows) % n_items
        scores = rng.normal(0, 1, (rows, n_items))
        scores[np.arange(rows), y] += 1.5
        return y, scores


@dataclass(frozen=True)
class Spans(Objective):
    """Parts of one of the row's texts (Tweet's selected words, NBME's character spans): every token
    of the row's sequence gets an output (pooling "tokens", no pooling), the fast tokenizer's offsets
    map them to characters (utils.spans), and a row's outputs are **character scores** (N, C, heads),
    C its longest text, zero past a row's text: one head, each character's probability of lying in
    a span (per-token binary cross-entropy: any number of spans, NBME); two, start and end
    distributions (cross-entropy on the span's first and last token: one span, Tweet). The answer is
    decoded from them (utils.spans.decode), written as the labels are (a text, or "s e;s e" offsets).

    A row's target is (its span text, its answer as the file wrote it). What its run keeps (oof.csv's
    answers, each fold's character scores, the one-head threshold fitted on the other folds) is
    utils.outputs.SpansOutputs'."""

    kind: ClassVar[str] = "spans"
    OUTPUTS: ClassVar[type] = outputs.SpansOutputs
    pooling: ClassVar[str] = "tokens"
    fit: ClassVar[str] = "windows"
    stratified: ClassVar[bool] = False
    blank_answers: ClassVar[bool] = True
    default_rule: ClassVar[str] = "characters above 0.5"
    THRESHOLDS: ClassVar[tuple] = spans.THRESHOLDS  # one head's: fitted among these
    count: str = "many"  # "one": start/end; "many": a probability per character
    labels_as: str = "offsets"  # "text" or "offsets" (utils.competition.SPAN_LABELS)
    span_col: str = ""

    def for_competition(self, comp) -> Spans:
        return dataclasses.replace(self, count=comp.span_count, labels_as=comp.span_labels, span_col=comp.span_col)

    @property
    def heads(self) -> int:
        return 2 if self.count == "one" else 1

    def answer(self, cell, where: str = "label"):
        """A label cell as an answer: its text ("" for an empty cell), or its spans (parsed)."""
        if self.labels_as == "offsets":
            return spans.parse_location(cell, where)
        return "" if cell is None or (isinstance(cell, float) and np.isnan(cell)) else str(cell)

    def spans_of(self, text: str, answer, where: str = "label") -> tuple:
        """The answer's spans in `text`: offsets checked (merged where they overlap), a text aligned
        (utils.spans.align: verbatim, else the best window of whole words)."""
        if self.labels_as == "offsets":
            return spans.check_spans(answer, text, where)
        return spans.align(text, answer, where)[0]

    def written(self, text: str, found) -> object:
        """Decoded spans as the answer is written: a text, or the spans (format_location writes them)."""
        return spans.written(text, found, self.labels_as == "text")

    def check_labels(self, comp, df, name, items=None):
        """Offsets that parse and lie inside their text; a text label found in its text (a label
        sharing no word with it is refused; one found only approximately is counted, said in one
        warning line, and trained on at its best alignment)."""
        col, texts = comp.target_cols[0], df[self.span_col].astype(str).tolist()
        loose = []
        for i, (text, cell) in enumerate(zip(texts, df[col].tolist())):
            where = f"{name}: column {col!r}, row {i + 2} ({comp.id_col} {df[comp.id_col].iloc[i]!r})"
            try:
                answer = self.answer(cell, where)
                if self.labels_as == "offsets":
                    found = spans.check_spans(answer, text, where)
                    if self.heads == 2 and len(found) > 1:
                        raise ValueError(f"{where}: {len(found)} spans where span_count 'one' answers with one "
                                         "(a start and an end): span_count 'many' reads any number")
                elif not spans.align(text, answer, where)[1]:
                    loose.append(i)
            except ValueError as e:
                raise DataError(str(e)) from None
        if loose:
            print(f"warning: {name}: column {col!r} is not found verbatim in column {self.span_col!r} at "
                  f"{len(loose)} of {len(df)} rows (first: row {loose[0] + 2}); they train on their best "
                  "alignment (the same words, or the window of whole words most like them) and are scored "
                  "against the label as written", file=sys.stderr, flush=True)

    def unlearnable(self, df):
        """A blank text: no span to find, and Tweet's Jaccard divides by zero there (the real
        train.csv has one)."""
        blank = (df[self.span_col].astype(str).str.strip() == "").to_numpy()
        return blank, f"column {self.span_col!r} is empty", ("a blank text has no span to find, and the metric "
                                                            "divides by zero there")

    def num_outputs(self, target_cols, labels, num_labels: int = 0):
        return self.heads

    def output_names(self, target_cols, labels):
        return ("start", "end") if self.heads == 2 else ("span",)

    signals: ClassVar[tuple] = ("texts", "training")  # a teacher's character scores

    def taught(self, texts, teacher):
        """Each text with no answer (None) and its teacher's character scores at full weight: the
        student's token targets are the teacher's alone (window_targets)."""
        out = np.empty(len(teacher), dtype=object)
        for i, (text, chars) in enumerate(zip(texts[self.span_col].astype(str), teacher)):
            out[i] = (text, None, chars, 1.0, 1.0)
        return out

    def distilled(self, y, teacher, weight, temperature):
        """Each row's (span text, answer) with its teacher's character scores (len_text, heads), the
        weight and the temperature: the dataset mixes them into each window's token targets, in the
        student's own tokens (window_targets)."""
        out = np.empty(len(y), dtype=object)  # (their lengths checked on reading: SpansOutputs.read_signal)
        for i, ((text, answer), chars) in enumerate(zip(y, teacher)):
            out[i] = (text, answer, chars, weight, temperature)
        return out

    def window_targets(self, hard, teacher, weight: float, temperature: float) -> np.ndarray:
        """A window's labels `hard` mixed with its teacher's token probabilities (utils.spans.
        teacher_token_probs) as (1 - weight) x label + weight x teacher, the teacher's softened at
        `temperature` (as Classification and MultiLabel do). One head: (T,) float32, each token's 0/1
        label with the teacher's probability softened as two classes, -100 kept where the label
        ignores the token. Two heads: (2, T) float32, the one-hot first and last token with the
        teacher's start and end distributions (softened; 0 stays 0 outside the window's text)."""
        if self.heads == 1:
            hard = np.asarray(hard, dtype=np.float64)
            mixed = (1 - weight) * hard + weight * softened_labels(teacher, temperature)
            return np.where(hard == -100, -100.0, mixed).astype(np.float32)
        out = weight * softened(teacher, temperature)
        out[[0, 1], np.asarray(hard, dtype=int)] += 1 - weight
        return out.astype(np.float32)

    def targets(self, df, target_cols, labels, extra_cols=()):
        """(N,) objects: (the span text, the answer as the file wrote it)."""
        col, out = target_cols[0], np.empty(len(df), dtype=object)
        for i, (text, cell) in enumerate(zip(df[self.span_col].astype(str), df[col].tolist())):
            out[i] = (text, self.answer(cell))
        return out

    def target_mean(self, y, n_targets, n_out):
        """One head: the share of the training texts' characters inside a span (where the head's bias
        starts: the logit of that share); two: none."""
        if self.heads == 2:
            return np.zeros(0)
        inside = sum(sum(e - s for s, e in self.spans_of(text, answer)) for text, answer in y)
        return np.array([inside / max(sum(len(text) for text, _ in y), 1)])

    def head_bias(self, mean):
        if not len(mean):
            return np.zeros(self.heads)
        m = np.clip(mean, 1e-4, 1 - 1e-4)
        return np.log(m / (1 - m))

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        """preds (B, S, heads) token logits; y: (B, S) 0/1 per token (a student's: in [0, 1]), -100
        where no character of the span text is (binary cross-entropy over the rest), or (B, 2) the
        first and last token of the span (cross-entropy over the positions; utils.shapes.SpanRows
        masks what is not the text), a student's (B, 2, S) distributions over them."""
        import torch.nn.functional as F

        preds = preds.float()
        if self.heads == 2:  # y (B, 2) positions, or a student's (B, 2, S) distributions
            y = y.float() if y.dim() == 3 else y.long()
            per_row = (F.cross_entropy(preds[:, :, 0], y[:, 0], reduction="none")
                       + F.cross_entropy(preds[:, :, 1], y[:, 1], reduction="none")) / 2
            return _weighted_mean(per_row, weight)
        y = y.float()
        keep = (y != -100).float()
        per_token = F.binary_cross_entropy_with_logits(preds[:, :, 0], y.clamp(min=0), reduction="none") * keep
        if weight is None:
            return per_token.sum() / keep.sum().clamp(min=1)
        return _weighted_mean(per_token.sum(1) / keep.sum(1).clamp(min=1), weight)

    def activate(self, logits):
        import torch

        return torch.sigmoid(logits) if self.heads == 1 else torch.softmax(logits.float(), dim=1)

    def own_scores(self, y, pred, target_cols):
        return {}

    def truth(self, y, n_targets):
        return spans.objects(answer for _, answer in y)

    def decoded(self, y, pred, threshold: float = 0.5) -> list:
        """Each row's answer from its character scores (N, C, heads), `threshold` for one head."""
        return spans.answers([text for text, _ in y], pred, threshold, self.labels_as == "text")

    def scored(self, y, pred, threshold: float = 0.5):
        return spans.objects(self.decoded(y, pred, threshold))

    def sample(self, comp, rows=16):
        rng = np.random.default_rng(0)
        y = np.empty(rows, dtype=object)
        pred = np.zeros((rows, 24, self.heads))
        for i in range(rows):
            text = f"word{i} and some other words"[:24]
            y[i] = (text, self.written(text, ((0, 5),)))
            pred[i, :5] = 0.9 if self.heads == 1 else 0.0
            if self.heads == 2:
                pred[i, 0, 0], pred[i, 4, 1] = 0.9, 0.9
        return y, np.clip(pred + rng.uniform(0, 0.05, pred.shape), 0, 1)

    def cell(self, answer) -> str:
        """An answer as a csv cell: its text, or "s e;s e"."""
        return spans.format_location(answer) if self.labels_as == "offsets" else str(answer)



REGRESSION = Regression("regression", blend_metric="rmse", own_metrics=("rmse",),
                        submissions=("values", "labels"), scores=("values", "labels"), rules=("cutpoints",))
CLASSIFICATION = Classification("classification", blend_metric="log_loss", own_metrics=("log_loss", "accuracy"),
                                submissions=("labels", "probabilities", "ranking"), scores=("probabilities", "labels"),
                                rules=("threshold",))
MULTILABEL = MultiLabel("multilabel", blend_metric="log_loss", own_metrics=("log_loss", "roc_auc"),
                        submissions=("probabilities", "labels"), scores=("probabilities",), rules=())
MULTIPLE_CHOICE = MultipleChoice("multiple_choice", blend_metric="log_loss", own_metrics=("log_loss", "accuracy"),
                                 submissions=("ranking",), scores=("probabilities",), rules=())
RETRIEVAL = Retrieval("retrieval", blend_metric="", own_metrics=(), submissions=("ranking",),
                      scores=("probabilities",), rules=())
SPANS = Spans("spans", blend_metric="", own_metrics=(), submissions=("spans",), scores=("spans",), rules=())
OBJECTIVES = {o.name: o for o in (REGRESSION, CLASSIFICATION, MULTILABEL, MULTIPLE_CHOICE, RETRIEVAL, SPANS)}


def get_objective(name: str) -> Objective:
    """The objective called `name` (as kit_config.json and config.json record it); an error listing
    the known ones."""
    if name not in OBJECTIVES:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]


SIGNALS = {"texts": "pseudo-labels of other texts", "training": "a teacher's predictions of the training rows"}


def signal_not_made(comp, signal: str) -> str:
    """"" when a competition's objective takes a teacher's `signal` (Objective.signals: "texts" or
    "training"), else the one line saying why not (what utils.pseudo and utils.train refuse)."""
    obj = objective_of(comp)
    if signal in obj.signals:
        return ""
    made = [o.name for o in OBJECTIVES.values() if signal in o.signals]
    return (f"{comp.slug} answers {obj.answers or obj.name} ({comp.task}): {SIGNALS[signal]} are made for "
            f"{', '.join(made[:-1])} and {made[-1]} tasks, not yet for this one")


def objective_of(comp) -> Objective:
    """The objective a competition's task is trained as (with what it keeps for that competition:
    a retriever's candidates): utils.competition.Competition.objective, chosen once per description."""
    return comp.objective
