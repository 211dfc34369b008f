"""Deal items (chunks of sentences) to shards of near-equal forward-pass cost."""

from __future__ import annotations

import numpy as np


def sentence_cost(n_chars: np.ndarray) -> np.ndarray:
    """Forward cost proxy, tokenizer-free so that shards serve every model.

    Subword counts grow with characters; 2 stands for the added [bos]/[eos].
    """
    return np.asarray(n_chars, dtype=np.int64) + 2


def assign_shards(cost: np.ndarray, n_shards: int) -> np.ndarray:
    """Shard index per item: costs sorted descending, dealt in snake order 0…S−1, S−1…0.

    Deterministic (stable sort), vectorised, and every shard's total is within
    one item's cost of every other's.
    """
    order = np.argsort(-np.asarray(cost), kind="stable")
    lap = np.arange(len(order)) % (2 * n_shards)
    snake = np.where(lap < n_shards, lap, 2 * n_shards - 1 - lap)
    shard = np.empty(len(order), dtype=np.int64)
    shard[order] = snake
    return shard
