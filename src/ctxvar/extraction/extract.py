"""The extraction job: one model over one corpus shard → a partial sums file.

The job reads and batches the shard (its token ids as ``split_corpus`` stored them), then claims the device and loads
the model (:class:`ShardRun`, :func:`prepare_shard`),
runs the model over the shard block by block (:mod:`ctxvar.extraction.layer_major`), or whole
(:mod:`ctxvar.extraction.passes`), once either way, within the device budget (:mod:`ctxvar.extraction.budget`),
and writes each layer's sums while the next computes (layer-major) or once the pass is done (whole-model).
"""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np
import torch

from ctxvar.config.entries import built_in_run, revision_of
from ctxvar.extraction import devices
from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.attention import attention_kernels, chosen_attention
from ctxvar.extraction.budget import (
    check_one_layer_fits,
    device_layers,
    state_bytes,
    state_cap_bytes,
    warn_of_host_layers,
)
from ctxvar.extraction.layer_major import choose_blocks, layer_major_sums, memory_plan
from ctxvar.extraction.passes import attention_kind, run_batches, started, whole_model_sums
from ctxvar.extraction.pca_points import type_points, write_points
from ctxvar.extraction.position_sample import sequence_windows, token_keys
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.shard import chunk_batches, fit_to_positions, read_shard
from ctxvar.extraction.streamed_weights import StreamedWeights, load_for_job
from ctxvar.extraction.word_sums import word_table
from ctxvar.files.atomic import verify_manifest
from ctxvar.models import hashing, loading
from ctxvar.models.batching import (
    ShardBatches,
    pad_batches,
    padding_fraction,
)
from ctxvar.models.tokens import EncodedShard, type_marker, type_table
from ctxvar.models.weight_digest import recorded_sha256
from ctxvar.stats.declarations import kept_layer_sums, kept_sums, sums_files
from ctxvar.stats.sample_file import bottom_k, sample_schema, sample_table
from ctxvar.stats.sums import LayerWriter, moments_schema, moments_table, sums_schema
from ctxvar.stats.word_files import sentences_schema, words_schema
from ctxvar.versions import device_name, package_versions

log = logging.getLogger(__name__)


@dataclass
class ShardRun:
    """A loaded model and one shard, tokenized and batched, ready for :func:`ctxvar.extraction.passes.run_batches`
    (before the claim, :func:`planned_shard`'s: the shard alone, no device and no model)."""

    device: torch.device | None  # None until the device is claimed (prepare_shard)
    tokenizer: object
    model: object
    n_texts: int
    encoded: EncodedShard
    long_counts: dict
    types: np.ndarray  # (U,) type keys of the shard, sorted
    type_index: np.ndarray  # (tokens,) index into types
    chunk: np.ndarray  # (sequences,) chunk of each sequence
    sentence_id: np.ndarray  # (sequences,) corpus sentence of each sequence
    window: np.ndarray  # (sequences,) piece of a split sentence, else 0
    batches: list[np.ndarray]
    n_layers: int
    d: int
    weights_hash: Future | None  # of the SHA-256 of the weight files loaded (see hashing.weights_sha256)
    marker: str | None  # the word-boundary marker type keys strip (tokens.type_marker), None: none
    word_ids: np.ndarray | None = None  # (W,) the shard's inner raw token ids, sorted (geometry.ethayarajh)
    word_index: np.ndarray | None = None  # (tokens,) index into word_ids, −1 for boundary tokens
    streamed: StreamedWeights | None = None  # the blocks' weights, read per layer (None: the model is whole)
    attention: str | None = None  # causal, bidirectional or none (passes.attention_kind); None: not known
    last_width: int | None = None  # the last hidden state's width, where the model's tail projects it (OPT)
    padded_batches: ShardBatches | None = None  # the job's batches padded (ShardRun.padded)
    sampled: dict | None = None  # the sampled positions (sample_positions), None without a sample
    tokenizer_sha256: str | None = None  # of the tokenizer (hashing.tokenizer_sha256)
    versions: dict | None = None  # package_versions(), read before the claim (importlib.metadata takes a second)

    def padded(self, batches: list[np.ndarray] | None = None) -> ShardBatches:
        """``batches`` padded up front, for :func:`run_batches`; default: the job's own, with the tokens' words
        when the job has them (padded once, before the device is claimed: :func:`planned_shard`)."""
        if batches is None and self.padded_batches is not None:
            return self.padded_batches
        rows = self.batches if batches is None else batches
        padded = pad_batches(self.encoded, self.type_index, rows, loading.pad_id(self.tokenizer))
        return padded.with_words(self.word_index) if self.word_index is not None and rows is self.batches else padded

    @property
    def n_words(self) -> int | None:
        return None if self.word_ids is None else len(self.word_ids)

    def run(self, accumulator, settings: ExtractionSettings, batches: ShardBatches, points=None) -> None:
        run_batches(self.model, accumulator, batches, self.device, settings.progress, points)


