"""Span competitions (the answer is parts of the text), as plain functions over numpy: no torch.

A row's spans are a sorted tuple of (start, end) character offsets of its text, end exclusive:
`((0, 4), (9, 12))` is `text[0:4]` and `text[9:12]`; `()` is no span. The way through a model:

    labels as text or offsets  -> align / parse_location, check_spans   (spans)
    spans -> token targets      -> token_targets(offsets, spans, text)  (a fast tokenizer's offset mapping)
    token outputs -> characters -> token_to_char_probs(offsets, probs, len(text))
    characters -> spans         -> decode_threshold (NBME) or best_span (Tweet: start/end scores)
    spans -> score              -> char_micro_f1 (NBME), word_jaccard (Tweet), entity_fbeta (PII's F5)

Whitespace at a span's edges is noise in Kaggle's labels (Tweet's metric splits words on it; NBME's few
spans off by whitespace are Kaggle's own offsets), so targets are made from spans stripped of it and
decoded spans come out without it. The metrics score the spans they are given, whitespace included.
"""

from __future__ import annotations

import ast
import math
import re
import unicodedata
from collections import deque

import numpy as np

_PIECE = re.compile(r"\s*(-?[0-9]+)\s+(-?[0-9]+)\s*")


def show(value, limit: int = 120) -> str:
    """repr on one line (newlines escaped), cut to `limit` characters."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _pieces(item: str, value, where: str) -> list:
    """[(start, end)] of one 's e;s e' string; `value` is the whole cell, for the error."""
    out = []
    for piece in item.split(";"):
        m = _PIECE.fullmatch(piece)
        if m is None:
            raise ValueError(f"{where}: {show(value)} is not a location: spans 'start end' joined by ';', "
                             f"or a list of them; bad piece {show(piece)}")
        s, e = int(m.group(1)), int(m.group(2))
        if s < 0 or e < 0:
            raise ValueError(f"{where}: negative offset in {show(value)}")
        if s > e:
            raise ValueError(f"{where}: span '{s} {e}' starts after it ends in {show(value)}")
        out.append((s, e))
    return out


def parse_location(value, where: str = "location") -> tuple:
    """NBME's location cell -> spans, sorted: the training file's Python-list string (`"['696 724']"`,
    `"['85 99;126 138', '200 210']"`, `"[]"`) or the submission's plain `"85 99;126 138"` (`""`, None or
    NaN, as pandas reads an empty cell: no span). Overlaps are kept (check_spans merges them).
    Raises ValueError, one line naming `where` (e.g. "train.csv, column location, row 17") and the value,
    for malformed text, a negative offset or a start after its end."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ()
    if not isinstance(value, str):
        raise ValueError(f"{where}: {show(value)} is not a location string")
    text = value.strip()
    if not text:
        return ()
    if text.startswith("["):
        try:
            items = ast.literal_eval(text)  # literals only: no name, call or attribute is evaluated
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise ValueError(f"{where}: {show(value)} is not a Python list of 'start end' strings") from None
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"{where}: {show(value)} is not a Python list of 'start end' strings")
    else:
        items = [text]
    return tuple(sorted(p for item in items for p in _pieces(item, value, where)))


def _merge(spans, where: str, n_chars: int | None = None) -> tuple:
    """Sorted spans, empty ones dropped, those that overlap or touch merged; an offset below 0 (or past
    `n_chars`) or a start after its end raises ValueError naming `where`."""
    out = []
    for s, e in sorted((int(s), int(e)) for s, e in spans):
        if s < 0 or s > e or (n_chars is not None and e > n_chars):
            if n_chars is None:
                raise ValueError(f"{where}: span '{s} {e}' is not a span (0 <= start <= end)")
            if n_chars == 0:  # (a text of whitespace only is read as blank)
                raise ValueError(f"{where}: span '{s} {e}' of a blank text")
            raise ValueError(f"{where}: span '{s} {e}' is not inside a text of {n_chars} characters "
                             f"(0 <= start <= end <= {n_chars})")
        if s == e:
            continue
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return tuple(out)


def check_spans(spans, text: str, where: str = "spans") -> tuple:
    """Spans checked against `text` -> the canonical spans: sorted, empty ones dropped, and spans that
    overlap or touch merged into one (they cover the same characters, which is all the metrics see).
    An offset outside the text (negative, or past its `len(text)` characters) or a start after its end
    raises ValueError, one line naming `where` and the span."""
    return _merge(spans, where, len(text))


