"""Fig. 1's points, collected in the extraction's own pass: the hidden state at one layer of every occurrence in
the shard of a few selected types (:func:`ctxvar.figures.pca_selection.select_pca_types` chooses them before
extraction).

The points are the forward pass's values, kept as float32 (exact for fp32, bf16 and fp16) in one (K, d) buffer
on the device, K = the shard's occurrences of the selected types, known from the tokenization before the
batches run: 4 · K · d bytes. Which batch holds which occurrence is host work, done once for all batches
(:meth:`ctxvar.extraction.accumulator.PointSample.locate`); within the batch loop nothing waits for the host.
"""

from __future__ import annotations

import numpy as np
import torch

from ctxvar.extraction.accumulator import PointSample, full_width
from ctxvar.models.batching import ShardBatches


def type_point_bytes(n_points: int, d: int) -> int:
    """Device (and host) bytes of :class:`TypePoints` for ``n_points`` occurrences of width ``d``."""
    return 4 * n_points * d


class TypePoints:
    """The rows at hidden state ``layer`` of every token of the shard whose type is ``selected``.

    ``selected`` (U,) bool over the shard's types; ``batches`` the job's padded batches, which every loop
    visits in order, once per layer; the points are kept in that order (batch by batch, each batch's tokens
    in its own order). Call :meth:`add`
    for each (layer, batch) with that batch's hidden states; layers other than ``layer`` are ignored.
    """

    def __init__(
        self,
        layer: int,
        selected: np.ndarray,
        batches: ShardBatches,
        d: int,
        device: torch.device,
    ):
        self.layer = layer
        order = np.flatnonzero(selected[batches.type_index])  # places in the batches' order
        self.tokens = batches.tokens[order]  # shard token indices, slot order
        self.token_type = batches.type_index[order]
        self.batch = np.searchsorted(batches.real, order, side="right") - 1
        self._sample = PointSample(1, d, device, self.tokens)
        self._hits = self._sample.locate(batches.tokens, batches.real)
        self._seen = 0

    def device_bytes(self) -> int:
        return type_point_bytes(len(self.tokens), self._sample.points.shape[-1])

    def add(self, layer: int, states: torch.Tensor, positions: torch.Tensor) -> None:
        """``states``: (B·T, d) hidden states ``layer`` of the next batch, flattened; ``positions``: (N,) its
        real tokens' rows in them."""
        if layer != self.layer:
            return
        states = full_width(states, self._sample.points.shape[-1], states.shape[-1])  # a projected last layer
        hits = self._hits[self._seen]
        self._seen += 1
        if hits is not None:
            self._sample.add(0, states, positions, *hits)

    def to_numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(type index (K,), batch (K,), rows (K, d) float32)`` in the batches' order."""
        if self._seen != len(self._hits):
            raise RuntimeError(f"TypePoints: {self._seen} of {len(self._hits)} batches added at layer {self.layer}")
        return self.token_type, self.batch, self._sample.to_numpy()[0]