def prepare_shard(shard_path, settings: ExtractionSettings, hash_weights: bool = True, weight_digest=None) -> ShardRun:
    """Read and batch the shard, then claim a device and load the model.

    What the host does alone comes before the claim (:func:`planned_shard`): a job waiting for the GPU prepares
    its shard while another job's batches run. With ``hash_weights``, ``ShardRun.weights_hash`` is the weights'
    SHA-256 (a future): the digest's at ``weight_digest`` (rule digest_weights) where the model was loaded from
    the files it hashed, else hashed in a thread beside the batches (hashlib releases the GIL); None without
    ``hash_weights``. An error after the claim gives it up."""
    if settings.threads:
        torch.set_num_threads(settings.threads)
    device = loading.resolve_device(settings.device)
    if os.path.isdir(settings.source):
        verify_manifest(settings.source, built_in_run(settings.model))  # locally built models carry one
    tokenizer = loading.load_tokenizer(settings.model, settings.source)
    shard = planned_shard(shard_path, tokenizer, settings)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", devices.claim_gpu())
        log.info("claimed %s", device)
    try:
        return loaded_shard(shard, settings, device, hash_weights, weight_digest)
    except BaseException:
        devices.release_gpu()
        raise


def planned_shard(shard_path, tokenizer, settings: ExtractionSettings) -> ShardRun:
    """The host's part of :func:`prepare_shard`: the shard's token ids (:func:`ctxvar.extraction.shard.read_shard`),
    fitted to the model's positions (from its config), its types, words and batches, padded, its sampled
    positions, and the tokenizer's hash and the package versions the metadata records. A :class:`ShardRun` with no
    device and no model yet."""
    tokenizer_digest = hashing.tokenizer_sha256(tokenizer)
    encoded, chunk, sentence_id = read_shard(shard_path, tokenizer, tokenizer_digest)
    n_texts = len(chunk)
    config = loading.checked_config(settings.model, settings.source)  # an encoder-decoder is refused in one line
    encoded, source_row, long_counts = fit_to_positions(encoded, loading.max_positions(config), settings)
    chunk, sentence_id = chunk[source_row], sentence_id[source_row]
    marker = type_marker(tokenizer, settings.merge_markers)
    types, type_index = type_table(tokenizer, encoded.ids, marker)
    words = word_table(encoded.ids, encoded.offsets) if settings.geometry.ethayarajh else (None, None)
    batches = chunk_batches(encoded.lengths, chunk, settings.batch_tokens)
    shard = ShardRun(
        None,
        tokenizer,
        None,
        n_texts,
        encoded,
        long_counts,
        types,
        type_index,
        chunk,
        sentence_id,
        sequence_windows(source_row),
        batches,
        config.num_hidden_layers + 1,
        config.hidden_size,
        None,
        marker,
        *words,
    )
    shard.padded_batches = shard.padded(batches)
    shard.sampled = sample_positions(shard, settings)
    shard.tokenizer_sha256, shard.versions = tokenizer_digest, package_versions()
    return shard


