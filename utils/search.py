"""Searching a catalogue: the one place that compares query embeddings with item embeddings.

Exact search: embeddings are L2-normalised, so cosine similarity is a matrix product, done in
chunks of queries (a (chunk, items) block at a time in memory). `bench/ranking.py --scaling`
measures it from 1k to 100k items.

Light: numpy only.
"""

from __future__ import annotations

import numpy as np

CHUNK = 1024  # queries per block: a 1024 x 100k block of float32 is 400 MB


def similarities(queries: np.ndarray, items: np.ndarray) -> np.ndarray:
    """(N, M) cosine similarities of normalised query embeddings (N, H) with item ones (M, H)."""
    q, d = np.asarray(queries, np.float32), np.asarray(items, np.float32)
    return np.concatenate([q[i:i + CHUNK] @ d.T for i in range(0, len(q), CHUNK)]) if len(q) else \
        np.zeros((0, len(d)), np.float32)


def search(queries: np.ndarray, items: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores (N, k), indices (N, k)) of each query's k most similar items, best first: exact,
    a block of CHUNK queries at a time (memory stays CHUNK x M whatever N)."""
    q, d = np.asarray(queries, np.float32), np.asarray(items, np.float32)
    k = min(k, len(d))
    scores, index = np.zeros((len(q), k), np.float32), np.zeros((len(q), k), np.int64)
    for i in range(0, len(q), CHUNK):
        block = q[i:i + CHUNK] @ d.T
        if k < len(d):
            top = np.argpartition(-block, k - 1, axis=1)[:, :k]
        else:
            top = np.tile(np.arange(len(d)), (len(block), 1))
        s = np.take_along_axis(block, top, 1)
        order = np.argsort(-s, axis=1, kind="stable")
        scores[i:i + CHUNK], index[i:i + CHUNK] = np.take_along_axis(s, order, 1), np.take_along_axis(top, order, 1)
    return scores, index
