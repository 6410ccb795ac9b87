"""What a run's files hold of a model's outputs, one class per kind of objective (utils.objective):
oof.csv's columns and how they read back as the metrics' arrays, what a blend weighs, the
pseudo-label columns, the submission's columns, and what a fold folder keeps beside oof.csv (a
span task's character scores, chars.npz). Reached from the objective (`objective.outputs`), which
says what the model learns; a new kind of objective is one more class here, named by its OUTPUTS.

Light: numpy and pandas.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from . import spans
from .data import DataError, label_text, number_cells
from .files import CHARS, OOF, atomic_file, read_oof_csv
from .metrics import Metric, apply_rule, top_k


@dataclass(frozen=True)
class Outputs:
    """What the kinds share: prob_<label> columns for soft labels and classes, a blend of the
    predictions themselves, nothing kept beside oof.csv. Each kind implements the rest."""

    objective: object  # the utils.objective.Objective whose outputs these are (as its competition trains it)

    # ---- out-of-fold and pseudo-label columns
    def prediction_columns(self, target_cols, labels) -> list:
        """oof.csv's prediction columns: prob_<label> per class; pred for one target; pred_<t> for
        several; prob_<label> per 0/1 label."""
        raise NotImplementedError

    def oof_frame(self, ids, df: pd.DataFrame, y: np.ndarray, pred: np.ndarray, target_cols, labels,
                  fold: int) -> pd.DataFrame:
        """One fold's out-of-fold rows: id, the truth, the predictions, fold."""
        raise NotImplementedError

    def oof_labels(self, columns) -> list:
        """The class labels an oof.csv's columns name (prob_<label>), in order."""
        return [c[5:] for c in columns if str(c).startswith("prob_")]

    def oof_arrays(self, oof: pd.DataFrame, target_cols) -> tuple[np.ndarray, np.ndarray]:
        """(truth, predictions (N, outputs)) of an oof frame as the metrics take them: class ids
        and probabilities, or (N, T) values."""
        raise NotImplementedError

    def settle(self, run, oof: pd.DataFrame, metric=None) -> pd.DataFrame:
        """A run's out-of-fold rows once its finished folds are gathered: as they are (a span
        task's answers decoded again, each fold's threshold fitted on the other folds by `metric`)."""
        return oof

    def write_outputs(self, folder, oof: pd.DataFrame) -> None:
        """What a fold folder keeps of its outputs beside oof.csv (a span task's character scores)."""

    def pseudo_columns(self, output_names) -> list:
        """A pseudo-label file's columns per output: the targets, or prob_<label> (soft labels)."""
        return [f"prob_{n}" for n in output_names]

    # A pseudo-label file's cell holds a number per output (a span task's: a text's character scores).
    signal_numbers: ClassVar[bool] = True

    def signal_column(self, label: np.ndarray, j: int, texts: pd.DataFrame):
        """Output j of blended predictions `label` (N, outputs) of the rows `texts`, as a
        pseudo-label file's column."""
        return label[:, j]

    def read_signal(self, raw: pd.Series, where: str, rows: pd.DataFrame | None = None) -> pd.Series:
        """A pseudo-label file's column as read back: numbers, NaN for an empty cell (utils.data.
        read_pseudo's reader of cells; `rows` the file's rows, their texts)."""
        return number_cells(raw, where)

    def signal_values(self, frame: pd.DataFrame) -> np.ndarray:
        """A student's teacher columns (its rows, one column per output) as Objective.distilled
        takes them: (n, outputs) float32."""
        return frame.to_numpy(dtype=np.float32)

    # ---- blends
    def member_arrays(self, frames, target_cols, runs=()) -> list:
        """oof_arrays of several runs' oof frames (of the run folders `runs`), their predictions'
        columns the same outputs (what a blend weighs against each other)."""
        return [self.oof_arrays(f, target_cols) for f in frames]

    def blend_metric_of(self, metric):
        """The metric a blend scores its members and weights with: the competition's (a span
        task's, of the answers decoded from the blended character scores)."""
        return metric

    def blend_scores(self, pred: np.ndarray) -> np.ndarray:
        """What of a run's test predictions a blend weighs: as its out-of-fold arrays score them
        (here the predictions themselves)."""
        return pred

    # ---- prediction and submission
    def run_output(self, pred: np.ndarray) -> np.ndarray:
        """A run's (N, outputs) predictions as predict_run returns them: (N,) for one target."""
        return pred

    def ranked(self, comp, pred: np.ndarray, names, k: int) -> list:
        """Each row's top k candidates (class labels, option letters, catalogue ids), best first,
        space-separated: a ranking submission's answer and oof.csv's `pred`."""
        names = np.asarray([str(n) for n in names], dtype=object)
        return [" ".join(row) for row in names[top_k(pred, k)]]

    def submission_columns(self, comp, preds: np.ndarray, names, rule, test=None) -> dict:
        """{column: values} of the competition's submission: class probabilities or labels (by
        `rule`), or values (clipped to the targets' range) or integer labels; `test`: the test
        rows (a span task's answers are parts of their texts)."""
        raise NotImplementedError


