"""Tokenized datasets, dynamic padding and batch orders (for training, validation, inference)."""

from __future__ import annotations

import sys

import numpy as np
import torch

from .competition import with_separator


def paired(texts) -> bool:
    """Rows given as (first, second) text pairs, not texts alone."""
    return bool(texts) and isinstance(texts[0], (tuple, list))


def _tokenize(texts, tokenizer):
    """(texts as a list, whether they are pairs, the tokenizer's whole encoding, no truncation)."""
    texts = with_separator(texts, tokenizer)
    pairs = paired(texts)
    first = [str(t[0]) if pairs else str(t) for t in texts]
    second = [str(t[1]) for t in texts] if pairs else None
    return texts, pairs, tokenizer(first, second, truncation=False, verbose=False)


def _cut(body: list, room: int, fit: str) -> list:
    """At most `room` of `body`'s positions: its first ones ("head"), or its first quarter and
    its last three quarters ("head_tail")."""
    if len(body) <= room:
        return body
    if fit == "head_tail" and room > 1:
        head = room // 4
        return body[:head] + body[len(body) - (room - head):]
    return body[:room]


def _parts(seq, pairs: bool, max_len: int, fit: str = "head") -> tuple[list, list]:
    """(positions kept whole: special tokens and, for a pair, the first text cut by `fit` to the
    room the second leaves it, at least half the room; positions of the text that is fitted: the
    only text, or a pair's second)."""
    fitted = 1 if pairs else 0
    keep = [j for j, s_ in enumerate(seq) if s_ != fitted]
    if pairs:  # the first text: what the second leaves, and at least half the room
        n_special, n_second = sum(s_ is None for s_ in seq), sum(s_ == 1 for s_ in seq)
        cap = max((max_len - n_special) // 2, max_len - n_special - n_second)
        firsts = [j for j in keep if seq[j] == 0]
        keep = sorted([j for j in keep if seq[j] != 0] + _cut(firsts, cap, fit))
    return keep, [j for j, s_ in enumerate(seq) if s_ == fitted]


def encode_windows(texts, tokenizer, max_len: int) -> tuple[list, list, int]:
    """Sliding windows: (token ids per window, the text each window belongs to, how many texts
    were longer than max_len). A longer text becomes overlapping windows of its tokens (half a
    window apart, the last one ending at its end), each with the special tokens (and a pair's
    first text) around it; a text that fits is one window."""
    texts, pairs, enc = _tokenize(texts, tokenizer)
    out, owner, n_cut = [], [], 0
    for i, ids in enumerate(enc["input_ids"]):
        if len(ids) <= max_len:
            out.append(list(ids))
            owner.append(i)
            continue
        n_cut += 1
        keep, body = _parts(enc.sequence_ids(i), pairs, max_len)
        prefix = [ids[j] for j in keep if j < body[0]]
        suffix = [ids[j] for j in keep if j > body[-1]]
        room = max(1, max_len - len(prefix) - len(suffix))
        stride = max(1, room // 2)
        starts = list(range(0, max(len(body) - room, 0) + 1, stride))
        if starts[-1] + room < len(body):
            starts.append(len(body) - room)
        for s0 in starts:
            out.append(prefix + [ids[j] for j in body[s0 : s0 + room]] + suffix)
            owner.append(i)
    return out, owner, n_cut


def encode(texts, tokenizer, max_len: int, fit: str = "head") -> tuple[list, list]:
    """(token ids per text, special tokens included and at most max_len each; the indices of the
    texts that were cut). A text is a string or a (first, second) pair (the tokenizer's text pair: the second is
    fitted to what the first leaves; the first, cut by `fit` too, keeps what the second leaves it
    and at least half of max_len: a long query before a short candidate keeps its end).

    fit: "head" keeps the first tokens (what truncation=True does); "head_tail" keeps the first
    quarter and the last three quarters of the room (the ending of an essay often tells its
    quality). Tokenized whole first, with no length warning: the cut is made here.
    """
    if fit not in ("head", "head_tail"):
        raise ValueError(f"unknown fit {fit!r}; valid: head, head_tail (windows: encode_windows)")
    texts, pairs, enc = _tokenize(texts, tokenizer)
    out, cut = [], []
    for i, ids in enumerate(enc["input_ids"]):
        if len(ids) <= max_len:
            out.append(list(ids))
            continue
        cut.append(i)
        # sequence ids: None for special tokens, 0 / 1 for the first / second text
        keep, body = _parts(enc.sequence_ids(i), pairs, max_len, fit)
        out.append([ids[j] for j in sorted(keep + _cut(body, max(0, max_len - len(keep)), fit))])
    return out, cut


# One text making at least this share of a dataset's windows (and at least WINDOW_MANY of them) is
# said: with fit "windows" a very long text otherwise takes most of an epoch's steps without a word.
WINDOW_SHARE, WINDOW_MANY = 0.2, 8


def say_dominant_text(texts, owner) -> None:
    """A warning line when one text makes a large share of the windows (WINDOW_SHARE): which
    text (its place, length and first words), how many windows of how many."""
    counts = np.bincount(np.asarray(owner, dtype=int)) if len(owner) else np.zeros(0, int)
    if not len(counts) or counts.max() < max(WINDOW_MANY, WINDOW_SHARE * len(owner)):
        return
    i = int(counts.argmax())
    text = texts[i] if isinstance(texts[i], str) else " | ".join(map(str, texts[i]))
    start = " ".join(text.split()[:6])
    print(f"warning: fit 'windows': text {i + 1} of {len(counts)} ({len(text)} characters, starting {start!r}) "
          f"makes {counts[i]} of the {len(owner)} windows ({counts[i] / len(owner):.0%}): it is that share of "
          "every pass over these rows (an epoch's training steps); cut it, leave it out, or --fit head_tail",
          file=sys.stderr, flush=True)


def with_labels(item: dict, dataset, i: int) -> dict:
    """An item with its dataset's target and loss weight for row i, where the dataset has them: the one
    place every shape's `__getitem__` reads labels from."""
    if dataset.targets is not None:
        item["target"] = dataset.targets[i]
    if dataset.weights is not None:
        item["weight"] = dataset.weights[i]
    return item


class TextDataset(torch.utils.data.Dataset):
    """Token ids (unpadded, fitted to max_len by `fit`), optional targets and per-row loss
    weights; item i keeps its index. Texts are strings or (first, second) pairs. With fit
    "windows" an item is a window of a text (each with its text's target and weight) and
    `per_text` averages the windows' predictions back to one row per text."""

    def __init__(self, texts, tokenizer, max_len: int, targets=None, weights=None, fit: str = "head"):
        if fit == "windows":
            self.input_ids, owner, self.n_truncated = encode_windows(texts, tokenizer, max_len)
            self.cut = np.zeros(0, int)  # a long text is read whole, in windows
            if targets is not None:  # training (or validation) rows: what one text weighs is said
                say_dominant_text(list(texts), owner)
        else:
            self.input_ids, cut = encode(texts, tokenizer, max_len, fit)
            self.cut, self.n_truncated = np.asarray(cut, dtype=int), len(cut)
            owner = range(len(self.input_ids))
        self.owner = np.asarray(owner, dtype=int)
        self.n_texts = int(self.owner.max()) + 1 if len(self.owner) else 0
        self.lengths = np.array([len(x) for x in self.input_ids])
        self.targets = None if targets is None else np.asarray(targets)[self.owner]
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float32)[self.owner]

    def per_text(self, pred: np.ndarray) -> np.ndarray:
        """Predictions (items, outputs) -> (texts, outputs): the mean of each text's windows."""
        if len(self.owner) == self.n_texts:
            return pred
        sums = np.zeros((self.n_texts, pred.shape[1]))
        np.add.at(sums, self.owner, pred)
        return sums / np.bincount(self.owner, minlength=self.n_texts)[:, None]

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, i):
        return with_labels({"input_ids": self.input_ids[i], "index": i}, self, i)


