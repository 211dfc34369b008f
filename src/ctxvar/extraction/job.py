"""An extraction job's shard and model (:class:`ShardRun`): the shard read, fitted and batched before the device is
claimed (:func:`planned_shard`), then the device claimed and the model loaded (:func:`loaded_shard`); the device
given back (:func:`release_device`), and what the partials' metadata records of the job (:func:`job_metadata`)."""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from ctxvar.config.entries import built_in_run, revision_of
from ctxvar.extraction import devices
from ctxvar.extraction.attention import attention_kernels
from ctxvar.extraction.passes import attention_kind, run_batches
from ctxvar.extraction.position_sample import sequence_windows, token_keys
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.shard import chunk_batches, fit_to_positions, read_shard
from ctxvar.extraction.streamed_weights import StreamedWeights, load_for_job
from ctxvar.extraction.word_sums import word_table
from ctxvar.files.atomic import verify_manifest
from ctxvar.models import hashing, loading
from ctxvar.models.batching import ShardBatches, pad_batches
from ctxvar.models.tokens import EncodedShard, type_marker, type_table
from ctxvar.models.weight_digest import recorded_sha256
from ctxvar.stats.sample_file import bottom_k
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


def job_metadata(settings: ExtractionSettings, job: ShardRun, padding: float) -> dict:
    """The partials' metadata: :func:`model_metadata` and what the job ran over (its shard, sentences and
    sequences, long sentences, tokens, ``padding``, the fraction of its batches' tokens that are padding) and on
    (its device). Waits for the weights' hash, as :func:`model_metadata` does."""
    return {
        **model_metadata(settings, job),
        "shard": settings.shard,
        "n_sentences": job.n_texts - job.long_counts["n_skipped_too_long"],
        **job.long_counts,
        "max_positions": loading.max_positions(job.model.config),  # what long_counts were measured against
        "n_sequences": len(job.encoded.lengths),
        "n_tokens": len(job.encoded.ids),
        "padding_fraction": padding,
        "device": str(job.device),
        "device_name": device_name(job.device),
    }
