"""An extraction job's order: layer-major, one layer's sums at a time (:mod:`ctxvar.extraction.layer_major`), or the
whole model in one pass (:mod:`ctxvar.extraction.passes`), as config ``extraction_order`` and the model's layout
decide, within the device budget (:mod:`ctxvar.extraction.budget`); the memory plan it logs."""

from __future__ import annotations

import logging

from ctxvar.extraction.budget import (
    check_one_layer_fits,
    device_layers,
    state_bytes,
    state_cap_bytes,
    warn_of_host_layers,
)
from ctxvar.extraction.job import ShardRun
from ctxvar.extraction.layer_major import choose_blocks, layer_major_sums, memory_plan
from ctxvar.extraction.passes import whole_model_sums
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.streamed_weights import check_whole_fits
from ctxvar.models.batching import ShardBatches

log = logging.getLogger(__name__)


def planned_sums(job: ShardRun, settings: ExtractionSettings, padded: ShardBatches, sampled, points=None):
    """The job's sums as an iterator of lists of layers (:func:`ctxvar.extraction.passes.host_layers`), and its
    length: one list per layer, or one of every layer, from one forward pass over the shard. Layer-major, one
    layer at a time (:mod:`ctxvar.extraction.layer_major`), unless config ``extraction_order`` or the model's
    layout asks for the whole-model path (every layer's sums at once, those beyond the device budget in host
    memory, :mod:`ctxvar.extraction.budget`). ``points``: Fig. 1's
    :class:`ctxvar.extraction.type_points.TypePoints`, or None. Logs the memory plan."""
    options = settings.geometry
    blocks = chosen_blocks(job, settings, padded)
    if blocks is not None:
        if settings.max_state_bytes:
            check_one_layer_fits(len(job.types), job.d, settings.max_state_bytes, options, job.n_words)
        plan = memory_plan(settings, job, blocks, padded, points.device_bytes() if points else 0)
        log.info("layer-major over blocks %r; memory plan: %s", blocks.name, plan.describe())
        return layer_major_sums(job, padded, blocks, settings, plan, sampled, points), job.n_layers
    cap = state_cap_bytes(settings, job, padded, points.device_bytes() if points else 0)
    on_device = device_layers(job.n_layers, len(job.types), job.d, cap, options, job.n_words)
    warn_of_host_layers(settings, job, on_device, cap)
    log.info(
        "whole-model: one pass; sums of %s on %s (%.1f MB, budget %s)%s",
        f"layers 0–{on_device - 1}" if on_device else "no layer",
        job.device,
        state_bytes(on_device, len(job.types), job.d, options, job.n_words) / 1e6,
        "none" if cap == float("inf") else f"{cap / 1e6:.0f} MB",
        f", of layers {on_device}–{job.n_layers - 1} in host memory" if on_device < job.n_layers else "",
    )
    return whole_model_sums(job, padded, on_device, settings, sampled, points), 1


def chosen_blocks(job: ShardRun, settings: ExtractionSettings, padded: ShardBatches):
    """:func:`ctxvar.extraction.layer_major.choose_blocks` for the job's model. With streamed weights, its probe
    reads each block when it runs; where every weight fits the device budget at once, the blocks it read stay, so
    that a model that is not to run layer-major (a refused probe) is whole once the rest are read, each block read
    once; where they do not, such a model is held whole beyond the budget as one that cannot be streamed is
    (:func:`ctxvar.extraction.streamed_weights.check_whole_fits`), the blocks the probe read read again. Either way
    the model is not loaded a second time, and the log says so. A shard with no batch runs none and keeps the
    streamed model."""
    arguments = (padded.to(job.device), settings.extraction_order, settings.model["id"])
    if job.streamed is None:
        return choose_blocks(job.model, *arguments)
    streamed, keep = job.streamed, job.streamed.fits_whole()
    try:
        with streamed.on_demand(keep=keep):
            blocks = choose_blocks(job.model, *arguments)
        if blocks is not None or not len(padded):  # no batch (an empty shard): no forward pass needs the blocks
            streamed.free_all()
            return blocks
        if not keep:
            check_whole_fits(settings, job.device, streamed.weights_bytes(), "it does not run layer-major")
        streamed.install_all()
    finally:
        streamed.hand_back()
    log.warning(
        "model %r does not run layer-major, so its weights are not streamed: the whole model is held, %s",
        settings.model["id"],
        "each block read once (those the probe read kept)"
        if keep
        else "beyond the device budget, its blocks read again",
    )
    streamed.close()
    job.streamed = None
    return None