def loaded_shard(
    shard: ShardRun, settings: ExtractionSettings, device: torch.device, hash_weights: bool, weight_digest=None
) -> ShardRun:
    """:func:`prepare_shard` on ``device``, once claimed: the model loaded into ``shard`` (see there)."""
    model, streamed = load_for_job(settings, device)
    loading.check_tokenizer_fits(shard.tokenizer, model, settings.model, settings.source)
    if hash_weights:  # from the files just loaded (or, streamed, whose state every read checks), not the tensors
        weight_files = streamed.files if streamed else hashing.weight_files(settings.model, settings.source, model)
        recorded = recorded_sha256(weight_digest, weight_files) if weight_digest else None
        if recorded is None:
            background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hash")
            weights_hash = background.submit(hashing.weights_sha256, weight_files, hashing.hash_threads(device))
            background.shutdown(wait=False)
        else:
            weights_hash = Future()
            weights_hash.set_result(recorded)
    else:
        weights_hash = None
    shard.device, shard.model, shard.streamed, shard.weights_hash = device, model, streamed, weights_hash
    shard.n_layers, shard.d = model.config.num_hidden_layers + 1, model.config.hidden_size
    shard.attention = attention_kind(model, device, whole=streamed is None)
    shard.last_width = loading.last_hidden_width(model)
    return shard


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
    """:func:`extract_shard` once the shard is prepared: the layers' sums (:func:`planned_sums`), each layer
    written while the next computes (layer-major) or all once the pass is done (whole-model), and Fig. 1's points
    (``pca_paths``: its types.csv or None, and the points file); the device is released before the last is
    written. Returns the metadata."""
    options = settings.geometry
    lengths, d = job.encoded.lengths, job.d
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
    sampled = job.sampled  # read before the claim (planned_shard)
    computed, n_parts = planned_sums(job, settings, padded, sampled, points)
    parts = started(computed)
    metadata = {  # after the first layers: model_metadata waits for the weights' hash, which runs beside it
        **model_metadata(settings, job),
        "shard": settings.shard,
        "n_sentences": job.n_texts - job.long_counts["n_skipped_too_long"],
        **job.long_counts,
        "max_positions": loading.max_positions(job.model.config),  # what long_counts were measured against
        "n_sequences": len(lengths),
        "n_tokens": len(job.encoded.ids),
        "padding_fraction": padding,
        "device": str(job.device),
        "device_name": device_name(job.device),
    }
    with ExitStack() as opened:
        opened.callback(computed.close)  # an error here stops the layers' threads before the device is freed
        sums_file = opened.enter_context(LayerWriter(out_path, sums_schema(d, metadata, sum_names(options))))
        layer_sum_names = [item.name for item in kept_layer_sums(options)]
        moments_file = (
            opened.enter_context(
                LayerWriter(files["moments"], moments_schema(d, metadata, options.covariance, layer_sum_names))
            )
            if "moments" in files
            else None
        )
        sample_file = (
            opened.enter_context(LayerWriter(files["sample"], sample_schema(d, metadata)))
            if "sample" in files
            else None
        )
        words_files = (
            (
                opened.enter_context(LayerWriter(files["words"], words_schema(d, metadata))),
                opened.enter_context(LayerWriter(files["sentences"], sentences_schema(metadata))),
            )
            if "words" in files
            else None
        )

        def write_layers(layers) -> None:
            for sums, (outer, layer_values), points, words in layers:
                sums_file.write(sums.to_table(sums_file.schema))
                if moments_file:
                    total = sums.sum.sum(axis=0)
                    moments_file.write(
                        moments_table(
                            sums.layer, int(sums.count.sum()), total, outer, moments_file.schema, layer_values
                        )
                    )
                if sample_file:
                    sample_file.write(sample_table(sums.layer, sampled, points, sample_file.schema))
                if words_files:
                    for file, part in zip(words_files, words):
                        file.write(part.to_table(file.schema))

        # entered last, so left first: its last write ends before the files close
        writer = opened.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="write"))
        written = None
        for index, layers in enumerate(parts):
            if written is not None:
                written.result()  # the layer before is on disk: at most two layers' sums here (a third being copied)
            if index == n_parts - 1:
                release_device(job)  # every sum is in host memory: the next job may use the GPU while this one writes
            written = writer.submit(write_layers, layers)  # written while the next layer computes
        written.result()
    if pca_paths:
        write_points(pca_paths[1], job.types, points, metadata)
    return metadata


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
    """:func:`ctxvar.extraction.layer_major.choose_blocks` for the job's model; with streamed weights, its probe
    reads each block when it runs, and a model that is not to run layer-major (a refused probe) is loaded whole
    instead, and the log says so; a shard with no batch runs none and keeps the streamed model."""
    arguments = (padded.to(job.device), settings.extraction_order, settings.model["id"])
    if job.streamed is None:
        return choose_blocks(job.model, *arguments)
    with job.streamed.on_demand():
        blocks = choose_blocks(job.model, *arguments)
    if blocks is not None or not len(padded):  # no batch (an empty shard): no forward pass needs the blocks
        return blocks
    log.warning(
        "model %r does not run layer-major, so its weights are not streamed: the whole model is loaded",
        settings.model["id"],
    )
    files = job.streamed.files  # those the weights' hash names: the whole model must come from them as they were
    job.streamed.close()
    job.model = job.streamed = None
    job.model = loading.load_model(settings.model, settings.source, settings.dtype, job.device)
    for path, state in zip(files.paths, files.states):
        hashing.check_unchanged(files.what, path, state, os.stat(path))
    return None