@dataclass(frozen=True)
class RegressionOutputs(Outputs):
    """oof.csv: each target beside its prediction (pred for one target, pred_<t> for several); the
    submission values clipped to the targets' range, or integer labels (cut points)."""

    def prediction_columns(self, target_cols, labels):
        return ["pred"] if len(target_cols) == 1 else [f"pred_{c}" for c in target_cols]

    def oof_frame(self, ids, df, y, pred, target_cols, labels, fold):
        oof = pd.DataFrame({"id": np.asarray(ids)})
        for j, (c, p) in enumerate(zip(target_cols, self.prediction_columns(target_cols, labels))):
            oof[c], oof[p] = y[:, j], pred[:, j]  # each target beside its prediction
        oof["fold"] = fold
        return oof

    def oof_arrays(self, oof, target_cols):
        pcols = self.prediction_columns(target_cols, None)
        return oof[list(target_cols)].to_numpy(dtype=float), oof[pcols].to_numpy(dtype=float)

    def pseudo_columns(self, output_names):
        return [str(n) for n in output_names]

    def run_output(self, pred):
        return pred[:, 0] if pred.shape[1] == 1 else pred

    def submission_columns(self, comp, preds, names, rule, test=None):
        lo, hi = comp.target_range or (-np.inf, np.inf)
        if comp.submission_kind == "labels":
            return {comp.target_cols[0]: np.clip(apply_rule(rule, preds), lo, hi).astype(int)}
        return {name: np.clip(preds[:, j], lo, hi) for j, name in enumerate(comp.target_cols)}


@dataclass(frozen=True)
class ClassificationOutputs(Outputs):
    """oof.csv: the label, pred (the likeliest class) and prob_<label>; the submission class
    probabilities, labels (argmax, or a threshold fitted for F1) or the top answer_k classes."""

    def prediction_columns(self, target_cols, labels):
        return [f"prob_{lab}" for lab in labels]

    def oof_frame(self, ids, df, y, pred, target_cols, labels, fold):
        """A classifier's `pred` is the likeliest class seen in training (--num-labels above the
        classes seen: an unseen class has no name)."""
        return self._class_frame(ids, df, pred, target_cols, labels, fold,
                                 [labels[j] for j in pred[:, : len(labels)].argmax(1)])

    def _class_frame(self, ids, df, pred, target_cols, labels, fold, answers) -> pd.DataFrame:
        """id, the label as written, pred (`answers`), prob_<label> per class, fold."""
        oof = pd.DataFrame({"id": np.asarray(ids)})
        oof[target_cols[0]] = df[target_cols[0]].to_numpy()
        oof["pred"] = answers
        for j, c in enumerate(self.prediction_columns(target_cols, labels)):
            oof[c] = pred[:, j]
        oof["fold"] = fold
        return oof

    def oof_arrays(self, oof, target_cols):
        labels = self.oof_labels(oof.columns)
        truth = oof[target_cols[0]].astype(str).map({lab: i for i, lab in enumerate(labels)})
        return truth.to_numpy(), oof[[f"prob_{lab}" for lab in labels]].to_numpy()

    def pseudo_columns(self, output_names):
        return [f"prob_{n}" for n in map(str, output_names)]

    def submission_columns(self, comp, preds, names, rule, test=None):
        target = comp.target_cols[0]
        if comp.submission_kind == "probabilities":
            if len(comp.target_cols) == 1 and len(names) == 2:
                return {target: preds[:, 1]}  # P(the second class), e.g. P(target = 1)
            return {str(name): preds[:, j] for j, name in enumerate(names)}
        if comp.submission_kind == "ranking":  # the top answer_k classes, best first (MAP 2025)
            return {comp.answer_column: self.ranked(comp, preds, names, comp.answer_k)}
        return {target: _as_written(names)[apply_rule(rule, preds)]}


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
class MultiLabelOutputs(Outputs):
    """oof.csv: each 0/1 label beside prob_<label>; the submission one probability per label (or
    0/1 at 0.5)."""

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

    def submission_columns(self, comp, preds, names, rule, test=None):
        if comp.submission_kind == "labels":
            return {c: (preds[:, j] >= 0.5).astype(int) for j, c in enumerate(comp.target_cols)}
        return {c: preds[:, j] for j, c in enumerate(comp.target_cols)}


