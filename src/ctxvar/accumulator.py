"""Accumulate per-(layer, type) sums of hidden states on the device, in float64.

Memory on the device, in bytes, for L layers (embedding output included), U
distinct types in the shard, width d and a batch of N real tokens:

    state:   8 · U · (L · (d + 1) + 1)            (Σx, Σ‖x‖², n)
    batch:   N · L · d · 8 + N · d · 4            (float64 rows of all layers, one layer's fp32 gather)

plus the model and its activations for the padded batch. The batch term is
bounded by the token budget. The state is bounded by a cap: when all L layers do
not fit, :func:`layer_groups` splits them into groups that do, and the job runs
its forward pass once per group (the same batches each time, so the sums are
bitwise those of a single pass).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from .errors import StatisticsError


def state_bytes(n_layers: int, n_types: int, d: int) -> int:
    return 8 * n_types * (n_layers * (d + 1) + 1)


def batch_bytes(n_layers: int, n_tokens: int, d: int) -> int:
    return n_tokens * d * (8 * n_layers + 4)


def layer_groups(n_layers: int, n_types: int, d: int, max_state_bytes: float) -> list[range]:
    """Consecutive groups of layers, as few as possible, each with ``state_bytes`` ≤ the cap."""
    per_group = n_layers
    while per_group > 1 and state_bytes(per_group, n_types, d) > max_state_bytes:
        per_group -= 1
    if state_bytes(per_group, n_types, d) > max_state_bytes:
        raise StatisticsError(
            f"one layer of sums for {n_types} types at d={d} needs {state_bytes(1, n_types, d) / 1e6:.0f} MB, more than "
            f"the cap of {max_state_bytes / 1e6:.0f} MB: raise max_state_mb in the profile or use more shards"
        )
    return [range(start, min(start + per_group, n_layers)) for start in range(0, n_layers, per_group)]


class TypeSums:
    """n_t, Σx and Σ‖x‖² per (layer, type t), float64, on ``device``, for the hidden states ``layers``.

    The layer-major flat index ``i · U + t`` (i-th of ``layers``) lets one
    ``index_add_`` cover all the layers of a batch. Nothing here synchronises
    with the host. ``n_hidden`` is the model's number of hidden states.
    """

    def __init__(self, layers: Sequence[int], n_hidden: int, n_types: int, d: int, device: torch.device):
        self.layers, self.n_hidden = list(layers), n_hidden
        n_layers = len(self.layers)
        self.n_layers, self.n_types, self.d = n_layers, n_types, d
        self.count = torch.zeros(n_types, dtype=torch.int64, device=device)  # (U,)
        self.sum = torch.zeros(n_layers * n_types, d, dtype=torch.float64, device=device)  # (L·U, d)
        self.sum_sq = torch.zeros(n_layers * n_types, dtype=torch.float64, device=device)  # (L·U,)
        self._layer_offset = torch.arange(n_layers, device=device)[:, None] * n_types  # (L, 1)
        self._buffer: torch.Tensor | None = None  # float64 rows of a batch, grown to the largest batch

    def accumulate(self, hidden_states: Sequence[torch.Tensor], positions: torch.Tensor, type_index: torch.Tensor) -> None:
        """Add the rows ``positions`` of the flattened (B·T, d) hidden states of each of ``layers``.

        ``hidden_states``: n_hidden tensors (B, T, d); ``positions``, ``type_index``: (N,) int64.
        """
        assert len(hidden_states) == self.n_hidden, (len(hidden_states), self.n_hidden)
        assert hidden_states[0].shape[-1] == self.d, (hidden_states[0].shape, self.d)
        n = positions.shape[0]
        rows = self._rows(len(self.layers) * n)  # (L·N, d) float64
        for i, layer in enumerate(self.layers):  # into a reused buffer: allocating L·N·d fresh floats costs more than the copy
            rows[i * n : (i + 1) * n].copy_(hidden_states[layer].reshape(-1, self.d)[positions])
        flat = (self._layer_offset + type_index[None, :]).reshape(-1)  # (L·N,)
        self.sum.index_add_(0, flat, rows)
        self.sum_sq.index_add_(0, flat, torch.einsum("nd,nd->n", rows, rows))
        self.count.index_add_(0, type_index, torch.ones_like(type_index))

    def _rows(self, size: int) -> torch.Tensor:
        if self._buffer is None or self._buffer.shape[0] < size:
            self._buffer = torch.empty(size, self.d, dtype=torch.float64, device=self.sum.device)
        return self._buffer[:size]

    def all_finite(self) -> bool:
        """One host sync: whether every sum is finite (fp16 overflow gives inf/nan)."""
        return bool(torch.isfinite(self.sum_sq).all() and torch.isfinite(self.sum).all())

    def to_numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(count (U,), sum (L, U, d), sum_sq (L, U))`` on the host."""
        L, U = self.n_layers, self.n_types
        return (
            self.count.cpu().numpy(),
            self.sum.reshape(L, U, self.d).cpu().numpy(),
            self.sum_sq.reshape(L, U).cpu().numpy(),
        )