def format_location(spans) -> str:
    """Spans -> NBME's submission cell: "s e;s e" in order of start, "" for none."""
    return ";".join(f"{int(s)} {int(e)}" for s, e in sorted(spans))


def strip_spans(spans, text: str) -> tuple:
    """Spans without whitespace at their edges; a span of whitespace only is dropped. Sorted."""
    out = []
    for s, e in sorted(spans):
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            out.append((s, e))
    return tuple(out)


def _word_windows(text: str, words: set):
    """(jaccard, -length, -start, start, end) of every window of whole words of `text` (words: runs
    of non-whitespace), against the lower-cased word set `words`."""
    found = [(m.start(), m.end(), m.group().lower()) for m in re.finditer(r"\S+", text)]
    for i in range(len(found)):
        seen = set()
        for j in range(i, len(found)):
            seen.add(found[j][2])
            inter = len(seen & words)
            s, e = found[i][0], found[j][1]
            yield inter / (len(seen) + len(words) - inter), -(e - s), -s, s, e


def align(text: str, selected: str, where: str = "selected_text") -> tuple:
    """Where a label given as text lies in `text` -> (spans, exact): spans `((start, end),)`, or `()`
    for an empty (or whitespace-only) selection; exact False when the label was not found verbatim.

    In order: the first verbatim occurrence (a label carries no offset: the first is taken when it
    occurs twice); the same words with any whitespace between them, case ignored; else the window of
    whole words of `text` with the best word Jaccard against `selected` (ties: the shortest, then the
    first). A label sharing no word with the text raises ValueError naming `where`."""
    if selected is None or (isinstance(selected, float) and math.isnan(selected)) or not selected.strip():
        return (), True
    at = text.find(selected)
    if at >= 0:
        return ((at, at + len(selected)),), True
    pattern = r"\s+".join(re.escape(w) for w in selected.split())
    m = re.search(pattern, text, flags=re.IGNORECASE)
    if m is not None:
        return ((m.start(), m.end()),), False
    best = max(_word_windows(text, set(selected.lower().split())), default=None)
    if best is None or best[0] == 0:
        raise ValueError(f"{where}: {show(selected)} shares no word with its text {show(text, 80)}")
    return ((best[3], best[4]),), False


def char_labels(len_text: int, spans) -> np.ndarray:
    """(len_text,) uint8: 1 at every character inside any span, else 0."""
    out = np.zeros(int(len_text), dtype=np.uint8)
    for s, e in spans:
        if s < 0 or e > len_text or s > e:
            raise ValueError(f"span '{s} {e}' lies outside a text of {len_text} characters")
        out[s:e] = 1
    return out


def _offsets(offsets, n_chars: int, sequence_mask, what: str):
    """(starts, ends, used) of an offset mapping: used marks the tokens that cover characters of the
    text (non-empty offsets, inside `sequence_mask`); their offsets must lie inside the text."""
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    starts, ends = off[:, 0], off[:, 1]
    used = ends > starts
    if sequence_mask is not None:
        mask = np.asarray(sequence_mask, dtype=bool).reshape(-1)
        if len(mask) != len(off):
            raise ValueError(f"{what}: sequence_mask has {len(mask)} entries for {len(off)} tokens")
        used &= mask
    if used.any() and (starts[used].min() < 0 or ends[used].max() > n_chars):
        raise ValueError(f"{what}: token offsets reach character {int(ends[used].max())} of a text of {n_chars} "
                         "characters: offsets of another text (the other of a pair? pass sequence_mask)")
    return starts, ends, used


def token_targets(offsets, spans, text: str, sequence_mask=None, ignore: int = -100) -> np.ndarray:
    """(T,) int64 target per token of a fast tokenizer's offset mapping (T, 2): 1 when any of its
    characters lies in a span (spans stripped of whitespace at their edges first, so BPE's "Ġword"
    whose offsets hold the space before the word is judged by the word), else 0; `ignore` (-100,
    what cross-entropy skips) for tokens covering no character (special tokens' (0, 0), a lone
    prepended "Ġ"/"▁") and for tokens outside `sequence_mask` (T,) (e.g. `sequence_ids == 1`: the
    note of a (feature, note) pair; offsets of the other text mean nothing here)."""
    starts, ends, used = _offsets(offsets, len(text), sequence_mask, "token_targets")
    spans = strip_spans(check_spans(spans, text, "token_targets"), text)
    inside = np.concatenate([[0], np.cumsum(char_labels(len(text), spans), dtype=np.int64)])
    hit = inside[np.clip(ends, 0, len(text))] - inside[np.clip(starts, 0, len(text))] > 0
    return np.where(used, hit.astype(np.int64), ignore)


