"""How much device memory the sums of the forward pass may take: what is left after the model and one batch.

On a GPU the budget is measured, not assumed: the free memory once the model is
loaded, less one forward pass's activations (:func:`activation_bytes`), the
batch's own buffers (:func:`batch_bytes`), the shard's padded batches and a
reserve for the allocator's fragmentation and the CUDA libraries' workspaces.
:func:`state_cap_bytes` gives that cap (or ``max_state_mb``), :func:`device_layers`
fits as many layers' sums on the device as it holds, and :func:`warn_of_host_layers`
says when the others are kept in host memory. On a CPU there is no cap: the sums live
in host memory like everything else.

Memory on the device of the sums of :mod:`ctxvar.extraction.accumulator`, in bytes, for L layers (embedding
output included), U distinct types in the shard, width d and a batch of N real tokens:

    state:   8 · U · (L · w + 1)              n and the declared sums: w = Σ widths (d + 1; + d with cosine)
           + 8 · L · d²                       Σxxᵀ          (covariance)
           + 8 · L · w_L                      the declared per-layer sums kept (w_L: their widths)
           + 4 · L · B · k · d                sampled points (float32), B = geometry.batches
           + 8 · (W + 1) · (L · d + 1)        Σ x/‖x‖ per raw id (ethayarajh; W raw ids)
           + 8 · L · (d + 2)                  sentence sums   (ethayarajh)
    points:  4 · K · d                        Fig. 1's points: the K occurrences of the selected types in the
                                              shard, at one layer (figures.pca.model's jobs; held for the job)
    batch:   N · d · 4                        one layer's gather (forward dtype, ≤ fp32); C · d · 4 without
                                              covariance, which alone needs a layer's whole batch at once
           + C · d · 8                        a chunk of C of its rows as float64
           + C · d · 8                        their unit rows              (a declared sum reads them: cosine)
           + C · d · 8                        each declared per-layer d-vector sum's values
           + 4 · d · ⌈d/4⌉                    a block row of one layer's fp32 Gram matrix (covariance)
           + 12 · d · min(N, S)               a chunk of the split Gram product: its rows centred in fp32 and
                                              their bf16 parts (covariance of a bf16 or fp16 model on a GPU)
           + 16 · N · d + 24 · N              per-sentence Σx, Σu and indices (ethayarajh)
           + 8 · N · d                        unit rows (ethayarajh without cosine)

with C = :data:`~ctxvar.extraction.accumulator.CPU_CHUNK_ROWS` on a CPU and N on a GPU,
S = :data:`~ctxvar.extraction.accumulator.SPLIT_CHUNK_ROWS`, plus the model and its
activations for the padded batch. The batch term is bounded by the token budget. The state is bounded by a
cap: on the whole-model path, when all L layers do not fit, the leading layers that do (:func:`device_layers`)
keep their sums on the device and the others in host memory, in the same forward pass; the layer-major path holds
one layer's sums at a time (:mod:`ctxvar.extraction.layer_major`).
"""

from __future__ import annotations

import logging

import torch

from ctxvar.errors import DeviceMemoryError, StatisticsError
from ctxvar.extraction.accumulator import NO_GEOMETRY, SPLIT_CHUNK_ROWS, GeometryOptions, gram_block, splits_gram
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.word_sums import word_batch_bytes, word_sums_bytes
from ctxvar.models import loading
from ctxvar.stats.declarations import declared_sums_bytes, kept_layer_sums, kept_sums

log = logging.getLogger(__name__)

RESERVE_FRACTION = 0.05  # of the device's total memory, kept free
RESERVE_MIN_BYTES = 1 << 30


def state_bytes(
    n_layers: int, n_types: int, d: int, options: GeometryOptions = NO_GEOMETRY, n_words: int | None = None
) -> int:
    """Device bytes of the sums of ``n_layers`` layers (the state of the module docstring), the sample's
    ``options.sample_size`` = B · k float32 points per layer included. ``n_words``: raw token ids W
    (ethayarajh), at most the types times the markers merged; None: U, exact without marker merging."""
    per_layer = (d * d if options.covariance else 0) + options.sample_size * d / 2  # Σxxᵀ and the sample
    words = word_sums_bytes(n_layers, n_types if n_words is None else n_words, d) if options.ethayarajh else 0
    return int(declared_sums_bytes(n_layers, n_types, d, options) + 8 * n_layers * per_layer + words)


