"""What a model outputs, one object per kind: how it is trained (targets, loss, activation), what
its out-of-fold and pseudo-label columns are called, how its outputs become submission values
or labels, and how runs of it blend. Chosen once from the competition (`objective_of`); the
rest of the kit asks it and never compares a task's name. A new kind is one more entry of
OBJECTIVES.

The kinds are what a model is trained as (a competition's task maps onto one of them in
utils.competition.TASKS): `regression` (one value per target, T >= 1), `classification` (one
probability per class, K >= 2, softmax) and `multilabel` (one probability per 0/1 label, L >= 2,
sigmoid). The name is what kit_config.json and config.json record.

Light: numpy and pandas; torch only inside the training functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .metrics import METRICS, apply_rule, rmse


@dataclass(frozen=True)
class Objective:
    name: str  # what kit_config.json's "task" and config.json's "task" record
    classes: bool  # outputs are class probabilities (labels, class-stratified folds)
    blend_metric: str  # what blend weights are fitted on (smooth, unlike F1)
    own_metrics: tuple  # the loss's own figures, reported beside the competition's metric
    submissions: tuple  # what its submission may hold (utils.competition.SUBMISSIONS)
    scores: tuple  # what its metrics may score: Metric.needs ("values", "labels", "probabilities")
    rules: tuple  # the decision rules (Metric.rule) that make labels of its outputs

    def refuses(self, metric) -> str:
        """Why `metric` cannot score this kind of output ("" when it can)."""
        if metric.needs not in self.scores or metric.rule and metric.rule not in self.rules:
            what = f"{metric.needs}" + (f" made by a {metric.rule} rule" if metric.rule else "")
            return f"{metric.name} scores {what}; a {self.name} model's outputs are scored as {', '.join(self.scores)}"
        return ""

    # ---- training
    def labels(self, values: pd.Series, num_labels: int = 0, source: str = "", order=()) -> list | None:
        """The class labels of a target column (None: no classes): `order` (the description's
        classes) when given, else sorted; checked against --num-labels."""
        if not self.classes:
            return None
        if order:
            from .competition import label_text

            as_text = {label_text(v): v for v in values.unique().tolist()}
            labels = [as_text.get(label_text(c), c) for c in order]  # the column's own values, in order
        else:
            labels = sorted(values.unique().tolist())
        if num_labels and len(labels) > num_labels:
            raise ValueError(f"{source}: column {values.name!r} has {len(labels)} classes but "
                             f"--num-labels is {num_labels}")
        return labels

    def num_outputs(self, target_cols, labels, num_labels: int = 0) -> int:
        """The head's width: a value per target, or a logit per class."""
        return (num_labels or len(labels)) if self.classes else len(target_cols)

    def output_names(self, target_cols, labels) -> tuple:
        """What the model's outputs are named (ModelSpec.target_names): targets, or class labels."""
        return tuple(map(str, labels)) if self.classes else tuple(target_cols)

    def targets(self, df: pd.DataFrame, target_cols, labels, extra_cols=()) -> np.ndarray:
        """(N,) class ids, or (N, T + extra) float targets (extra: e.g. a standard error column)."""
        if self.classes:
            return df[target_cols[0]].map({v: i for i, v in enumerate(labels)}).to_numpy()
        return df[list(target_cols) + list(extra_cols)].to_numpy(dtype=np.float32)

    def soft(self, y: np.ndarray, n_out: int) -> np.ndarray:
        """Targets as the rows they are mixed with (pseudo-labels): one-hot class probabilities."""
        return np.eye(n_out, dtype=np.float32)[y.astype(int)] if self.classes else y

    def target_mean(self, y: np.ndarray, n_targets: int, n_out: int) -> np.ndarray:
        """The training rows' mean output (N,) -> (outputs,): class shares, or target means."""
        if self.classes:
            return np.bincount(y.astype(int), minlength=n_out) / len(y)
        return y[:, :n_targets].astype(float).mean(0)

    def head_bias(self, mean: np.ndarray) -> np.ndarray:
        """The head's bias that outputs `mean` before any training (logits: log shares)."""
        return np.log(np.maximum(mean, 1e-6)) if self.classes else mean

    def target_dtype(self, soft: bool):
        """The dtype of a batch's targets: class ids, or floats (values, soft labels)."""
        import torch

        return torch.long if self.classes and not soft else torch.float32

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        """Training loss in fp32: preds (B, outputs); y (B,) class ids or (B, K) probabilities, or
        (B, T[+1]) values; `weight` (B,): per-row weights (pseudo rows mixed with real ones);
        `kind` (regression): mse, rmse, or se (the last column of y is the target's standard
        error)."""
        import torch
        import torch.nn.functional as F

        preds = preds.float()
        if self.classes:
            logp = F.log_softmax(preds, -1)
            per_row = -(y * logp).sum(1) if y.ndim == 2 else F.nll_loss(logp, y.long(), reduction="none")
            if weight is None:
                return per_row.mean()
            return (weight * per_row).sum() / weight.sum().clamp(min=1e-8)
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
        """The head's raw outputs (B, outputs) -> predictions: class probabilities, or values."""
        import torch

        return torch.softmax(logits, dim=-1) if self.classes else logits

    def own_scores(self, y: np.ndarray, pred: np.ndarray, target_cols) -> dict:
        """The loss's own figures (from utils.metrics) on predictions (N, outputs); 'score': the one
        a checkpoint minimises when the competition's metric is among them."""
        if self.classes:
            out = {name: METRICS[name].score(y, pred) for name in self.own_metrics}
            return {"score": out["log_loss"], **out}
        per = {c: rmse(y[:, i], pred[:, i]) for i, c in enumerate(target_cols)}
        out = {"score": float(np.mean(list(per.values()))), "rmse": float(np.mean(list(per.values())))}
        if len(target_cols) > 1:
            out["rmse_per_target"] = per
        return out

    def truth(self, y: np.ndarray, n_targets: int) -> np.ndarray:
        """The truth a metric scores: class ids, or the target columns (no extra ones)."""
        return y if self.classes else y[:, :n_targets]

    # ---- out-of-fold and pseudo-label columns
    def prediction_columns(self, target_cols, labels) -> list:
        """oof.csv's prediction columns: prob_<label> per class; pred for one target; pred_<t> for
        several."""
        if self.classes:
            return [f"prob_{lab}" for lab in labels]
        return ["pred"] if len(target_cols) == 1 else [f"pred_{c}" for c in target_cols]

    def oof_frame(self, ids, df: pd.DataFrame, y: np.ndarray, pred: np.ndarray, target_cols, labels,
                  fold: int) -> pd.DataFrame:
        """One fold's out-of-fold rows: id, the truth, the predictions, fold. A classifier's
        `pred` is the likeliest class seen in training (--num-labels above the classes seen:
        an unseen class has no name)."""
        oof = pd.DataFrame({"id": np.asarray(ids)})
        pcols = self.prediction_columns(target_cols, labels)
        if self.classes:
            oof[target_cols[0]] = df[target_cols[0]].to_numpy()
            oof["pred"] = [labels[j] for j in pred[:, : len(labels)].argmax(1)]
            for j, c in enumerate(pcols):
                oof[c] = pred[:, j]
        else:  # each target beside its prediction
            for j, (c, p) in enumerate(zip(target_cols, pcols)):
                oof[c], oof[p] = y[:, j], pred[:, j]
        oof["fold"] = fold
        return oof

    def oof_labels(self, columns) -> list:
        """The class labels an oof.csv's columns name (prob_<label>), in order."""
        return [c[5:] for c in columns if str(c).startswith("prob_")]

    def oof_arrays(self, oof: pd.DataFrame, target_cols) -> tuple[np.ndarray, np.ndarray]:
        """(truth, predictions (N, outputs)) of an oof frame as the metrics take them: class ids
        and probabilities, or (N, T) values."""
        if self.classes:
            labels = self.oof_labels(oof.columns)
            truth = oof[target_cols[0]].astype(str).map({lab: i for i, lab in enumerate(labels)})
            return truth.to_numpy(), oof[[f"prob_{lab}" for lab in labels]].to_numpy()
        pcols = self.prediction_columns(target_cols, None)
        return oof[list(target_cols)].to_numpy(dtype=float), oof[pcols].to_numpy(dtype=float)

    def pseudo_columns(self, output_names) -> list:
        """A pseudo-label file's columns per output: the targets, or prob_<label> (soft labels)."""
        names = [str(n) for n in output_names]
        return [f"prob_{n}" for n in names] if self.classes else names

    # ---- prediction and submission
    def run_output(self, pred: np.ndarray) -> np.ndarray:
        """A run's (N, outputs) predictions as predict_run returns them: (N,) for one target."""
        return pred[:, 0] if pred.shape[1] == 1 and not self.classes else pred

    def submission_columns(self, comp, preds: np.ndarray, names, rule) -> dict:
        """{column: values} of the competition's submission: class probabilities or labels (by
        `rule`), or values (clipped to the targets' range) or integer labels."""
        kind, target = comp.submission_kind, comp.target_cols[0]
        lo, hi = comp.target_range or (-np.inf, np.inf)
        if self.classes and kind == "probabilities":
            if len(comp.target_cols) == 1 and len(names) == 2:
                return {target: preds[:, 1]}  # P(the second class), e.g. P(target = 1)
            return {str(name): preds[:, j] for j, name in enumerate(names)}
        if self.classes:
            return {target: _as_written(names)[apply_rule(rule, preds)]}
        if kind == "labels":
            return {target: np.clip(apply_rule(rule, preds), lo, hi).astype(int)}
        return {name: np.clip(preds[:, j], lo, hi) for j, name in enumerate(comp.target_cols)}


