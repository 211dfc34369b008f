"""Sums leave the device: checked finite, and copied to a host array, from a GPU through one pinned staging buffer."""

from __future__ import annotations

import functools
import threading

import numpy as np
import torch

STAGING_BYTES = 64 << 20  # pinned host buffer through which sums leave a GPU


def finite(tensor: torch.Tensor) -> bool:
    """Whether every element of ``tensor`` is finite: its sum is finite (a NaN or an infinity in it makes the sum
    NaN or infinite: one read, no mask), or, where the sum overflows, every element checked."""
    return bool(torch.isfinite(tensor.sum())) or bool(torch.isfinite(tensor).all())


def to_host(tensor: torch.Tensor) -> np.ndarray:
    """``tensor`` as a host array. From a GPU, in pieces through one pinned buffer of STAGING_BYTES, allocated
    once per process: a pageable copy of the float64 sums ran at a third of the pinned speed (0.42 s per
    1.4 GB on an H100)."""
    if tensor.device.type != "cuda":
        return tensor.cpu().numpy()
    with _STAGING:  # one buffer: a copy at a time, whichever thread hands sums over
        staging = _pinned_staging().view(tensor.dtype)
        return staged_copy(tensor, staging, torch.cuda.current_stream(tensor.device).synchronize)


_STAGING = threading.Lock()


@functools.cache
def _pinned_staging() -> torch.Tensor:
    with torch.inference_mode(False):  # a normal tensor, which any thread may copy into
        return torch.empty(STAGING_BYTES, dtype=torch.uint8, pin_memory=True)


def staged_copy(tensor: torch.Tensor, staging: torch.Tensor, wait=None) -> np.ndarray:
    """``tensor`` copied to a new host array through ``staging`` (1-D, same dtype), a piece at a time;
    ``wait()`` runs after each piece's non-blocking copy into ``staging``, before it is read."""
    flat = tensor.reshape(-1)
    out = torch.empty(flat.shape, dtype=flat.dtype)
    for start in range(0, flat.numel(), staging.numel()):
        piece = staging[: min(staging.numel(), flat.numel() - start)]
        piece.copy_(flat[start : start + piece.numel()], non_blocking=True)
        if wait is not None:
            wait()
        out[start : start + piece.numel()].copy_(piece)
    return out.reshape(tensor.shape).numpy()