@dataclass(frozen=True)
class MultipleChoiceOutputs(ClassificationOutputs):
    """oof.csv: the answer, pred (every option, best first) and prob_<option> (no answer: truth
    -1); the submission the top answer_k options."""

    def oof_frame(self, ids, df, y, pred, target_cols, labels, fold):
        names = np.asarray([str(lab) for lab in labels], dtype=object)
        best_first = [" ".join(r) for r in names[np.argsort(-pred, 1, kind="stable")]]  # every option
        return self._class_frame(ids, df, pred, target_cols, labels, fold, best_first)

    def oof_arrays(self, oof, target_cols):
        labels = self.oof_labels(oof.columns)
        truth = oof[target_cols[0]].map(label_text).map({lab: i for i, lab in enumerate(labels)})
        return truth.fillna(-1).astype(int).to_numpy(), oof[[f"prob_{lab}" for lab in labels]].to_numpy()

    def submission_columns(self, comp, preds, names, rule, test=None):
        return {comp.answer_column: self.ranked(comp, preds, names, comp.answer_k)}


@dataclass(frozen=True)
class RetrievalOutputs(Outputs):
    """oof.csv: the truth and candidates (the objective's top `keep` catalogue ids, best first);
    read back and blended as reciprocal-rank fusion scores (FUSION); the submission the top
    answer_k ids."""

    # Reciprocal-rank fusion: a listed candidate at rank r (0 first) scores 1 / (FUSION + r), the
    # others 0. A blend of retrievers weighs these, in the out-of-fold file and at test time alike.
    FUSION: ClassVar[int] = 60

    def prediction_columns(self, target_cols, labels):
        return ["candidates"]

    def oof_frame(self, ids, df, y, pred, target_cols, labels, fold):
        """`pred`: (N, items) similarities."""
        names = np.asarray([str(v) for v in labels], dtype=object)
        top = top_k(pred, self.objective.keep)
        oof = pd.DataFrame({"id": np.asarray(ids)})
        oof[target_cols[0]] = df[target_cols[0]].astype(str).to_numpy()
        oof["candidates"] = [" ".join(r) for r in names[top]]
        oof["fold"] = fold
        return oof

    def fused(self, n: int) -> np.ndarray:
        """The scores of ranks 0..n-1 (reciprocal-rank fusion, FUSION)."""
        return 1.0 / (self.FUSION + np.arange(n, dtype=float))

    def oof_arrays(self, oof, target_cols, ids=None):
        """(truth (N,), scores (N, ids)): over `ids` (default: every id the file names, sorted),
        each row's listed candidates scored by rank (fused: the first highest), the others 0."""
        lists = [str(c).split() for c in oof["candidates"]]
        truth = oof[target_cols[0]].astype(str).tolist()
        ids = sorted({i for r in lists for i in r} | set(truth)) if ids is None else ids
        col = {v: j for j, v in enumerate(ids)}
        scores = np.zeros((len(oof), len(ids)))
        for r, items in enumerate(lists):
            scores[r, [col[i] for i in items]] = self.fused(len(items))
        return np.array([col[t] for t in truth]), scores

    def member_arrays(self, frames, target_cols, runs=()):
        """Each run's oof_arrays over the ids any of them names: the same columns."""
        ids = sorted({i for f in frames for c in f["candidates"] for i in str(c).split()}
                     | {str(t) for f in frames for t in f[target_cols[0]]})
        return [self.oof_arrays(f, target_cols, ids) for f in frames]

    def blend_scores(self, pred):
        """(N, items) similarities as the out-of-fold file keeps them: the top `keep` fused by
        rank, the others 0."""
        top = top_k(pred, self.objective.keep)
        out = np.zeros(pred.shape)
        out[np.arange(len(pred))[:, None], top] = self.fused(top.shape[1])
        return out

    def oof_labels(self, columns):
        return []

    def submission_columns(self, comp, preds, names, rule, test=None):
        return {comp.answer_column: self.ranked(comp, preds, names, comp.answer_k)}