def teacher_token_probs(offsets, chars, sequence_mask) -> np.ndarray:
    """A teacher's character scores (len_text, heads) (its chars.npz rows, any tokenizer's) on one
    window of the student's tokens (`offsets`, `sequence_mask` its text's tokens). One head:
    (T,), each token of the text the mean of its characters' probabilities, 0 elsewhere. Two
    heads: (2, T), the teacher's start and end mass on each token's characters (a distribution on
    words' edges), the mass outside the window's text on its first token ("no span here", as a
    window without the span is labelled), 0 on every other token outside the text.
    Objective.window_targets mixes them with the window's labels."""
    chars = np.asarray(chars, dtype=np.float64).reshape(len(chars), -1)
    starts, ends, used = _offsets(offsets, len(chars), sequence_mask, "teacher_token_probs")
    sums = np.concatenate([np.zeros((1, chars.shape[1])), np.cumsum(chars, axis=0)])
    lo, hi = np.clip(starts, 0, len(chars)), np.clip(ends, 0, len(chars))
    mass = np.where(used[:, None], sums[hi] - sums[lo], 0.0)  # (T, heads): each token's characters' total
    if chars.shape[1] == 1:
        return mass[:, 0] / np.maximum(hi - lo, 1)
    mass = mass.T.copy()
    mass[:, 0] += np.maximum(0.0, 1.0 - mass.sum(axis=1))  # the teacher's mass outside this window's text
    return mass


def scores_cell(scores) -> str:
    """A text's character scores of one head (len_text,) as a csv cell: "len|i:p a-b:p ...", every
    character whose score is not 0, to 3 significant digits (a temperature above 1 lifts the
    smallest: none is dropped), a run of equal scores (one token's characters, one head) as its
    first and last character: a teacher's signal in utils.pseudo's files, where a number per cell
    cannot hold it."""
    scores = np.asarray(scores, dtype=np.float32).reshape(-1)
    first = np.flatnonzero(np.r_[True, scores[1:] != scores[:-1]]) if len(scores) else np.zeros(0, int)
    last = np.r_[first[1:], len(scores)] - 1
    return f"{len(scores)}|" + " ".join(f"{a}:{scores[a]:.3g}" if a == b else f"{a}-{b}:{scores[a]:.3g}"
                                        for a, b in zip(first, last) if scores[a] != 0)


def cell_scores(cell, where: str = "cell") -> np.ndarray:
    """A scores_cell back as (len_text,) float32; one line naming `where` when it is not one."""
    try:
        n, _, rest = str(cell).partition("|")
        out = np.zeros(int(n), dtype=np.float32)
        for piece in rest.split():
            run, _, p = piece.partition(":")
            a, _, b = run.partition("-")
            a, b = int(a), int(b or a)
            if not 0 <= a <= b < len(out):
                raise IndexError(run)
            out[a:b + 1] = float(p)
    except (ValueError, IndexError):
        raise ValueError(f"{where}: {show(cell, 40)} is not a text's character scores "
                         "(\"length|index:score first-last:score ...\", as utils.pseudo writes them)") from None
    if not np.isfinite(out).all() or (out < 0).any() or (out > 1).any():
        raise ValueError(f"{where}: a character score outside [0, 1]")
    return out


def token_to_char_probs(offsets, token_probs, len_text: int, sequence_mask=None) -> np.ndarray:
    """(len_text,) float32 probability per character from one per token (T,): each character gets
    its token's (the largest where tokens share characters: byte-level BPE's pieces of one emoji,
    a prepended "Ġ" over the first letter). A character no token covers (the space between tokens
    with trimmed offsets, a character the normalizer dropped) gets the smaller of its nearest covered
    neighbours' probabilities: inside a span exactly when both sides are, 0 at the text's edges.
    Tokens covering no character or outside `sequence_mask` are skipped (their value, e.g. -100,
    is never read)."""
    starts, ends, used = _offsets(offsets, len_text, sequence_mask, "token_to_char_probs")
    probs = np.asarray(token_probs, dtype=np.float32).reshape(-1)
    if len(probs) != len(starts):
        raise ValueError(f"token_to_char_probs: {len(probs)} token probabilities for {len(starts)} offsets")
    out = np.full(len_text, -np.inf, dtype=np.float32)
    for s, e, p in zip(starts[used], ends[used], probs[used]):
        out[s:e] = np.maximum(out[s:e], p)
    covered = np.isfinite(out)
    if covered.all():
        return out
    idx = np.arange(len_text)
    left = np.maximum.accumulate(np.where(covered, idx, -1))  # last covered index at or before i
    right = np.minimum.accumulate(np.where(covered, idx, len_text)[::-1])[::-1]  # first at or after i
    safe = np.where(covered, out, 0.0)
    fill = np.minimum(safe[np.clip(left, 0, None)], safe[np.clip(right, None, len_text - 1)])
    fill[(left < 0) | (right >= len_text)] = 0.0
    return np.where(covered, out, fill).astype(np.float32)