def _as_written(labels) -> np.ndarray:
    """Class names as the training file wrote them: integers when they all are."""
    labels = [str(v) for v in labels]
    if all(v.lstrip("-").isdigit() for v in labels):
        return np.array([int(v) for v in labels])
    try:  # 0.0 and 1.0 (a column read as floats) are written 0 and 1, as the sample writes them
        numbers = [float(v) for v in labels]
        if all(x.is_integer() for x in numbers):
            return np.array([int(x) for x in numbers])
    except ValueError:
        pass
    return np.array(labels, dtype=object)


@dataclass(frozen=True)
class MultiLabel(Objective):
    """Several 0/1 labels (Jigsaw's toxic comments): one logit per label, sigmoid, binary
    cross-entropy; OOF columns prob_<label>; the submission one probability per label."""

    def labels(self, values, num_labels: int = 0, source: str = "", order=()):
        return None

    def targets(self, df, target_cols, labels, extra_cols=()):
        return df[list(target_cols)].to_numpy(dtype=np.float32)

    def target_mean(self, y, n_targets, n_out):
        return y[:, :n_targets].astype(float).mean(0)

    def head_bias(self, mean):
        m = np.clip(mean, 1e-6, 1 - 1e-6)
        return np.log(m / (1 - m))

    def target_dtype(self, soft):
        import torch

        return torch.float32

    def loss(self, preds, y, weight=None, n_targets: int = 1, kind: str = "mse", min_se: float = 0.0):
        import torch.nn.functional as F

        per_row = F.binary_cross_entropy_with_logits(preds.float(), y[:, :n_targets].float(),
                                                     reduction="none").mean(1)
        if weight is None:
            return per_row.mean()
        return (weight * per_row).sum() / weight.sum().clamp(min=1e-8)

    def activate(self, logits):
        import torch

        return torch.sigmoid(logits)

    def own_scores(self, y, pred, target_cols):
        out = {name: METRICS[name].score(y[:, : len(target_cols)], pred) for name in self.own_metrics}
        return {"score": out["log_loss"], **out}

    def prediction_columns(self, target_cols, labels):
        return [f"prob_{c}" for c in target_cols]

    def oof_frame(self, ids, df, y, pred, target_cols, labels, fold):
        oof = pd.DataFrame({"id": np.asarray(ids)})
        for j, c in enumerate(target_cols):
            oof[c], oof[f"prob_{c}"] = y[:, j].astype(int), pred[:, j]
        oof["fold"] = fold
        return oof

    def oof_labels(self, columns):
        return []

    def oof_arrays(self, oof, target_cols):
        return (oof[list(target_cols)].to_numpy(dtype=float),
                oof[self.prediction_columns(target_cols, None)].to_numpy(dtype=float))

    def pseudo_columns(self, output_names):
        return [f"prob_{n}" for n in output_names]

    def run_output(self, pred):
        return pred

    def submission_columns(self, comp, preds, names, rule):
        if comp.submission_kind == "labels":
            return {c: (preds[:, j] >= 0.5).astype(int) for j, c in enumerate(comp.target_cols)}
        return {c: preds[:, j] for j, c in enumerate(comp.target_cols)}


REGRESSION = Objective("regression", classes=False, blend_metric="rmse", own_metrics=("rmse",),
                       submissions=("values", "labels"), scores=("values", "labels"), rules=("cutpoints",))
CLASSIFICATION = Objective("classification", classes=True, blend_metric="log_loss",
                           own_metrics=("log_loss", "accuracy"), submissions=("labels", "probabilities"),
                           scores=("probabilities", "labels"), rules=("threshold",))
MULTILABEL = MultiLabel("multilabel", classes=False, blend_metric="log_loss", own_metrics=("log_loss", "roc_auc"),
                        submissions=("probabilities", "labels"), scores=("probabilities",), rules=())
OBJECTIVES = {o.name: o for o in (REGRESSION, CLASSIFICATION, MULTILABEL)}


def get_objective(name: str) -> Objective:
    """The objective called `name` (as kit_config.json and config.json record it); an error listing
    the known ones."""
    if name not in OBJECTIVES:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]


def objective_of(comp) -> Objective:
    """The objective a competition's task is trained as."""
    return get_objective(comp.model_task)