class Collator:
    """Dynamic padding: pad a batch to its longest sequence, rounded up to a multiple of 8, on the
    tokenizer's padding side ("right", or "left" as some decoders' tokenizers ask)."""

    seed, calls = 0, 0  # a collator that draws at random: batch c's draws come from (seed, c)
    draws = False  # whether it draws at random (utils.resume: such draws in workers cannot resume)

    def __init__(self, pad_token_id: int, multiple: int = 8, target_dtype=torch.float32,
                 padding_side: str = "right"):
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
        self.pad_token_id = pad_token_id
        self.multiple = multiple
        self.target_dtype = target_dtype
        self.left = padding_side == "left"

    def batch_rng(self) -> np.random.Generator:
        """This batch's random draws: from (seed, how many batches were drawn for before), so a
        fold resumed mid-epoch (utils.resume sets `calls`) draws what it would have, whatever
        the loader had fetched ahead when it was saved."""
        rng = np.random.default_rng((self.seed, self.calls))
        self.calls += 1
        return rng

    def __call__(self, items):
        longest = max(len(x["input_ids"]) for x in items)
        width = -(-longest // self.multiple) * self.multiple
        ids = torch.full((len(items), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(items), width), dtype=torch.long)
        for row, x in enumerate(items):
            n = len(x["input_ids"])
            span = slice(width - n, width) if self.left else slice(0, n)
            ids[row, span] = torch.as_tensor(x["input_ids"])
            mask[row, span] = 1
        batch = {
            "input_ids": ids,
            "attention_mask": mask,
            "index": torch.tensor([x["index"] for x in items]),
        }
        if "target" in items[0]:
            batch["target"] = torch.as_tensor(np.stack([x["target"] for x in items]), dtype=self.target_dtype)
        if "weight" in items[0]:
            batch["weight"] = torch.tensor([x["weight"] for x in items], dtype=torch.float32)
        return batch


def length_grouped_batches(lengths, batch_size: int, seed: int, mega: int = 50) -> list:
    """Shuffled batches of similar length: shuffle, sort within windows of mega*batch, shuffle batches."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    batches = []
    window = batch_size * mega
    for start in range(0, len(order), window):
        chunk = order[start : start + window]
        chunk = chunk[np.argsort(-np.asarray(lengths)[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size].tolist() for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def shuffled_batches(n: int, batch_size: int, seed: int) -> list:
    """Plain shuffled batches."""
    order = np.random.default_rng(seed).permutation(n)
    return [order[i : i + batch_size].tolist() for i in range(0, n, batch_size)]


def deal_evenly(batches: list, processes: int) -> list:
    """Batches repeated from the start until their count is a multiple of `processes`.

    Each process of a data-parallel run then gets the same number of whole batches, whatever the
    accelerate version (what its `even_batches` does in 1.14+; older releases refuse a batch
    sampler without a batch size unless `even_batches=False`, and then leave the counts uneven,
    which would hang the gradient all-reduce).
    """
    if processes <= 1 or not batches:
        return batches
    extra = -len(batches) % processes
    return batches + [batches[i % len(batches)] for i in range(extra)]


def sorted_batches(lengths, batch_size: int) -> list:
    """Inference batches, longest first, so each batch pads little; map results back with `index`."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]


class Batches(torch.utils.data.Sampler):
    """A fixed list of batches as a batch sampler (validation, inference)."""

    batch_size = None  # sizes vary: see EpochBatches

    def __init__(self, batches: list):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return len(self.batches)


class EpochBatches(torch.utils.data.Sampler):
    """A batch sampler that draws a new batch order each epoch (seed + epoch), reproducibly."""

    # None, not the size: given a batch size, accelerate's multi-process sharder only yields a
    # round of batches whose last is full, so a length-grouped epoch (short batch anywhere)
    # silently lost batches. With None, whole batches are dealt to the processes in turn. The
    # attribute must exist: accelerate < 1.0 reads it unguarded.
    batch_size = None

    def __init__(self, lengths, batch_size: int, seed: int, group_by_length: bool, processes: int = 1):
        self.lengths, self.size, self.seed = lengths, batch_size, seed
        self.group_by_length, self.processes = group_by_length, processes
        self.epoch, self.skip = 0, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _batches(self):
        seed = self.seed * 1000 + self.epoch
        if self.group_by_length:
            batches = length_grouped_batches(self.lengths, self.size, seed)
        else:
            batches = shuffled_batches(len(self.lengths), self.size, seed)
        return deal_evenly(batches, self.processes)

    def __iter__(self):
        return iter(self._batches()[self.skip:])  # a resumed epoch: the batches not trained yet

    def __len__(self):  # the whole epoch's, skipped or not
        n = -(-len(self.lengths) // self.size)
        return n + (-n % self.processes if n else 0)


def start_epoch(loader, sampler: EpochBatches, epoch: int, skip: int = 0) -> None:
    """Make `epoch` the batch order of the loader's next pass, less its first `skip` batches (of
    every process's: a fold resumed mid-epoch; the batches are dealt to the processes in turn, so
    each skips its own). accelerate's prepared loader counts its own passes from 0 and, from 1.x,
    sets that count on the batch sampler when a pass begins: its count is set too, or a loader
    that starts at a later epoch (a resumed run, the real rows after pseudo epochs) would replay
    epoch 0's order."""
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(epoch)
    sampler.set_epoch(epoch)
    sampler.skip = skip
