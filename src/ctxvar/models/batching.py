"""Token-budget batches of length-sorted sentences, and their padded arrays."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ctxvar.models.tokens import EncodedShard

# Padded tokens per forward pass: the one default of every job that runs a model (the rules read it, a profile's
# set-resources overrides it per rule). ≈ 1.3 GB of float64 batch buffer for bert-base (see docs/numerics.md).
BATCH_TOKENS = 16384


def token_budget_batches(lengths: np.ndarray, batch_tokens: int, max_rows: int | None = None) -> list[np.ndarray]:
    """Sentence indices per batch, longest first, each batch padded size ≤ ``batch_tokens`` and at most
    ``max_rows`` sentences (no row limit when None).

    Padded size = batch size × longest length in the batch. A sentence longer than
    the budget gets a batch of its own.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batches, start = [], 0
    while start < len(order):
        # Sorted descending, so the first sentence is the batch's longest.
        size = max(1, batch_tokens // int(lengths[order[start]]))
        size = min(size, max_rows) if max_rows else size
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


def pad_batch(
    encoded: EncodedShard, type_index: np.ndarray, rows: np.ndarray, pad_id: int, width_multiple: int = 1
) -> PaddedBatch:
    """Gather sentences ``rows`` into a right-padded (B, T) grid, vectorised, T the longest length rounded up to a
    multiple of ``width_multiple``; ``tokens`` indexes any per-token array of the shard (the word indices of
    :func:`ctxvar.extraction.word_sums.word_table`, for one)."""
    if width_multiple < 1:
        raise ValueError(f"pad_batch: width_multiple must be a positive integer, not {width_multiple}")
    starts, lengths = encoded.offsets[rows], encoded.lengths[rows]
    width = -(-int(lengths.max()) // width_multiple) * width_multiple
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


@dataclass
class ShardBatches:
    """Every batch of a shard, padded once up front (:func:`pad_batch`), as flat arrays.

    Batch b is ``grid[b]:grid[b+1]`` of ``input_ids`` and ``attention_mask`` (its
    ``shapes[b]`` = (rows, width) grid, flattened) and ``real[b]:real[b+1]`` of
    ``positions``, ``type_index`` and ``tokens``. :meth:`to` moves them to a device
    in one copy per array; after that a job only slices them, so no batch costs
    host work, a host-to-device copy or a host synchronisation. Device memory:
    16 bytes per padded and 16 per real token (int64), about 0.4 GB for a
    12 M-token shard; on a CPU the tensors share the arrays' memory.
    """

    shapes: list[tuple[int, int]]
    grid: np.ndarray  # (batches + 1,) offsets into the padded arrays
    real: np.ndarray  # (batches + 1,) offsets into the per-token arrays
    input_ids: np.ndarray  # (Σ rows·width,) int64
    attention_mask: np.ndarray  # (Σ rows·width,) int64
    positions: np.ndarray  # (Σ N,) int64, into the batch's flattened grid
    type_index: np.ndarray  # (Σ N,) int64
    tokens: np.ndarray  # (Σ N,) int64, shard token indices (host work only: never moved)
    word_index: np.ndarray | None = None  # (Σ N,) int64, raw-id word or −1 (geometry.ethayarajh), else None
    _moved: dict = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.shapes)

    def device_bytes(self) -> int:
        """Device memory of :meth:`to`'s tensors (:func:`padded_batch_bytes`)."""
        return padded_batch_bytes(int(self.grid[-1]), int(self.real[-1]), self.word_index is not None)

    def with_words(self, word_index: np.ndarray) -> "ShardBatches":
        """These batches with each token's word (``word_index``: per shard token, see
        :func:`ctxvar.extraction.word_sums.word_table`), gathered in batch order."""
        self.word_index = word_index[self.tokens]
        self._moved = {}
        return self

    def to(self, device) -> list["DeviceBatch"]:
        """The batches as views of one device tensor per array (non-blocking from pinned memory on a GPU),
        moved once per device and kept for later passes."""
        key = str(device)
        if key not in self._moved:
            self._moved = {key: self._move(device)}  # one device at a time: a new one frees the old copy
        return self._moved[key]

    def _move(self, device) -> list["DeviceBatch"]:
        names = ("input_ids", "attention_mask", "positions", "type_index")
        moved = {
            name: to_device(getattr(self, name), device)
            for name in names + (("word_index",) if self.word_index is not None else ())
        }
        batches = []
        for b, shape in enumerate(self.shapes):
            grid, real = slice(self.grid[b], self.grid[b + 1]), slice(self.real[b], self.real[b + 1])
            batches.append(
                DeviceBatch(
                    moved["input_ids"][grid].view(shape),
                    moved["attention_mask"][grid].view(shape),
                    moved["positions"][real],
                    moved["type_index"][real],
                    moved["word_index"][real] if "word_index" in moved else None,
                )
            )
        return batches


@dataclass
class DeviceBatch:
    """One padded batch on the device: (rows, width) inputs and its real tokens' flat positions and types."""

    input_ids: object  # torch.Tensor (rows, width)
    attention_mask: object
    positions: object  # (N,)
    type_index: object  # (N,)
    word_index: object = None  # (N,), with geometry.ethayarajh


def to_device(array: np.ndarray, device):
    """``array`` as a tensor on ``device``: from pinned memory without waiting on a GPU, shared on a CPU."""
    import torch

    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if torch.device(device).type == "cpu":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


def pad_batches(
    encoded: EncodedShard, type_index: np.ndarray, batches: list[np.ndarray], pad_id: int, width_multiple: int = 1
) -> ShardBatches:
    """Every batch of ``batches`` (sentence indices, as :func:`token_budget_batches` gives) padded
    (:func:`pad_batch`), flat."""
    padded = [pad_batch(encoded, type_index, rows, pad_id, width_multiple) for rows in batches]

    def flat(name: str) -> np.ndarray:
        parts = [getattr(batch, name).reshape(-1) for batch in padded]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    sizes = [batch.input_ids.size for batch in padded]
    counts = [len(batch.positions) for batch in padded]
    return ShardBatches(
        shapes=[batch.input_ids.shape for batch in padded],
        grid=np.r_[0, np.cumsum(sizes, dtype=np.int64)],
        real=np.r_[0, np.cumsum(counts, dtype=np.int64)],
        input_ids=flat("input_ids"),
        attention_mask=flat("attention_mask"),
        positions=flat("positions"),
        type_index=flat("type_index"),
        tokens=flat("tokens"),
    )


def padded_batch_bytes(padded_tokens: int, real_tokens: int, words: bool) -> int:
    """Device bytes of a shard's batches moved to the device: 8 · (2 · padded + 2 · real) (int64 ids and mask;
    positions and types of the real tokens), + 8 · real with each token's word (``words``)."""
    return 8 * (2 * padded_tokens + (3 if words else 2) * real_tokens)