@dataclass(frozen=True)
class SpansOutputs(Outputs):
    """oof.csv: id, the label column as written, pred (the answer) and fold; each fold folder's
    chars.npz the character scores (float16), which blends average and the one-head threshold is
    fitted on: each fold's from the other folds' rows (settle), so the CV is the metric of exactly
    oof.csv's answers. The submission: the test texts' answers, written as the labels are."""

    def prediction_columns(self, target_cols, labels):
        return ["pred"]

    def oof_frame(self, ids, df, y, pred, target_cols, labels, fold):
        """The label as written, the answer at the default threshold (settle fits it once other
        folds exist), the fold; `attrs["chars"]`: the character scores, for the fold's chars.npz."""
        obj = self.objective
        oof = pd.DataFrame({"id": np.asarray(ids)})
        oof[target_cols[0]] = df[target_cols[0]].to_numpy()
        oof["pred"] = [obj.cell(a) for a in obj.decoded(y, pred)]
        oof["fold"] = fold
        oof.attrs["chars"] = [p[: len(text)] for (text, _), p in zip(y, pred)]
        oof.attrs["texts"] = [text for text, _ in y]
        return oof

    def write_outputs(self, folder, oof) -> None:
        """The fold's character scores beside its oof.csv (chars.npz, float16, atomically)."""
        chars = oof.attrs.get("chars")
        if chars is None:
            return
        heads = self.objective.heads
        lengths = np.array([len(c) for c in chars], dtype=np.int64)
        flat = np.concatenate(chars).astype(np.float16) if len(chars) else np.zeros((0, heads), np.float16)
        with atomic_file(Path(folder) / CHARS) as tmp, open(tmp, "wb") as f:
            np.savez_compressed(f, ids=np.array(json.dumps(oof["id"].astype(str).tolist())), lengths=lengths,
                                scores=flat, texts=np.array(json.dumps(oof.attrs["texts"])))

    def pseudo_columns(self, output_names):
        return [str(n) for n in output_names]

    signal_numbers: ClassVar[bool] = False

    def signal_column(self, label, j, texts):
        """Each row's character scores of head j (its text's length of the (N, C, heads) scores),
        as utils.spans.scores_cell writes them."""
        lengths = texts[self.objective.span_col].astype(str).str.len().to_numpy()
        return [spans.scores_cell(row[:n, j]) for row, n in zip(label, lengths)]

    def read_signal(self, raw, where, rows=None):
        """Each non-empty cell parsed (utils.spans.cell_scores): (len_text,) arrays, NaN for an empty
        one; a cell of another length than its row's text (`rows`' span column) refused in one line."""
        lengths = None if rows is None else rows[self.objective.span_col].astype(str).str.len().to_numpy()
        out = []
        for i, c in enumerate(raw.tolist()):
            try:
                out.append(np.nan if pd.isna(c) else spans.cell_scores(c, f"{where}, row {i + 2}"))
            except ValueError as e:
                raise DataError(str(e)) from None
            if lengths is not None and not pd.isna(c) and len(out[-1]) != lengths[i]:
                raise DataError(f"{where}, row {i + 2}: character scores of {len(out[-1])} characters for a text "
                                f"of {lengths[i]}: made from another version of the text")
        return pd.Series(out, index=raw.index, dtype=object)

    def signal_values(self, frame):
        """(n,) objects: each row's (len_text, heads) character scores."""
        cols = [frame[c].tolist() for c in frame.columns]
        out = np.empty(len(frame), dtype=object)
        for i, heads in enumerate(zip(*cols)):
            out[i] = np.stack(heads, axis=1)
        return out

    def oof_arrays(self, oof, target_cols):
        """(true answers, predicted answers) as oof.csv writes them."""
        answer = self.objective.answer
        return (spans.objects(answer(c) for c in oof[target_cols[0]].tolist()),
                spans.objects(answer(c) for c in oof["pred"].tolist()))

    def member_arrays(self, frames, target_cols, runs=()):
        """Per run: (its rows' (span text, answer) (N,), its character scores (N, C, heads)), C the
        longest text of any run's rows (a blend's members, whatever their tokenizers, share it),
        in its oof.csv's order (its folds' chars.npz, matched by id). Runs that read a row's text
        differently (another version of the file) are refused: their scores would add up
        character by character over different texts."""
        saved = [chars_of(run, frame) for frame, run in zip(frames, runs)]
        first = dict(zip(frames[0]["id"].astype(str), (t for t, _ in saved[0])))
        for frame, rows, run in zip(frames[1:], saved[1:], runs[1:]):
            for i, (text, _) in zip(frame["id"].astype(str), rows):
                if i in first and first[i] != text:
                    raise DataError(f"{run} read the text of id {i!r} as {spans.show(text, 60)} but {runs[0]} as "
                                    f"{spans.show(first[i], 60)}: only runs trained on the same texts blend")
        width = max(len(t) for rows in saved for t, _ in rows)
        out = []
        for frame, rows in zip(frames, saved):
            scores = np.zeros((len(rows), width, self.objective.heads), dtype=np.float32)
            for i, (text, c) in enumerate(rows):
                scores[i, : len(text)] = c
            y = spans.objects((text, a) for (text, _), a in zip(rows, self.oof_arrays(frame, target_cols)[0]))
            out.append((y, scores))
        return out

    def blend_metric_of(self, metric):
        """The metric of the answers decoded from (text, answer) rows' character scores: start/end at
        their best pair, one head at a threshold fitted on other folds (Decoded, the rule)."""
        obj = self.objective
        fn = lambda y, answers: metric.fn(obj.truth(y, 1), answers)  # noqa: E731
        if obj.heads == 2:
            return dataclasses.replace(metric, fn=lambda y, p: fn(y, obj.scored(y, p)))
        fields = {f.name: getattr(metric, f.name) for f in dataclasses.fields(Metric)}
        return Decoded(**{**fields, "fn": fn, "needs": "labels", "rule": "threshold"}, objective=obj)

    def settle(self, run, oof, metric=None):
        """One head, two finished folds or more: a copy whose answers are decoded again, each fold's
        at the threshold (of THRESHOLDS) that scores best by `metric` on the other folds' character
        scores (`attrs["thresholds"]`; `attrs["rule"]`: the best on every row, for the test rows).
        Otherwise the rows themselves."""
        obj = self.objective
        folds = sorted(int(k) for k in oof["fold"].unique())
        if obj.heads != 1 or len(folds) < 2 or metric is None:
            return oof
        label = [c for c in oof.columns if c not in ("id", "pred", "fold")][0]
        saved = {k: chars_of(run, oof[oof["fold"] == k]) for k in folds}
        truth = {k: [obj.answer(c) for c in oof.loc[oof["fold"] == k, label]] for k in folds}

        @functools.cache  # each fold decoded once per threshold
        def answers(k, t):
            return spans.answers([text for text, _ in saved[k]], [p for _, p in saved[k]], t, obj.labels_as == "text")

        def score(ks, t):
            return metric.score([a for k in ks for a in truth[k]], [a for k in ks for a in answers(k, t)])

        thresholds, out = {}, oof.copy()
        out["pred"] = out["pred"].astype(object)  # a column of empty answers reads as NaN floats
        for k in folds:
            others = [j for j in folds if j != k]
            thresholds[k] = spans.fit_threshold(functools.partial(score, others))
            rows = np.flatnonzero(out["fold"].to_numpy() == k)
            out.iloc[rows, out.columns.get_loc("pred")] = [obj.cell(a) for a in answers(k, thresholds[k])]
        out.attrs["thresholds"] = thresholds
        # for the test rows: fitted on every out-of-fold row
        out.attrs["rule"] = {"threshold": spans.fit_threshold(functools.partial(score, folds))}
        return out

    def submission_columns(self, comp, preds, names, rule, test=None):
        """The answers decoded from the character scores (N, C, heads) of the test rows' texts, at the
        threshold fitted on every out-of-fold row (`rule`; else 0.5), written as the labels are."""
        obj = self.objective
        t = (rule or {}).get("threshold", 0.5)
        texts = test[obj.span_col].astype(str).tolist()
        return {comp.target_cols[0]: [obj.cell(a) for a in spans.answers(texts, preds, t, obj.labels_as == "text")]}