def batch_bytes(
    n_layers: int, n_tokens: int, d: int, options: GeometryOptions = NO_GEOMETRY, split: bool = False
) -> int:
    """Device memory for one batch's rows beyond the state, whatever the number of layers (one at a time); an
    upper bound on a CPU, where the float64 rows (and, without covariance, the gathered rows) are chunks of
    CPU_CHUNK_ROWS. ``split``: Σxxᵀ is the split product (:func:`ctxvar.extraction.accumulator.splits_gram`)."""
    unit_rows = any(item.unit_rows for item in kept_sums(options))
    layer_values = sum(item.vector for item in kept_layer_sums(options))  # a (C, d) float64 of values each
    return (
        n_tokens * d * (8 * ((2 if unit_rows else 1) + layer_values) + 4)
        + (4 * d * gram_block(d) if options.covariance else 0)
        + (12 * d * min(n_tokens, SPLIT_CHUNK_ROWS) if options.covariance and split else 0)
        + (word_batch_bytes(n_tokens, d, unit_rows) if options.ethayarajh else 0)
    )


def device_layers(
    n_layers: int,
    n_types: int,
    d: int,
    max_state_bytes: float,
    options: GeometryOptions = NO_GEOMETRY,
    n_words: int | None = None,
) -> int:
    """How many of the ``n_layers`` hidden states, from the first, have their sums on the device: as many as
    ``state_bytes`` ≤ the cap allows (all of them without a cap); the whole-model path keeps the others' in host
    memory, in the same forward pass."""
    fits = n_layers
    while fits > 0 and state_bytes(fits, n_types, d, options, n_words) > max_state_bytes:
        fits -= 1
    return fits


def check_one_layer_fits(
    n_types: int, d: int, max_state_bytes: float, options: GeometryOptions = NO_GEOMETRY, n_words: int | None = None
) -> None:
    """A :class:`StatisticsError` that says what to change when one layer's sums exceed the cap (``max_state_mb``):
    a layer-major job holds one layer's sums on the device."""
    one_layer = state_bytes(1, n_types, d, options, n_words)
    if one_layer > max_state_bytes:
        raise StatisticsError(
            f"one layer of sums for {n_types} types at d={d} needs {one_layer / 1e6:.0f} MB, "
            f"more than the cap of {max_state_bytes / 1e6:.0f} MB: raise max_state_mb in the profile, use more shards "
            "or turn off geometry.cosine and geometry.ethayarajh"
        )


