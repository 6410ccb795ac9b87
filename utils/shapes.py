"""What a model row is, as batches: the one home the training loop and inference ask how a
competition's rows become sequences, what a forward pass returns, and what a row's outputs are.

    TextRows       one text per row (a string, or a pair) -> one sequence -> the head's outputs:
                   every task that is not a ranking (regression, classes, labels)
    OptionRows     a row's K (text, option) pairs -> K sequences -> K scores, compared with each
                   other by the loss (multiple choice: LLM Science Exam's A-E)
    CatalogueRows  a query -> one sequence -> its embedding; the catalogue's items embedded alike;
                   training batches hold each query's true item and hard negatives mined by the
                   model before it trains, and the logits are the batch's similarities over a
                   temperature; a query's outputs are its cosine to every item (retrieval: Eedi)

`shape_of(comp, cfg)` chooses one from the competition's objective. The loop never asks which:
it calls inputs, dataset, collator, prepare, forward, outputs and figures. Searching the
catalogue is utils.search's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from . import spans
from .batching import Batches, Collator, TextDataset, deal_evenly, paired, sorted_batches, with_labels
from .cli import say_once
from .config import SHAPE_SETTINGS, TrainConfig
from .metrics import METRICS
from .objective import objective_of
from .search import similarities
from .tables import read_catalogue


def _blank(text) -> bool:
    if isinstance(text, (tuple, list)):
        return all(_blank(t) for t in text)  # a pair is blank when both of its texts are
    return not isinstance(text, str) or not text.strip()


def blank_texts(texts) -> np.ndarray:
    """(N,) bool: texts with nothing to read (missing, empty or only whitespace; a pair: both)."""
    return np.array([_blank(t) for t in texts], dtype=bool)


@dataclass(frozen=True)
class TextRows:
    """One text per row, one sequence per text (fit "windows": several, averaged back)."""

    # What prediction makes of a blank text, as the warning on reading a test file says it.
    blank_note: ClassVar[str] = "predicted as the training mean"

    def inputs(self, comp, df) -> list:
        """The model's input per row (utils.competition.Competition.input_texts)."""
        return comp.input_texts(df)

    def blank(self, inputs) -> np.ndarray:
        """(N,) bool: rows with nothing to read, predicted as the training mean."""
        return blank_texts(inputs)

    def dataset(self, inputs, tokenizer, max_len: int, targets=None, weights=None, fit: str = "head"):
        return TextDataset(inputs, tokenizer, max_len, targets, weights, fit)

    def collator(self, tokenizer, target_dtype, data=None, seed: int = 0):
        """The training batches' collator (`data`, the fold's: what a shape's batches add)."""
        return Collator(tokenizer.pad_token_id or 0, 8, target_dtype, tokenizer.padding_side)

    def eval_collator(self, tokenizer, target_dtype):
        return Collator(tokenizer.pad_token_id or 0, 8, target_dtype, tokenizer.padding_side)

    def items(self, comp, folder):
        """What a row's answer is chosen from beside the row itself: a retriever's catalogue, as a
        frame (id, text) read from the competition's `folder`; None for rows answered from their
        own outputs."""
        return None

    def prepare(self, cfg, data, model, device) -> None:
        """What a fold needs from its untrained model before training (hard negatives)."""

    def forward(self, model, batch):
        """The batch's outputs (B, outputs), as the loss takes them."""
        return model(batch["input_ids"], batch["attention_mask"])

    def outputs(self, rows: np.ndarray, data=None, embed=None) -> np.ndarray:
        """Validation rows' outputs (N, outputs) from what the loader gave per row; `embed(loader,
        n)` embeds another loader's rows (the catalogue)."""
        return rows

    def loaders(self, data, eval_batch_size: int, tokenizer, processes: int = 1) -> dict:
        """Loaders besides the training and validation ones, e.g. {"items": the catalogue}, dealt
        to `processes` as the validation rows are (every process at least one batch)."""
        return {}

    def figures(self, comp, data, pred: np.ndarray) -> dict:
        """A fold's figures beside its metric (e.g. seen and unseen items); {} for most."""
        return {}

    def seen(self, inputs) -> dict:
        """What a fold records of its training rows' inputs, for new rows to be checked against
        (`unseen`): {} for most."""
        return {}

    def unseen(self, inputs, seen: dict) -> str:
        """A warning when new rows ask what the fold's training rows never did (its `seen`); ""."""
        return ""