@dataclass(frozen=True)
class Decoded(Metric):
    """A one-head span task's metric of character scores (N, C, 1), as a blend scores them: of the
    answers decoded at a threshold, the rule, fitted as SpansOutputs.settle fits a run's (the best
    of utils.spans.THRESHOLDS). Where no other fold can fit one, 0.5 decodes (the default)."""

    objective: object = None  # the utils.objective.Spans whose character scores these are
    rule_has_default: ClassVar[bool] = True

    def labels_of(self, y, pred, rule):
        return self.objective.scored(y, pred, (rule or {}).get("threshold", 0.5))

    def fit_rule(self, y, pred) -> dict:
        return {"threshold": spans.fit_threshold(lambda t: self.score(y, pred, {"threshold": t}))}

    def honest_score(self, y, pred, folds) -> tuple[float, dict]:
        """Metric.honest_score, each fold decoded once per threshold (not once per other fold)."""
        folds = np.asarray(folds)
        ks = [int(k) for k in np.unique(folds)]
        if len(ks) < 2:
            return self.score(y, pred), {}
        rows = {k: np.flatnonzero(folds == k) for k in ks}
        answers = {(k, t): self.labels_of(y[rows[k]], pred[rows[k]], {"threshold": t})
                   for k in ks for t in spans.THRESHOLDS}

        def score(some, t):
            return self.fn(y[np.concatenate([rows[k] for k in some])], np.concatenate([answers[k, t] for k in some]))

        rules = {k: {"threshold": spans.fit_threshold(functools.partial(score, [j for j in ks if j != k]))}
                 for k in ks}
        labels = np.empty(len(folds), dtype=object)
        for k in ks:
            labels[rows[k]] = answers[k, rules[k]["threshold"]]
        return self.fn(y, labels), rules


