"""The extraction job: one model over one corpus shard → a partial sums file.

The job reads and batches the shard (its token ids as ``split_corpus`` stored them), then claims the device and loads
the model (:mod:`ctxvar.extraction.job`), runs the model over the shard block by block or whole, once either way,
within the device budget (:mod:`ctxvar.extraction.order`), and writes each layer's sums while the next computes
(layer-major) or once the pass is done (whole-model) (:mod:`ctxvar.extraction.partials`).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

from ctxvar.extraction.attention import chosen_attention
from ctxvar.extraction.job import ShardRun, job_metadata, prepare_shard, release_device, released_on_error
from ctxvar.extraction.order import planned_sums
from ctxvar.extraction.partials import PartialFiles
from ctxvar.extraction.passes import started
from ctxvar.extraction.pca_points import type_points, write_points
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.models.batching import padding_fraction
from ctxvar.stats.declarations import sums_files

log = logging.getLogger(__name__)


def extract_shard(
    shard_path, out_path, settings: ExtractionSettings, files=None, pca_paths=None, weight_digest=None
) -> dict:
    """Run the model over the shard and write its sums (see :mod:`ctxvar.stats.sums`,
    :mod:`ctxvar.extraction.position_sample` and :mod:`ctxvar.stats.word_files`).

    ``out_path``: n and the declared sums per (layer, type); ``files``: by kind, the other files the geometry
    keeps (:func:`ctxvar.stats.declarations.sums_files`: ``moments``, N, Σx, Σxxᵀ with geometry.covariance and
    the declared sums per layer; ``sample``, the shard's bottom-k sampled points; ``words`` and ``sentences``,
    geometry.ethayarajh), exactly those kinds; None: beside ``out_path``, named as ``sums_files`` names them.
    ``pca_paths``: ``(types.csv or None, points file)``, Fig. 1's points of the types chosen before extraction
    (:mod:`ctxvar.extraction.pca_points`; none without types.csv). ``weight_digest``: the model's digest file
    (rule digest_weights, :mod:`ctxvar.models.weight_digest`), whose hash the job takes where its files are those
    it hashed; None: the job hashes the weights. Returns the metadata.
    """
    expected = sums_files(str(out_path).removesuffix(".parquet"), settings.geometry)
    files = expected if files is None else {kind: path for kind, path in files.items() if path is not None}
    if set(files) != set(expected):
        raise ValueError(
            f"extract_shard: the geometry keeps the files {sorted(expected)}, not {sorted(files)} "
            "(ctxvar.stats.declarations.sums_files)"
        )
    job = prepare_shard(shard_path, settings, weight_digest=weight_digest)
    with released_on_error(job), chosen_attention(job.device):
        return run_and_write(job, settings, out_path, files, pca_paths)


def run_and_write(job: ShardRun, settings: ExtractionSettings, out_path, files: dict, pca_paths=None):
    """:func:`extract_shard` once the shard is prepared: the layers' sums (:func:`ctxvar.extraction.order.
    planned_sums`), each layer written while the next computes (layer-major) or all once the pass is done
    (whole-model), and Fig. 1's points (``pca_paths``: its types.csv or None, and the points file); the device is
    released before the last is written. Returns the metadata."""
    lengths = job.encoded.lengths
    padded = job.padded()
    padding = padding_fraction(lengths, job.batches)
    points = type_points(job, padded, pca_paths[0]) if pca_paths and pca_paths[0] else None
    log.info(
        "%s on %s: %d sequences, %d tokens, %d types, %d batches of ≤ %d tokens (padding %.1f %%)",
        settings.model["id"],
        job.device,
        len(lengths),
        len(job.encoded.ids),
        len(job.types),
        len(padded),
        settings.batch_tokens,
        100 * padding,
    )
    computed, n_parts = planned_sums(job, settings, padded, job.sampled, points)
    parts = started(computed)
    metadata = job_metadata(settings, job, padding)  # after the first layers: it waits for the weights' hash
    with ExitStack() as opened:
        opened.callback(computed.close)  # an error here stops the layers' threads before the device is freed
        partials = PartialFiles(opened, out_path, files, job.d, metadata, settings.geometry, job.sampled)
        # entered last, so left first: its last write ends before the files close
        writer = opened.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="write"))
        written = None
        for index, layers in enumerate(parts):
            if written is not None:
                written.result()  # the layer before is on disk: at most two layers' sums here (a third being copied)
            if index == n_parts - 1:
                release_device(job)  # every sum is in host memory: the next job may use the GPU while this one writes
            written = writer.submit(partials.write, layers)  # written while the next layer computes
        written.result()
    if pca_paths:
        write_points(pca_paths[1], job.types, points, metadata)
    return metadata