def decode_threshold(char_probs, threshold: float, text: str, join_whitespace: bool = True) -> tuple:
    """Spans of consecutive characters whose probability is above `threshold` (strictly), stripped of
    whitespace at their edges (a span of whitespace only is dropped). With `join_whitespace`, spans
    that only whitespace separates become one (a phrase whose space a token left low is one span,
    as NBME's annotators mark it); spans separated by anything else stay apart."""
    p = np.asarray(char_probs, dtype=float).reshape(-1)
    if len(p) != len(text):
        raise ValueError(f"decode_threshold: {len(p)} probabilities for a text of {len(text)} characters")
    on = np.concatenate([[False], p > threshold, [False]])
    edges = np.flatnonzero(on[1:] != on[:-1])  # starts and ends alternate
    spans = strip_spans(zip(edges[::2].tolist(), edges[1::2].tolist()), text)
    if not join_whitespace:
        return spans
    out = []
    for s, e in spans:
        if out and not text[out[-1][1]:s].strip():
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return tuple(out)


def best_span(start_scores, end_scores, max_len: int | None = None) -> tuple:
    """(start, end) maximizing start_scores[start] + end_scores[end - 1] with start <= end - 1 (scores
    add: pass logits or log-probabilities; `end_scores[j]` scores position j as the span's last), and
    with `max_len`, end - start <= max_len. O(n): a running maximum of the start scores (a sliding
    one under `max_len`). Ties: the earliest end, then the earliest start. Works on characters or on
    tokens (then the answer is `text[offsets[start][0]:offsets[end - 1][1]]`); -inf masks a position."""
    s, e = np.asarray(start_scores, dtype=float).reshape(-1), np.asarray(end_scores, dtype=float).reshape(-1)
    if len(s) != len(e) or len(s) == 0:
        raise ValueError(f"best_span: {len(s)} start scores and {len(e)} end scores (need as many, at least one)")
    if max_len is not None and max_len < 1:
        raise ValueError(f"best_span: max_len {max_len} must be at least 1")
    if max_len is None or max_len >= len(s):
        run = np.maximum.accumulate(s)
        new = np.concatenate([[True], s[1:] > run[:-1]])  # a strictly better start: ties keep the earlier
        arg = np.maximum.accumulate(np.where(new, np.arange(len(s)), 0))
    else:
        run, arg, window = np.empty(len(s)), np.empty(len(s), dtype=np.int64), deque()
        for j in range(len(s)):
            while window and s[window[-1]] < s[j]:  # keeps the earlier of equal starts
                window.pop()
            window.append(j)
            if window[0] <= j - max_len:
                window.popleft()
            run[j], arg[j] = s[window[0]], window[0]
    total = run + e
    if not np.isfinite(total).any():
        raise ValueError("best_span: no position has a finite start and a finite end score")
    j = int(np.nanargmax(np.where(np.isfinite(total), total, -np.inf)))
    return int(arg[j]), j + 1


def _words(text) -> set:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return set()
    return set(str(text).lower().split())


def word_jaccard(true_texts, pred_texts) -> float:
    """Tweet Sentiment Extraction's metric: the mean over rows of |A & B| / |A | B|, A and B the sets of
    lower-cased, whitespace-split words of the true and predicted text (Kaggle's `jaccard`). Where both
    are empty Kaggle's code divides by zero; here that row scores 1.0 (nothing to find, nothing
    found). None or NaN (an empty cell as pandas reads it) is the empty text."""
    true_texts, pred_texts = list(true_texts), list(pred_texts)
    if len(true_texts) != len(pred_texts) or not true_texts:
        raise ValueError(f"word_jaccard: {len(true_texts)} true and {len(pred_texts)} predicted texts "
                         "(need as many, at least one)")
    scores = []
    for t, p in zip(true_texts, pred_texts):
        a, b = _words(t), _words(p)
        c = len(a & b)
        scores.append(1.0 if not a and not b else c / (len(a) + len(b) - c))
    return float(np.mean(scores))


