"""The attention kernels a job's forward passes may use, chosen for speed and recorded with its sums.

A model's attention (transformers' ``sdpa`` implementation) calls ``torch.nn.functional.scaled_dot_product_attention``,
which picks one of several kernels per call. On a recent GPU (sm90) with cuDNN ≥ 9, PyTorch prefers cuDNN's
attention, which builds an execution graph for every new (batch, heads, length, mask) shape and caches it by shape:
tens of milliseconds per new shape (PyTorch's pull request 191576 measured 42 ms uncached against 0.25 ms cached),
while the GPU waits. A job's batches, sorted by length, bring a new shape nearly every time, so on a GPU its
forward passes leave cuDNN's kernel out and use FlashAttention (no padding mask), the memory-efficient kernel (a
padding mask) or the math kernel, none of which plans per shape. On a CPU the choice is torch's own (unchanged).
The kernels compute the same attention; their results differ by the forward pass's own rounding.
"""

from __future__ import annotations

import contextlib

import torch

from ctxvar.versions import TORCH_DEFAULT_ATTENTION

# on CUDA, in torch's order of preference; cuDNN's kernel left out (see the module's docstring)
CUDA_KERNELS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def attention_kernels(device) -> str:
    """The kernels a job on ``device`` allows, as its sums record them (``attention_kernels``)."""
    if torch.device(device).type != "cuda":
        return TORCH_DEFAULT_ATTENTION
    return ", ".join(name.lower() for name in CUDA_KERNELS)


def chosen_attention(device):
    """The job's kernels on ``device`` within the block: :data:`CUDA_KERNELS` on CUDA, torch's own choice
    elsewhere (:func:`only_attention_kernels`)."""
    return only_attention_kernels(CUDA_KERNELS if torch.device(device).type == "cuda" else None)


@contextlib.contextmanager
def only_attention_kernels(kernels: tuple[str, ...] | None):
    """Within the block, ``scaled_dot_product_attention`` uses only ``kernels`` (names of
    ``torch.nn.attention.SDPBackend``) on every device; None leaves torch's own choice as it is. The setting is
    the process's, restored when the block ends: one job at a time per process."""
    if kernels is None:
        yield
        return
    if not kernels:
        raise ValueError("only_attention_kernels: name at least one kernel, or None for torch's own choice")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([getattr(SDPBackend, name) for name in kernels]):
        yield