def activation_bytes(config, n_hidden: int, d: int, batch_tokens: int, width: int, element_bytes: int) -> int:
    """Upper estimate of one forward pass's activations, in bytes, for a padded batch of ``batch_tokens``
    tokens in rows of ``width``, with all hidden states kept (``output_hidden_states``):

        element_bytes · N · (n_hidden · d          the hidden states returned
                             + 6 · d               one layer's q, k, v, attention output, residual, norm
                             + 4 · ffn             its MLP: up to four intermediates at once (GPT-2's
                                                   tanh GELU is a chain of elementwise ops; a gated
                                                   MLP holds gate, up, activation and product)
                             + 2 · heads · width)  eager attention's scores and probabilities

    ``ffn`` and ``heads`` are read from the model's config (``intermediate_size``,
    ``n_inner``, ``ffn_dim``; ``num_attention_heads``, ``n_head``), else 4·d and d/64.
    It holds for the forward pass as :func:`ctxvar.extraction.passes.run_batches` runs
    it: no KV cache, the previous batch's outputs freed (tested against the measured
    peak of encoder and decoder proxies).
    """
    ffn = _first(config, ("intermediate_size", "n_inner", "ffn_dim"), 4 * d)
    heads = _first(config, ("num_attention_heads", "n_head"), max(1, d // 64))
    return element_bytes * batch_tokens * (n_hidden * d + 6 * d + 4 * ffn + 2 * heads * width)


def _first(config, names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return default


def state_budget_bytes(free: int, total: int, *others: int) -> int:
    """Device bytes left for the sums: ``free`` memory less everything else one pass needs (``others``: the
    activations, the batch's buffers, the padded batches) and :func:`reserve_bytes` of ``total``."""
    return free - sum(others) - reserve_bytes(total)


def reserve_bytes(total: int) -> int:
    """Device memory kept free: max(5 % of ``total``, 1 GiB)."""
    return max(int(RESERVE_FRACTION * total), RESERVE_MIN_BYTES)


def state_cap_bytes(settings: ExtractionSettings, job, padded, point_bytes: int = 0) -> float:
    """The device memory the sums may take: ``max_state_mb`` if set; on a GPU, what is left once
    the model is loaded, less one batch and ``point_bytes`` (Fig. 1's points, :mod:`ctxvar.extraction.type_points`,
    held for the whole job) (see :mod:`ctxvar.extraction.budget`); no cap on a CPU.

    A GPU with no memory left for sums (the model, one batch and the reserve take it all) is a
    :class:`DeviceMemoryError` that names the budget's parts: raising ``max_state_mb`` there would skip the check
    and run out of memory. A budget below one layer's sums is not an error: the whole-model path keeps every
    layer's sums in host memory (:func:`device_layers`).

    ``job``: a :class:`ctxvar.extraction.job.ShardRun` (its ``device``, ``encoded.lengths``, ``model.config``,
    ``n_layers``, ``d``, ``types`` and ``n_words`` are read); ``padded``: its
    :class:`ctxvar.models.batching.ShardBatches` (``device_bytes()``).
    """
    if settings.max_state_bytes:
        return settings.max_state_bytes
    if job.device.type != "cuda":
        return float("inf")
    free, total = torch.cuda.mem_get_info(job.device)
    width = int(job.encoded.lengths.max()) if len(job.encoded.lengths) else 1
    tokens = max(settings.batch_tokens, width)
    element_bytes = loading.DTYPES[settings.dtype].itemsize
    activations = activation_bytes(job.model.config, job.n_layers, job.d, tokens, width, element_bytes)
    split = splits_gram(loading.DTYPES[settings.dtype], job.device)
    buffers = batch_bytes(job.n_layers, tokens, job.d, settings.geometry, split) + padded.device_bytes() + point_bytes
    budget = state_budget_bytes(free, total, activations, buffers)
    if budget <= 0:
        one_layer = state_bytes(1, len(job.types), job.d, settings.geometry, job.n_words)
        raise DeviceMemoryError(
            f"model {settings.model['id']!r} on {job.device}: {free / 1e9:.1f} GB free once it is loaded, less one "
            f"batch of {tokens} tokens ({activations / 1e9:.1f} GB of activations, {buffers / 1e9:.1f} GB of "
            f"buffers) and a reserve of {reserve_bytes(total) / 1e9:.1f} GB, leaves nothing for the sums (one "
            f"layer: {one_layer / 1e9:.2f} GB for {len(job.types)} types at d={job.d}): use "
            f"{smaller_dtype(settings)}a lower batch_tokens, more shards (fewer types per shard) or a GPU with more "
            "memory"
        )
    return budget


def warn_of_host_layers(settings: ExtractionSettings, job, on_device: int, cap: float) -> None:
    """A warning (the console's, through :func:`ctxvar.run.job_log.job_log`) when the cap leaves the sums of some
    hidden states to host memory on the whole-model path (their hidden states copied to the host batch by batch):
    what it costs and the remedy. ``job``: a :class:`ctxvar.extraction.job.ShardRun` (its ``device``,
    ``n_layers``, ``types``, ``d`` and ``n_words``)."""
    if on_device < job.n_layers:
        limit = "max_state_mb" if settings.max_state_mb else "the device's free memory less one batch"
        remedy = (
            "raise max_state_mb if the device has room, or use more shards (fewer types per shard)"
            if settings.max_state_mb
            else f"use {smaller_dtype(settings)}more shards (fewer types per shard) or a GPU with more memory"
        )
        log.warning(
            "model %r on %s: the sums of %d layers for %d types (%.1f GB) exceed %s (%.1f GB), so those of layers "
            "%d–%d are kept in host memory, their hidden states copied there batch by batch (still one forward "
            "pass); to keep every layer on the device, %s",
            settings.model["id"],
            job.device,
            job.n_layers,
            len(job.types),
            state_bytes(job.n_layers, len(job.types), job.d, settings.geometry, job.n_words) / 1e9,
            limit,
            cap / 1e9,
            on_device,
            job.n_layers - 1,
            remedy,
        )


def smaller_dtype(settings: ExtractionSettings) -> str:
    """The remedy of a float32 job short of device memory, with its separator: half the weights and activations."""
    return "dtype: bfloat16, " if settings.dtype == "float32" else ""