class OptionsDataset(torch.utils.data.Dataset):
    """Rows of K (text, option) pairs: the N*K pairs tokenized as one TextDataset; item i holds
    its K sequences. Lengths are a row's longest (for length-grouped batches)."""

    def __init__(self, inputs, tokenizer, max_len: int, targets=None, weights=None, fit: str = "head"):
        self.k = len(inputs[0]) if inputs else 0
        flat = [pair for row in inputs for pair in row]
        self.inner = TextDataset(flat, tokenizer, max_len, fit="head" if fit == "windows" else fit)
        self.n_truncated = len(np.unique(self.inner.cut // self.k)) if self.k else 0  # rows, as for texts
        self.lengths = self.inner.lengths.reshape(-1, self.k).max(1) if self.k else np.zeros(0, int)
        self.targets = None if targets is None else np.asarray(targets)
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float32)

    def per_text(self, pred):
        return pred

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        return with_labels({"input_ids": self.inner.input_ids[i * self.k:(i + 1) * self.k], "index": i}, self, i)


class OptionCollator(Collator):
    """Pads a batch's B*K sequences as one (B*K, S) batch; per-row fields stay (B,). With
    `sample` (training only), each row keeps that many of its K options: the true one and others
    drawn at random, in their order, its target their index of the true one."""

    def __init__(self, pad_token_id: int, multiple: int = 8, target_dtype=torch.float32,
                 padding_side: str = "right", sample: int = 0, seed: int = 0):
        super().__init__(pad_token_id, multiple, target_dtype, padding_side)
        self.sample, self.seed, self.draws = sample, seed, bool(sample)

    def draw(self, x: dict, rng) -> dict:
        k, t = len(x["input_ids"]), int(x["target"])
        if not self.sample or self.sample >= k or t < 0:
            return x
        others = rng.choice(np.delete(np.arange(k), t), self.sample - 1, replace=False)
        kept = np.sort(np.append(others, t))
        return {**x, "input_ids": [x["input_ids"][j] for j in kept], "target": int(np.flatnonzero(kept == t)[0])}

    def __call__(self, items):
        if self.sample and "target" in items[0]:
            rng = self.batch_rng()
            items = [self.draw(x, rng) for x in items]
        flat = [{"input_ids": ids, "index": 0} for x in items for ids in x["input_ids"]]
        batch = super().__call__(flat)
        batch["index"] = torch.tensor([x["index"] for x in items])
        if "target" in items[0]:
            batch["target"] = torch.as_tensor(np.stack([x["target"] for x in items]), dtype=self.target_dtype)
        if "weight" in items[0]:
            batch["weight"] = torch.tensor([x["weight"] for x in items], dtype=torch.float32)
        return batch


def listed(row, shift: int = 0) -> tuple:
    """A row's (text, option) pairs, each text followed by every option of the row lettered in
    order, "<text> Options: (A) ... (B) ...": a pair then reads its option beside the others.
    `shift` rotates the listing (the letters follow the position): the same question asked with
    its options in another order."""
    k = len(row)
    listing = " ".join(f"({chr(65 + i)}) {row[(i + shift) % k][1]}" for i in range(k))
    return tuple((f"{text} Options: {listing}", option) for text, option in row)


@dataclass(frozen=True)
class OptionRows(TextRows):
    """A row's K options, each paired with its text: K sequences, one score each. With
    `train_options`, a training row is seen with that many of its options (the true one and others
    drawn afresh each time): a reranker's 25 candidates cost 8 sequences a step; validation and
    prediction score every option. With `options_in_text`, each pair's text lists every option
    (`listed`), rotated by `listing_shift` at prediction."""

    # the settings' defaults are the run's (TrainConfig's), stated once there
    train_options: int = TrainConfig.train_options  # 0: every option
    options_in_text: bool = TrainConfig.options_in_text
    listing_shift: int = 0  # prediction only: where the listing starts (test-time reordering)
    blank_note: ClassVar[str] = "its options are scored and ranked under an empty prompt"

    def blank(self, inputs) -> np.ndarray:
        return np.zeros(len(inputs), dtype=bool)  # the options are read even under a blank prompt

    def inputs(self, comp, df) -> list:
        texts = comp.input_texts(df)
        options = df[list(comp.options)].fillna("").astype(str).to_numpy()
        return [tuple((str(t), o) for o in opts) for t, opts in zip(texts, options)]

    def dataset(self, inputs, tokenizer, max_len: int, targets=None, weights=None, fit: str = "head"):
        if self.options_in_text:
            inputs = [listed(row, self.listing_shift) for row in inputs]
        return OptionsDataset(inputs, tokenizer, max_len, targets, weights, fit)

    def collator(self, tokenizer, target_dtype, data=None, seed: int = 0):
        return OptionCollator(tokenizer.pad_token_id or 0, 8, target_dtype, tokenizer.padding_side,
                              self.train_options, seed)

    def eval_collator(self, tokenizer, target_dtype):
        return OptionCollator(tokenizer.pad_token_id or 0, 8, target_dtype, tokenizer.padding_side)

    def forward(self, model, batch):
        rows = batch["index"].shape[0]
        return model(batch["input_ids"], batch["attention_mask"]).reshape(rows, -1)  # (B, K) scores


class QueryCollator(Collator):
    """A retriever's training batch: the queries (B, S), and the items they are trained against
    (M, S'): each query's true item, then its hard negatives; `target` (B,) each query's true
    item's column, `item_index` (M,) the items' catalogue rows (to mask a column that is also
    another query's true item)."""

    def __init__(self, pad_token_id, items: TextDataset, negatives, n_negatives: int, seed: int, target_dtype,
                 padding_side="right"):
        super().__init__(pad_token_id, 8, target_dtype, padding_side)
        self.items, self.negatives, self.n_negatives = items, negatives, n_negatives
        self.seed, self.draws = seed, bool(n_negatives) and negatives is not None

    def __call__(self, rows):
        rng = self.batch_rng()
        batch = super().__call__([{k: v for k, v in x.items() if k != "target"} for x in rows])
        true = [int(x["target"]) for x in rows]
        cols = list(true)
        for x in rows:
            mined = self.negatives[x["index"]] if self.negatives is not None else []
            if len(mined) and self.n_negatives:
                cols += rng.choice(mined, min(self.n_negatives, len(mined)), replace=False).tolist()
        items = Collator.__call__(self, [{"input_ids": self.items.input_ids[j], "index": j} for j in cols])
        batch["item_ids"], batch["item_mask"] = items["input_ids"], items["attention_mask"]
        batch["item_index"] = torch.tensor(cols)
        batch["target"] = torch.arange(len(rows))
        return batch


@dataclass(frozen=True)
class CatalogueRows(TextRows):
    """Queries embedded against a catalogue's items (one backbone and pooling for both)."""

    temperature: float = TrainConfig.temperature  # the similarities' scale: cos / temperature (MNRL's 20: 0.05)
    hard_negatives: int = TrainConfig.hard_negatives  # mined negatives per query in each training batch
    mined: int = 30  # each query's top items (its true ones left out) that negatives are drawn from
    blank_note: ClassVar[str] = "the catalogue is ranked for the empty text"

    def items(self, comp, folder):
        return read_catalogue(comp, folder)

    def collator(self, tokenizer, target_dtype, data=None, seed: int = 0):
        return QueryCollator(tokenizer.pad_token_id or 0, data.items_ds, data.negatives, self.hard_negatives, seed,
                             target_dtype, tokenizer.padding_side)

    def loaders(self, data, eval_batch_size: int, tokenizer, processes: int = 1) -> dict:
        collate = Collator(tokenizer.pad_token_id or 0, 8, torch.long, tokenizer.padding_side)
        batches = Batches(deal_evenly(sorted_batches(data.items_ds.lengths, eval_batch_size), processes))
        return {"items": DataLoader(data.items_ds, batch_sampler=batches, collate_fn=collate)}

    def blank(self, inputs) -> np.ndarray:
        return np.zeros(len(inputs), dtype=bool)  # a blank query still ranks the items (no mean to give)

    @torch.no_grad()
    def prepare(self, cfg, data, model, device) -> None:
        """Hard negatives mined by the untrained model (the first retriever): each training
        query's top `mined` items, its true items never among them."""
        if not self.hard_negatives:
            return
        was = model.training
        model.eval()
        model.to(device)
        embed = lambda ds: _embed(model, ds, data.tokenizer, cfg.eval_batch_size, device)  # noqa: E731
        q, items = embed(data.train_ds), embed(data.items_ds)
        sims = similarities(q, items)
        truth = np.asarray(data.train_ds.targets).astype(int)
        sims[np.arange(len(truth)), truth] = -np.inf  # never the query's true item
        k = min(self.mined, sims.shape[1] - 1)
        data.negatives = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        model.train(was)

    def forward(self, model, batch):
        q = F.normalize(model(batch["input_ids"], batch["attention_mask"]).float(), dim=-1)
        if "item_ids" not in batch:
            return q  # embeddings (inference, validation)
        d = F.normalize(model(batch["item_ids"], batch["item_mask"]).float(), dim=-1)
        logits = q @ d.T / self.temperature  # (B, M)
        cols = batch["item_index"]
        true = cols[batch["target"]]
        # A column holding a query's true item that is not its own column (another query's
        # positive, or a negative that is one) is not a negative: masked out.
        same = (cols[None, :] == true[:, None])
        same[torch.arange(len(true)), batch["target"]] = False
        return logits.masked_fill(same, float("-inf"))

    def outputs(self, rows, data=None, embed=None):
        items = embed("items", len(data.items_ds))
        return similarities(rows, items)

    def figures(self, comp, data, pred):
        """MAP@k and recall@k on the validation queries whose true item some training row holds
        (seen) and on those whose item no training row holds (unseen: what a hidden test's new
        misconceptions ask)."""
        truth = np.asarray(data.valid_ds.targets).astype(int)
        seen = np.isin(truth, np.asarray(data.train_ds.targets).astype(int))
        k = comp.answer_k
        out = {"unseen_share": float(1 - seen.mean())}
        for name, rows in (("seen", seen), ("unseen", ~seen)):
            if rows.any():
                out[f"map@{k}_{name}"] = METRICS[f"map@{k}"].score(truth[rows], pred[rows])
                out[f"recall@{k}_{name}"] = METRICS[f"recall@{k}"].score(truth[rows], pred[rows])
        return out


def _embed(model, ds, tokenizer, batch_size: int, device) -> np.ndarray:
    """(N, H) normalised embeddings of a dataset's sequences, in its order."""
    collate = Collator(tokenizer.pad_token_id or 0, 8, torch.long, tokenizer.padding_side)
    out = None
    for batch in DataLoader(ds, batch_sampler=sorted_batches(ds.lengths, batch_size), collate_fn=collate):
        e = F.normalize(model(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float(), dim=-1)
        out = np.zeros((len(ds), e.shape[1]), dtype=np.float32) if out is None else out
        out[batch["index"].numpy()] = e.cpu().numpy()
    return out


class SpanDataset(torch.utils.data.Dataset):
    """Rows whose answers are spans of a text: the text alone, or a (condition, text) pair; each
    tokenized whole with the fast tokenizer's character offsets. A row longer than max_len becomes
    windows of the text's tokens (half a window apart, the last ending at its end), each with the
    special tokens and the condition around it. Item i is a window: its ids, its targets (a 0/1 per
    token of the text, -100 elsewhere; or its first and last token of the span, the first token
    (CLS) when the window holds none; a student's mixed with its teacher's character scores,
    Objective.window_targets), `span_mask` (the text's tokens). `per_text` turns the
    windows' token outputs into each row's character scores (the mean where windows overlap)."""

    def __init__(self, inputs, tokenizer, max_len: int, targets=None, weights=None, heads: int = 1,
                 objective=None):
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"span tasks need a fast tokenizer (its character offsets): {type(tokenizer).__name__} "
                             "is a slow one; use the backbone's tokenizer.json (transformers' *TokenizerFast)")
        inputs = list(inputs)  # read verbatim (no SEP: a span task joins no columns), so offsets index the text
        pairs = paired(inputs)
        self.texts = [str(t[1]) if pairs else str(t) for t in inputs]
        first = [str(t[0]) for t in inputs] if pairs else self.texts
        enc = tokenizer(first, self.texts if pairs else None, truncation=False, verbose=False,
                        return_offsets_mapping=True)
        side = 1 if pairs else 0
        self.input_ids, self.offsets, self.masks, owner, tgt, self.n_truncated, cut = [], [], [], [], [], 0, []
        for i, ids in enumerate(enc["input_ids"]):
            seq = enc.sequence_ids(i)
            offsets = np.asarray(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2)
            mask = np.array([x == side for x in seq], dtype=bool)
            if targets is not None:
                text, answer, *teacher = targets[i]  # a student's: + its teacher's character scores, weight, T
                found = () if answer is None else objective.spans_of(text, answer, f"row {i + 1}")  # None: unlabelled
                labels = spans.token_targets(offsets, found, text, mask)
            keep = np.arange(len(ids))
            windows = [keep]
            if len(ids) > max_len and mask.any():  # (a text of no token: the condition alone, cut below)
                self.n_truncated += 1
                body = np.flatnonzero(mask)
                around = np.flatnonzero(~mask)
                prefix, suffix = around[around < body[0]], around[around > body[-1]]
                room = max_len - len(prefix) - len(suffix)
                if room < max_len // 2:  # windows of a few text tokens each: not read in crumbs
                    own = [j for j in prefix if seq[j] is not None]  # the condition's own tokens
                    need = max_len // 2 - room
                    if targets is not None or need >= len(own):  # training refuses; prediction cuts it
                        raise ValueError(
                            f"the condition {spans.show(first[i], 60)} takes {len(own)} tokens ({max_len - room} with "
                            f"the special tokens) of max_len {max_len}, leaving {max(room, 0)} for its text in each "
                            f"window (at least {max_len // 2} needed): train with a larger --max-len or shorten "
                            "the condition")
                    dropped = set(own[len(own) - need:])
                    prefix = np.array([j for j in prefix if j not in dropped], dtype=int)
                    room, cut = room + need, cut + [first[i]]
                starts = list(range(0, max(len(body) - room, 0) + 1, max(1, room // 2)))
                if starts[-1] + room < len(body):
                    starts.append(len(body) - room)
                windows = [np.concatenate([prefix, body[s0:s0 + room], suffix])[:max_len] for s0 in starts]
            elif len(ids) > max_len:
                windows = [keep[:max_len]]
            for w in windows:
                self.input_ids.append([ids[j] for j in w])
                self.offsets.append(offsets[w])
                self.masks.append(mask[w])
                owner.append(i)
                if targets is not None:
                    t = labels[w]
                    if heads == 2:
                        on = np.flatnonzero(t == 1)
                        t = np.array([on[0], on[-1]] if len(on) else [0, 0], dtype=np.int64)
                    if teacher:
                        t = objective.window_targets(t, spans.teacher_token_probs(offsets[w], teacher[0], mask[w]),
                                                     *teacher[1:])
                    tgt.append(t)
        self.owner = np.asarray(owner, dtype=int)
        self.n_texts, self.heads = len(self.texts), heads
        per_row = np.bincount(self.owner, minlength=self.n_texts)
        long = per_row > 1
        self.fit_note = "" if not long.any() else (
            f"read whole in overlapping windows: {int(per_row[long].sum())} of the {len(self.owner)} windows"
            f" (row {int(per_row.argmax()) + 1} alone {int(per_row.max())})")
        if long.any() and per_row[long].sum() > len(self.owner) / 2:
            say_once(f"warning: {int(long.sum())} of {self.n_texts} texts longer than max_len {max_len} make "
                     f"{int(per_row[long].sum())} of the {len(self.owner)} windows, most of an epoch (row "
                     f"{int(per_row.argmax()) + 1} alone {int(per_row.max())}): train with a larger --max-len, or "
                     "check those texts")
        if cut:  # said once per process: each fold of a run reads the same rows
            say_once(f"warning: {len(cut)} row(s) read with their condition cut to its first tokens, leaving half of "
                     f"max_len {max_len} to the text in each window (e.g. {spans.show(cut[0], 60)})")
        self.cut = np.zeros(0, int)  # a long text is read whole, in windows
        self.lengths = np.array([len(x) for x in self.input_ids])
        self.targets = tgt if targets is not None else None
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float32)[self.owner]

    def per_text(self, pred: np.ndarray) -> np.ndarray:
        """Token outputs (windows, S, heads) -> character scores (rows, C, heads), C the longest
        text, 0 past each row's text: each window's on the characters its text tokens span, the
        mean where windows overlap. At float16's precision, as a fold's chars.npz keeps them: the
        validation score, oof.csv's answers and any decoding of the file agree to the character."""
        width = max([len(t) for t in self.texts] + [1])
        sums = np.zeros((self.n_texts, width, self.heads), dtype=np.float64)
        counts = np.zeros((self.n_texts, width), dtype=np.float64)
        for w, row in enumerate(self.owner):
            text, offsets, mask = self.texts[row], self.offsets[w], self.masks[w]
            used = mask & (offsets[:, 1] > offsets[:, 0])
            if not used.any():
                continue
            lo, hi = int(offsets[used, 0].min()), int(offsets[used, 1].max())
            scores = spans.char_scores(offsets, pred[w, : len(offsets)], len(text), mask, text)
            sums[row, lo:hi] += scores[lo:hi]
            counts[row, lo:hi] += 1
        return (sums / np.maximum(counts, 1)[:, :, None]).astype(np.float16).astype(np.float32)

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, i):
        return with_labels({"input_ids": self.input_ids[i], "index": i, "span_mask": self.masks[i]}, self, i)


class SpanCollator(Collator):
    """Pads on the right (a token's place is its place in the offsets), token targets with -100;
    `span_mask` (B, S): the text's tokens. `heads` 2: targets are (B, 2) token positions."""

    def __init__(self, pad_token_id: int, heads: int = 1):
        super().__init__(pad_token_id, 8, torch.float32, "right")
        self.heads = heads

    def __call__(self, items):
        batch = super().__call__([{k: v for k, v in x.items() if k not in ("target", "span_mask")} for x in items])
        width = batch["input_ids"].shape[1]
        mask = torch.zeros((len(items), width), dtype=torch.bool)
        for row, x in enumerate(items):
            mask[row, : len(x["span_mask"])] = torch.as_tensor(x["span_mask"])
        batch["span_mask"] = mask
        if "target" in items[0]:
            if self.heads == 2 and any(np.ndim(x["target"]) == 2 for x in items):  # a student's: distributions
                target = torch.zeros((len(items), 2, width))  # (2, tokens) each; a labelled row's one-hot
                for row, x in enumerate(items):
                    t = np.asarray(x["target"])
                    if t.ndim == 1:
                        target[row, [0, 1], t] = 1.0
                    else:
                        target[row, :, : t.shape[1]] = torch.as_tensor(t)
                batch["target"] = target
            elif self.heads == 2:
                batch["target"] = torch.as_tensor(np.stack([x["target"] for x in items]), dtype=torch.long)
            else:
                target = torch.full((len(items), width), -100.0)
                for row, x in enumerate(items):
                    target[row, : len(x["target"])] = torch.as_tensor(x["target"], dtype=torch.float32)
                batch["target"] = target
        return batch


@dataclass(frozen=True)
class SpanRows(TextRows):
    """A row's text (with its condition: a pair) -> one sequence (or windows) -> an output per token
    -> character scores (SpanDataset.per_text). The heads (1: in or out; 2: start and end) are the
    objective's (utils.objective.Spans), which reads the spans from the labels."""

    objective: object = None  # utils.objective.Spans, for its competition (shape_of gives it)
    blank_note: ClassVar[str] = "answered with no span"

    def blank(self, inputs) -> np.ndarray:
        return np.zeros(len(inputs), dtype=bool)  # an empty text has no character: its answer is empty anyway

    def dataset(self, inputs, tokenizer, max_len: int, targets=None, weights=None, fit: str = "windows"):
        return SpanDataset(inputs, tokenizer, max_len, targets, weights, self.heads, self.objective)

    def collator(self, tokenizer, target_dtype, data=None, seed: int = 0):
        return SpanCollator(tokenizer.pad_token_id or 0, self.heads)

    def eval_collator(self, tokenizer, target_dtype):
        return SpanCollator(tokenizer.pad_token_id or 0, self.heads)

    @property
    def heads(self) -> int:
        return self.objective.heads

    def seen(self, inputs) -> dict:
        """A paired row's conditions (Tweet's sentiments, NBME's features), sorted."""
        return {"conditions": sorted({str(t[0]) for t in inputs})} if paired(inputs) else {}

    def unseen(self, inputs, seen: dict) -> str:
        if "conditions" not in seen or not paired(inputs):
            return ""  # a fold recorded before conditions were, or rows without one
        known = set(seen["conditions"])
        new = [str(t[0]) for t in inputs if str(t[0]) not in known]
        if not new:
            return ""
        return (f"{len(new)} of {len(inputs)} rows are read with a condition no training row had (e.g. "
                f"{spans.show(new[0], 60)}; {len(set(new))} such): their spans come from a model that never learned it")

    def forward(self, model, batch):
        """(B, S, heads) token logits; with two heads, a position outside the text (but the first,
        which answers "no span") cannot start or end one."""
        logits = model(batch["input_ids"], batch["attention_mask"]).float()
        if self.heads == 2:
            allowed = batch["span_mask"].clone()
            allowed[:, 0] = True
            logits = logits.masked_fill(~allowed[:, :, None], -1e4)
        return logits


SHAPES = {"options": OptionRows, "items": CatalogueRows, "spans": SpanRows}


def shape_of(comp, cfg=None) -> TextRows:
    """The shape of a competition's rows (its objective's kind); its settings from cfg, a
    TrainConfig or a fold's recorded settings (a dict; a setting it lacks keeps its default): a
    retriever's temperature and negatives, the options a multiple-choice row trains on and reads."""
    kind = objective_of(comp).kind
    keys = SHAPE_SETTINGS.get(kind, ())
    if isinstance(cfg, dict):
        settings = {k: cfg[k] for k in keys if k in cfg}
    else:
        settings = {k: getattr(cfg, k) for k in keys} if cfg is not None else {}
    cls = SHAPES.get(kind, TextRows)
    if "objective" in {f.name for f in dataclasses.fields(cls)}:  # a shape that reads its labels as it says
        settings["objective"] = objective_of(comp)
    return cls(**settings)