def sum_names(options: GeometryOptions) -> list[str]:
    """The names of the declared sums a job with ``options`` keeps (the sums file's columns after n)."""
    return [item.name for item in kept_sums(options)]


@contextlib.contextmanager
def released_on_error(job: ShardRun):
    """Within the block, an error frees the job's device and gives up its GPU claim before it propagates: the
    claim would otherwise last as long as the process, and every other job waits on it (a notebook, a test
    session, a worker that goes on after a failed job). The block's error is the one raised; an error in
    freeing the device (a CUDA error that outlives its kernel fails ``empty_cache`` too) is logged."""
    try:
        yield
    except BaseException:
        try:
            release_device(job)
        except Exception as error:
            log.warning("freeing the device after the job's error failed too: %s", error)
        raise


def release_device(job: ShardRun) -> None:
    """Free the model and the device's cached memory, then give up the GPU claim (see
    :func:`ctxvar.extraction.devices.release_gpu`), even when freeing fails: from here on the job only
    writes. Memory the caller still references (an error's traceback) stays allocated."""
    try:
        job.model = None
        if job.streamed is not None:
            job.streamed.close()
            job.streamed = None
        if job.device.type == "cuda":
            torch.cuda.empty_cache()
    finally:
        devices.release_gpu()


def sample_positions(job: ShardRun, settings: ExtractionSettings) -> dict[str, np.ndarray] | None:
    """The shard's bottom-m token positions by :func:`ctxvar.extraction.position_sample.token_keys`, m =
    ``settings.geometry.sample_size`` (B · k: geometry.batches × geometry.sample_size): shard token index,
    key, sentence_id, window, position and token type of each, in key order; None without a sample."""
    k = settings.geometry.sample_size
    if not k:
        return None
    offsets = job.encoded.offsets
    keys = token_keys(job.sentence_id, job.window, offsets, settings.sample_seed)
    tokens = bottom_k(keys, k)
    sequence = np.searchsorted(offsets, tokens, side="right") - 1
    return {
        "tokens": tokens,
        "key": keys[tokens],
        "sentence_id": job.sentence_id[sequence],
        "window": job.window[sequence],
        "position": tokens - offsets[sequence],
        "token": job.types[job.type_index[tokens]],
    }


def model_metadata(settings: ExtractionSettings, job: ShardRun) -> dict:
    """What identifies the sums' origin; merges refuse partials that differ in any of merge.MUST_MATCH.
    Waits for the weights' hash, which runs beside the first forward pass: call it after that pass."""
    return {
        "model_id": settings.model["id"],
        "model_name": settings.source,
        "revision": revision_of(settings.model),
        "commit": getattr(job.model.config, "_commit_hash", None),
        "dtype": settings.dtype,
        "n_layers": job.n_layers,
        "d": job.d,
        **({"last_width": job.last_width} if job.last_width not in (None, job.d) else {}),
        "tokenizer_sha256": job.tokenizer_sha256,
        "weights_sha256": job.weights_hash.result(),
        "model_config_sha256": hashing.model_config_sha256(job.model.config),
        "attn_implementation": getattr(job.model.config, "_attn_implementation", None),
        "attention_kernels": attention_kernels(job.device),
        "merge_markers": settings.merge_markers,
        "type_marker": job.marker,
        "geometry": {**settings.geometry.record(), "seed": settings.sample_seed},
        "final_norm": loading.ends_in_final_norm(job.model),
        "attention": job.attention,
        "config_hash": settings.config_hash,
        "versions": job.versions,
    }