def _length(spans) -> int:
    return sum(e - s for s, e in spans)


def _overlap(a, b) -> int:
    """Characters two canonical (sorted, disjoint) span tuples share."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def char_micro_scores(true_spans_per_row, pred_spans_per_row) -> dict:
    """NBME's scoring as counts: every character index inside a predicted span is a true or false
    positive, every true character not predicted a false negative, summed over rows (overlapping
    spans count a character once) -> {"precision", "recall", "f1", "tp", "fp", "fn"}. A row is its
    spans or a location cell as oof.csv and the submission write it ("s e;s e"; "" or NaN: none).
    With no true and no predicted character at all, precision, recall and F1 are 1.0 (scikit-learn
    says 0.0); with none predicted, precision is 0.0."""
    true_rows, pred_rows = list(true_spans_per_row), list(pred_spans_per_row)
    if len(true_rows) != len(pred_rows):
        raise ValueError(f"char_micro_f1: {len(true_rows)} rows of true spans and {len(pred_rows)} of predicted")

    def spans_of(value, where):
        return parse_location(value, where) if value is None or isinstance(value, (str, float)) else value

    tp = fp = fn = 0
    for i, (t, p) in enumerate(zip(true_rows, pred_rows)):
        t = _merge(spans_of(t, f"char_micro_f1: true spans, row {i + 1}"), "char_micro_f1: true spans")
        p = _merge(spans_of(p, f"char_micro_f1: predicted spans, row {i + 1}"), "char_micro_f1: predicted spans")
        both = _overlap(t, p)
        tp, fp, fn = tp + both, fp + _length(p) - both, fn + _length(t) - both
    if tp + fp + fn == 0:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0, "tp": 0, "fp": 0, "fn": 0}
    return {"precision": tp / (tp + fp) if tp + fp else 0.0, "recall": tp / (tp + fn) if tp + fn else 0.0,
            "f1": 2 * tp / (2 * tp + fp + fn), "tp": tp, "fp": fp, "fn": fn}


def char_micro_f1(true_spans_per_row, pred_spans_per_row) -> float:
    """NBME's metric: micro F1 over character indices, summed over rows (char_micro_scores' "f1")."""
    return char_micro_scores(true_spans_per_row, pred_spans_per_row)["f1"]


def row_entities(rows) -> set:
    """A span task's answers per row (tuples of spans) as entities: {(row, start, end)}."""
    return {(i, int(s), int(e)) for i, spans in enumerate(rows) for s, e in spans}


def span_fbeta(true_rows, pred_rows, beta: float = 5.0) -> float:
    """Micro F-beta over the spans of every row (entity_fbeta of row_entities): a span counts when
    its row, start and end are exact. A row of a (document, entity type) pair makes PII Data
    Detection's F5 over (document, type, place)."""
    return entity_fbeta(row_entities(true_rows), row_entities(pred_rows), beta)


def entity_fbeta(true_entities, pred_entities, beta: float = 5.0) -> float:
    """Micro F-beta over entities: any hashable tuples, e.g. (row, entity type, (start, end)), or PII
    Data Detection's (document, token, label); each counted once. Precision and recall of the predicted
    against the true set, F = (1 + b^2) P R / (b^2 P + R): beta 5 (PII's F5) weighs recall 25 times
    precision. Nothing true and nothing predicted scores 1.0; nothing found otherwise 0.0."""
    t, p = set(true_entities), set(pred_entities)
    tp, b2 = len(t & p), beta * beta
    if not t and not p:
        return 1.0
    if tp == 0:
        return 0.0
    return float((1 + b2) * tp / ((1 + b2) * tp + b2 * (len(t) - tp) + (len(p) - tp)))