def read_chars(folder) -> dict:
    """A fold's chars.npz: {id: (text, character scores (len(text), heads))}, in the fold's row order."""
    with np.load(Path(folder) / CHARS, allow_pickle=False) as z:
        lengths, scores, texts = z["lengths"], z["scores"].astype(np.float32), json.loads(str(z["texts"]))
        try:
            ids = json.loads(str(z["ids"]))
        except ValueError:  # written before its ids were kept as text: the fold's oof.csv has them, in its order
            ids = read_oof_csv(Path(folder) / OOF)["id"].tolist()
    if len(ids) != len(texts):
        raise DataError(f"{Path(folder) / CHARS}: {len(texts)} rows of character scores for {len(ids)} ids")
    cuts = np.concatenate([[0], np.cumsum(lengths)])
    return {i: (t, scores[cuts[k]:cuts[k + 1]]) for k, (i, t) in enumerate(zip(ids, texts))}


def chars_of(run, frame) -> list:
    """[(text, character scores)] of the out-of-fold rows `frame` (its id and fold columns), in its
    order, from their folds' chars.npz, matched by id (an oof.csv sorted by hand still lines up);
    refused in one line where a row has none."""
    saved = {}
    for k in sorted(frame["fold"].unique()):
        saved.update(read_chars(Path(run) / f"fold{int(k)}"))
    ids = frame["id"].astype(str).tolist()
    missing = [i for i in ids if i not in saved]
    if missing:
        raise DataError(f"{run}: {len(missing)} out-of-fold row(s) have no character scores in their fold's {CHARS}, "
                        f"e.g. id {missing[0]!r}: its {OOF} and its folds disagree")
    return [saved[i] for i in ids]
