"""A uniform sample of token positions that merges exactly across shards: the bottom k of a hash.

Every token position gets a 64-bit key, SplitMix64 of (seed, sentence id, window,
position), which depends on nothing but the position itself. A shard keeps the
k positions with the smallest keys (:func:`ctxvar.stats.sample_file.bottom_k`); the k smallest over the union
of the shards' samples are then the k smallest of the whole corpus, whatever the
sharding. The same positions are kept in every layer.

With geometry.batches B, k is B times geometry.sample_size: batch b is the positions
ranked b·k′ … (b + 1)·k′ − 1 by key (k′ = geometry.sample_size), so batch 0 is the
one-batch sample and every batch is as exact and shard-invariant as the whole.

The sample's file and its merge: :mod:`ctxvar.stats.sample_file`.
"""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser (Steele et al. 2014), elementwise on uint64 (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64) + GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def sequence_windows(source_row: np.ndarray) -> np.ndarray:
    """For sequences listed with their source sentence row (pieces of one sentence adjacent, in order),
    the ordinal of each piece within its sentence: 0 for unsplit sentences."""
    source_row = np.asarray(source_row)
    starts = np.r_[True, source_row[1:] != source_row[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(len(source_row)), 0))
    return np.arange(len(source_row)) - first


def token_keys(sentence_id: np.ndarray, window: np.ndarray, offsets: np.ndarray, seed: int) -> np.ndarray:
    """(tokens,) uint64 keys for sequences delimited by ``offsets`` with per-sequence ``sentence_id`` and ``window``."""
    lengths = np.diff(offsets)
    position = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    sentence = splitmix64(
        splitmix64(np.uint64(seed) ^ np.asarray(sentence_id, dtype=np.uint64)) ^ np.asarray(window, dtype=np.uint64)
    )
    return splitmix64(np.repeat(sentence, lengths) ^ position.astype(np.uint64))