def token_edges_to_char(offsets, token_probs, len_text: int, edge: str, sequence_mask=None,
                        text: str | None = None) -> np.ndarray:
    """(len_text,) float32 from one score per token (T,) of a start or end head: each token's score
    on its first character (`edge` "start") or its last ("end"), 0 on every other character; where
    tokens share that character, the larger. With `text`, the first and last that is not whitespace
    (SentencePiece's "▁word" and untrimmed byte-level "Ġword" cover the space before the word). A
    start/end model's distributions in character space, where tokenizers agree on a word's edges
    (their blend averages there)."""
    if edge not in ("start", "end"):
        raise ValueError(f"token_edges_to_char: edge is 'start' or 'end', got {edge!r}")
    starts, ends, used = _offsets(offsets, len_text, sequence_mask, "token_edges_to_char")
    probs = np.asarray(token_probs, dtype=np.float32).reshape(-1)
    if len(probs) != len(starts):
        raise ValueError(f"token_edges_to_char: {len(probs)} token scores for {len(starts)} offsets")
    out = np.zeros(len_text, dtype=np.float32)
    first, last = starts[used].copy(), ends[used] - 1
    if text is not None:
        for j in range(len(first)):
            while first[j] < last[j] and text[first[j]].isspace():
                first[j] += 1
            while last[j] > first[j] and text[last[j]].isspace():
                last[j] -= 1
    np.maximum.at(out, first if edge == "start" else last, probs[used])
    return out


def char_scores(offsets, token_probs, len_text: int, sequence_mask=None, text: str | None = None) -> np.ndarray:
    """(len_text, heads) character scores from a sequence's token outputs (T, heads): one head, the
    probability that a character lies in a span (token_to_char_probs); two, a start and an end
    distribution on the words' first and last characters (token_edges_to_char)."""
    probs = np.asarray(token_probs, dtype=np.float32)
    probs = probs.reshape(len(probs), -1)
    if probs.shape[1] == 1:
        return token_to_char_probs(offsets, probs[:, 0], len_text, sequence_mask)[:, None]
    return np.stack([token_edges_to_char(offsets, probs[:, j], len_text, edge, sequence_mask, text)
                     for j, edge in enumerate(("start", "end"))], axis=1)


def decode(text: str, scores, threshold: float = 0.5) -> tuple:
    """A row's spans from its character scores (len(text), heads): one head, the characters above
    `threshold` (decode_threshold, joined across whitespace); two, the best start <= end pair of
    the start and end distributions (best_span on their logarithms), stripped of whitespace at its
    edges. An empty text has no span."""
    scores = np.asarray(scores, dtype=float).reshape(len(text), -1) if len(text) else np.zeros((0, 1))
    if not len(text):
        return ()
    if scores.shape[1] == 1:
        return with_marks(decode_threshold(scores[:, 0], threshold, text), text)
    start, end = np.log(scores[:, 0] + 1e-12), np.log(scores[:, 1] + 1e-12)
    if not (np.isfinite(start).any() and np.isfinite(end).any()):
        return ()  # NaN scores (a diverged model): no answer, scored as such
    s, e = best_span(start, end)
    return with_marks(strip_spans(((s, e),), text), text)


def with_marks(spans, text: str) -> tuple:
    """Spans whose edges keep a letter's combining marks: "cafe\u0301" (e + accent, as some keyboards
    type é) ends after the accent, which a tokenizer's normalizer may drop from every token's
    offsets (no character score of its own: a span decoded from the letters alone would cut it)."""
    out = []
    for s, e in spans:
        while s > 0 and unicodedata.combining(text[s]):
            s -= 1
        while e < len(text) and unicodedata.combining(text[e]):
            e += 1
        out.append((s, e))
    return tuple(out)


def span_text(text: str, spans) -> str:
    """The answer written as text: the spans' texts, joined by a space."""
    return " ".join(text[s:e] for s, e in spans)


# A one-head task's threshold is fitted among these (on the other folds' rows, by the metric).
THRESHOLDS = tuple(np.round(np.arange(0.2, 0.81, 0.05), 2))


def fit_threshold(score) -> float:
    """The threshold of THRESHOLDS that `score(t)` rates best, the nearest 0.5 of ties."""
    return float(max(THRESHOLDS, key=lambda t: (score(t), -abs(t - 0.5))))


def written(text: str, found, as_text: bool):
    """Decoded spans as an answer is written: their text (`as_text`), or the spans (format_location
    writes them)."""
    return span_text(text, found) if as_text else tuple(found)


def answers(texts, scores, threshold: float = 0.5, as_text: bool = False) -> list:
    """Each text's answer decoded from its character scores (C >= len(text), heads), `threshold` for
    one head, written as the labels are (`as_text`: a text, else spans)."""
    return [written(text, decode(text, s[: len(text)], threshold), as_text) for text, s in zip(texts, scores)]


def objects(values) -> np.ndarray:
    """(N,) object array of any values (answers), each kept whole (np.array would make tuples a
    dimension)."""
    values = list(values)
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out
