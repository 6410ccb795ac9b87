"""What the attention head looks at: pooling weights per word, and the words it favours overall."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .competition import with_separator


@torch.no_grad()
def token_weights(model, tokenizer, texts, max_len: int = 256, batch_size: int = 16) -> list:
    """Per text, a DataFrame (word, weight, start, end): the attention pooling weight of each word
    (its sub-tokens summed), in text order. Special tokens ([CLS], </s>...) are left out; their
    share is in the frame's `attrs["special_weight"]`. Also `attrs["pred"]`: the model's output."""
    device = next(model.parameters()).device
    texts = [str(t) for t in with_separator(texts, tokenizer)]
    frames = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        enc = tokenizer(chunk, truncation=True, max_length=max_len, padding=True,
                        return_offsets_mapping=True, return_tensors="pt")
        preds, weights = model(enc["input_ids"].to(device), enc["attention_mask"].to(device),
                               return_weights=True)
        weights = weights.float().cpu().numpy()
        for row, text in enumerate(chunk):
            word_ids = enc.word_ids(row)
            offsets = enc["offset_mapping"][row].tolist()
            words: dict = {}
            special = 0.0
            for pos, wid in enumerate(word_ids):
                if wid is None:
                    special += weights[row, pos]
                    continue
                s, e = offsets[pos]
                w = words.setdefault(wid, [s, e, 0.0])
                w[0], w[1] = min(w[0], s), max(w[1], e)
                w[2] += weights[row, pos]
            df = pd.DataFrame(
                [(text[s:e], weight, s, e) for s, e, weight in words.values()],
                columns=["word", "weight", "start", "end"],
            )
            df.attrs["special_weight"] = float(special)
            df.attrs["pred"] = preds[row].float().cpu().numpy().tolist()
            frames.append(df)
    return frames


def top_words(frames, min_count: int = 3, top: int = 20) -> pd.DataFrame:
    """Words with the highest mean relative weight across texts (1.0 = an equal share of the text's
    weight), among words seen at least `min_count` times; punctuation left out."""
    rows = []
    for df in frames:
        if len(df) == 0:
            continue
        rel = df["weight"].to_numpy() * len(df) / max(df["weight"].sum(), 1e-12)
        rows += [(w.lower(), r) for w, r in zip(df["word"], rel) if any(c.isalnum() for c in w)]
    table = pd.DataFrame(rows, columns=["word", "relative_weight"])
    stats = table.groupby("word")["relative_weight"].agg(["mean", "count"]).reset_index()
    stats = stats[stats["count"] >= min_count].sort_values("mean", ascending=False)
    return stats.head(top).rename(columns={"mean": "relative_weight"}).reset_index(drop=True)


def weight_vs_length(frames) -> pd.DataFrame:
    """Per word occurrence: its length in characters and relative weight (tests the claim that
    the head focuses on complex vocabulary)."""
    rows = []
    for df in frames:
        if len(df):
            rel = df["weight"].to_numpy() * len(df) / max(df["weight"].sum(), 1e-12)
            rows += [(len(w), r) for w, r in zip(df["word"], rel) if w.isalpha()]
    out = pd.DataFrame(rows, columns=["word_length", "relative_weight"])
    out.attrs["spearman"] = float(out.corr(method="spearman").iloc[0, 1]) if len(out) > 2 else np.nan
    return out
