"""Token-budget batches of length-sorted sentences, and their padded arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxvar.extraction.tokens import EncodedShard

# Padded tokens per forward pass: the one default of every job that runs a model (the rules read it, a profile's
# set-resources overrides it per rule). ≈ 1.3 GB of float64 batch buffer for bert-base (see docs/numerics.md).
BATCH_TOKENS = 16384


def token_budget_batches(lengths: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Sentence indices per batch, longest first, each batch padded size ≤ ``batch_tokens``.

    Padded size = batch size × longest length in the batch. A sentence longer than
    the budget gets a batch of its own.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batches, start = [], 0
    while start < len(order):
        # Sorted descending, so the first sentence is the batch's longest.
        size = max(1, batch_tokens // int(lengths[order[start]]))
        batches.append(order[start : start + size])
        start += size
    return batches


@dataclass
class PaddedBatch:
    """Right-padded inputs plus where the real tokens sit.

    ``positions`` indexes the flattened (batch × length) grid; ``type_index`` gives
    each real token's type and ``tokens`` its index in the shard, in the same order.
    """

    input_ids: np.ndarray  # (B, T) int64
    attention_mask: np.ndarray  # (B, T) int64
    positions: np.ndarray  # (N,) int64, N real tokens
    type_index: np.ndarray  # (N,) int64
    tokens: np.ndarray  # (N,) int64


def pad_batch(encoded: EncodedShard, type_index: np.ndarray, rows: np.ndarray, pad_id: int) -> PaddedBatch:
    """Gather sentences ``rows`` into a right-padded (B, T) grid, vectorised."""
    starts, lengths = encoded.offsets[rows], encoded.lengths[rows]
    width = int(lengths.max())
    column = np.arange(width)
    mask = column[None, :] < lengths[:, None]  # (B, T)
    source = (starts[:, None] + column[None, :])[mask]  # flat token positions in the shard
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    input_ids[mask] = encoded.ids[source]
    return PaddedBatch(
        input_ids=input_ids,
        attention_mask=mask.astype(np.int64),
        positions=np.flatnonzero(mask),
        type_index=type_index[source],
        tokens=source,
    )


def padding_fraction(lengths: np.ndarray, batches: list[np.ndarray]) -> float:
    """Share of the padded grid that is padding, over all batches."""
    grid = sum(len(b) * int(lengths[b].max()) for b in batches)
    return 1.0 - float(np.sum(lengths)) / grid if grid else 0.0
