"""What the benchmarks measure on a model, one function per step; each runs in a fresh process (see harness.py).

Every step returns a dict with ``seconds`` and the process's ``peak_rss_mb`` (and
``peak_gpu_mb`` on CUDA, of the device it used). Timed regions end with a device
synchronisation. (a) and (b) each run one forward pass on their first batch before the
timing (warm_up_seconds): the first pass's one-time costs (kernels, libraries' handles,
allocator growth) fall outside both sides of their ratio.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
import zlib

import numpy as np
import pandas as pd
import torch
from torch.profiler import record_function

from ctxvar.extraction import extract, order
from ctxvar.extraction import job as job_state
from ctxvar.extraction.accumulator import NO_GEOMETRY, GeometryOptions
from ctxvar.extraction.attention import chosen_attention
from ctxvar.extraction.extract import extract_shard, prepare_shard
from ctxvar.extraction.layer_major import ModelWeights, find_blocks
from ctxvar.extraction.passes import forward_options
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.streamed_weights import StreamedWeights, device_budget_bytes
from ctxvar.models import hashing
from ctxvar.models import loading as models
from ctxvar.models.batching import ShardBatches, pad_batch
from ctxvar.models.weight_digest import digest_weights


def peaks(device) -> dict:
    """Peak host memory of this process and, on CUDA, peak memory allocated on ``device``."""
    device = torch.device(device)
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def synchronise(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def default_geometry() -> GeometryOptions:
    """The geometry sums a workflow job accumulates with the config's defaults (config.schema.yaml)."""
    return GeometryOptions.default()


def settings_for(
    model_dir: str, device: str, dtype: str = "float32", geometry: GeometryOptions = NO_GEOMETRY, **fields
) -> ExtractionSettings:
    """The settings of a benchmark's job of the model in ``model_dir`` on ``device``: the job's defaults (its batch
    budget, whole or layer-major by its plan), no progress bar, and any other of its ``fields``."""
    job = {"model": {"id": "bench"}, "source": model_dir, "device": device, "dtype": dtype, "geometry": geometry}
    return ExtractionSettings(**job, progress=False, config_hash="bench", **fields)


def least_streamed_mb(model_dir, dtype: str) -> int:
    """The least whole megabytes of device budget (``max_device_mb``) under which a job streams the model in
    ``model_dir`` in ``dtype``: the weights outside its blocks and two blocks (a lower budget is refused)."""
    model = models.empty_model({"id": "bench"}, str(model_dir), dtype)
    return -(-ModelWeights.of(model, find_blocks(model)).resident(streamed=True) // 10**6)


def warm_up(model, batches: ShardBatches, device) -> float:
    """Seconds of one forward pass, as the job runs it, on the first of ``batches``, moved to ``device`` alone."""
    rows, shape = slice(batches.grid[0], batches.grid[1]), batches.shapes[0]
    input_ids, mask = (
        torch.from_numpy(a[rows].reshape(shape)).to(device) for a in (batches.input_ids, batches.attention_mask)
    )
    synchronise(device)
    start = time.perf_counter()
    with torch.inference_mode():
        model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True, **forward_options(model))
    synchronise(device)
    return time.perf_counter() - start


def forward_seconds(model, on_device: list, device) -> float:
    """Seconds of the bare forward pass with all hidden states over ``on_device`` (batches already on ``device``),
    each batch's outputs freed before the next, ended by a device synchronisation."""
    options = forward_options(model)
    synchronise(device)
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in on_device:
            model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True, **options)
    synchronise(device)
    return time.perf_counter() - start


def forward(model_dir: str, shard: str, device: str, dtype: str = "float32") -> dict:
    """(a) The limit: the bare forward pass with all hidden states over the extraction's own batches, after a
    warm-up batch, with no weight hash running beside it."""
    job = prepare_shard(shard, settings_for(model_dir, device, dtype), hash_weights=False)
    padded = job.padded()
    with chosen_attention(job.device):  # the kernels the job allows
        warm_up_seconds = warm_up(job.model, padded, job.device)
        seconds = forward_seconds(job.model, padded.to(job.device), job.device)  # moved as extraction moves them
    return {
        "seconds": seconds,
        "warm_up_seconds": warm_up_seconds,
        "tokens": len(job.encoded.ids),
        "padded_tokens": int(padded.grid[-1]),
        "batches": len(padded),
        **peaks(job.device),
    }


def extraction(
    model_dir: str,
    shard: str,
    out: str,
    device: str,
    dtype: str = "float32",
    geometry: bool = False,
    max_device_mb: int = 0,
    generated: bool = False,
) -> dict:
    """(b) Our extraction job end to end: shard Parquet → partial sums Parquet; with ``geometry``, also the
    default geometry sums (moments and sample files), as a workflow job does. ``max_device_mb``: the job's
    device budget for the weights (below them, they stream from the files block by block); ``generated``: every
    weight is made on the device from a seed when the job would read it (:class:`GeneratedWeights`, streamed;
    ``model_dir`` holds no weights), and the weight hash names that seed.

    The weights are hashed before the job, as rule digest_weights hashes them once per model, and the job takes
    that hash (with ``generated`` weights, which no file holds, the job hashes the seed).

    ``seconds`` is the whole job; ``load_seconds`` its model loading and ``warm_up_seconds``
    a forward pass on its first batch before its own, both timed in this process: the job
    less these two is what compares with (a).
    """
    options = default_geometry() if geometry else NO_GEOMETRY
    timings = {}
    settings = settings_for(model_dir, device, dtype, options, max_device_mb=max_device_mb)
    digest = None if generated else f"{out}.weights_digest.json"  # made once per model, as rule digest_weights does
    if digest:
        digest_weights(settings.model, settings.source, digest, hashing.HASH_THREADS)
    start = time.perf_counter()
    with generated_weights() if generated else contextlib.nullcontext(), timed_loading_and_warm_up(timings):
        # the geometry's files beside ``out``, as a job names them
        metadata = extract_shard(shard, out, settings, weight_digest=digest)
    return {
        "seconds": time.perf_counter() - start,
        **timings,
        "tokens": metadata["n_tokens"],
        "padding_fraction": metadata["padding_fraction"],
        **peaks(metadata["device"]),
    }


@contextlib.contextmanager
def timed_loading_and_warm_up(timings: dict):
    """Within the block, jobs time their model loading (``timings["load_seconds"]``) and run a warm-up batch
    before their first pass (``timings["warm_up_seconds"]``), as (a) does, on the whole-model and the
    layer-major path alike; ``timings["batches"]`` lists the pass's batches. The job's other parts are timed too:
    ``prepare_seconds``, the shard read and batched before the claim and the model loaded (its loading not counted),
    ``batches_seconds``, the pass after the warm-up (the whole-model batch loop, or the layer-major layers'
    computing, each ended by a device synchronisation), and ``hash_wait_seconds``, the wait for the weight hash once
    the pass is done. Under ``torch.profiler``, the loading is the range ``ctxvar.load`` and each pass's batch loop,
    after the warm-up, ``ctxvar.batches`` (see bench/profile_job.py)."""
    load, run_batches, load_for_job = models.load_model, job_state.run_batches, job_state.load_for_job

    def timed_load(*args, **kwargs):
        start = time.perf_counter()
        with record_function("ctxvar.load"):
            model = load(*args, **kwargs)
        synchronise(next(model.parameters()).device)
        timings["load_seconds"] = time.perf_counter() - start
        return model

    def timed_load_for_job(settings, device):  # streamed weights: the resident ones loaded, load_model not called
        start = time.perf_counter()
        model, streamed = load_for_job(settings, device)
        synchronise(device)
        timings.setdefault("load_seconds", time.perf_counter() - start)
        return model, streamed

    def warmed_up(model, sums, batches, device, progress, points=None):
        if "warm_up_seconds" not in timings:
            timings["warm_up_seconds"] = warm_up(model, batches, device)
        timings.setdefault("batches", []).append(len(batches))
        start = time.perf_counter()
        with record_function("ctxvar.batches"):
            run_batches(model, sums, batches, device, progress, points)
        synchronise(device)
        timings["batches_seconds"] = timings.get("batches_seconds", 0.0) + time.perf_counter() - start

    def timed_prepare(*args, **kwargs):
        start = time.perf_counter()
        job = prepare(*args, **kwargs)
        timings["prepare_seconds"] = time.perf_counter() - start - timings.get("load_seconds", 0.0)
        return job

    def timed_metadata(settings, job):
        start = time.perf_counter()
        job.weights_hash.result()
        timings["hash_wait_seconds"] = time.perf_counter() - start
        return model_metadata(settings, job)

    def warmed_up_layer_major(job, padded, *args, **kwargs):
        if "warm_up_seconds" not in timings:
            with job.streamed.on_demand() if job.streamed is not None else contextlib.nullcontext():
                timings["warm_up_seconds"] = warm_up(job.model, padded, job.device)
        timings.setdefault("batches", []).append(len(padded))
        with record_function("ctxvar.batches"):
            layers = layer_major_sums(job, padded, *args, **kwargs)
            while True:  # each layer's computing timed, not the job's use of it between layers
                start = time.perf_counter()
                layer = next(layers, None)
                synchronise(job.device)
                timings["batches_seconds"] = timings.get("batches_seconds", 0.0) + time.perf_counter() - start
                if layer is None:
                    return
                yield layer

    layer_major_sums, prepare, model_metadata = order.layer_major_sums, extract.prepare_shard, job_state.model_metadata
    patched = timed_load, warmed_up, warmed_up_layer_major, timed_load_for_job
    models.load_model, job_state.run_batches, order.layer_major_sums, job_state.load_for_job = patched
    extract.prepare_shard, job_state.model_metadata = timed_prepare, timed_metadata
    try:
        yield
    finally:
        models.load_model, job_state.run_batches = load, run_batches
        order.layer_major_sums, job_state.load_for_job = layer_major_sums, load_for_job
        extract.prepare_shard, job_state.model_metadata = prepare, model_metadata


class GeneratedWeights(StreamedWeights):
    """:class:`ctxvar.extraction.streamed_weights.StreamedWeights` whose every tensor is made on the device from a
    seed (the tensor's name's CRC-32 plus ``seed``) instead of read from a file: the same blocks, dtype, device
    memory and compute, for a model whose checkpoint the machine cannot hold. Matrices are normal(0, 0.02),
    one-dimensional weights ones and biases zeros, as transformers initialises them."""

    def __init__(self, model, blocks, device, files: hashing.WeightFiles, budget: int, seed: int = 0):
        super().__init__(model, blocks, {}, {}, files, device, budget)
        self.seed = seed

    def read(self, name: str, like: torch.Tensor) -> torch.Tensor:
        if like.dim() == 1:
            fill = torch.zeros if name.endswith("bias") else torch.ones
            return fill(like.shape, dtype=like.dtype, device=self.device)
        generator = torch.Generator(self.device).manual_seed(self.seed + zlib.crc32(name.encode()))
        return torch.empty(like.shape, dtype=like.dtype, device=self.device).normal_(0, 0.02, generator=generator)


GENERATED_HASH = "generated on the device from seed {seed}: no files"


@contextlib.contextmanager
def generated_weights(seed: int = 0):
    """Within the block, every job's model is built on ``meta`` from its config and streamed with
    :class:`GeneratedWeights` whatever its budget, and its weight hash is :data:`GENERATED_HASH`."""
    load_for_job, weights_sha256 = job_state.load_for_job, hashing.weights_sha256

    def generating(settings, device):
        model = models.empty_model(settings.model, settings.source, settings.dtype)
        config = os.path.join(settings.source, "config.json")
        files = hashing.WeightFiles.of(models.described(settings.model, settings.source), [config])
        budget = device_budget_bytes(settings, device) or 0  # a job's; none (a CPU's): never held whole
        streamed = GeneratedWeights(model, find_blocks(model), device, files, budget, seed)
        streamed.load_resident()
        return model, streamed

    generated_hash = GENERATED_HASH.format(seed=seed)
    job_state.load_for_job, hashing.weights_sha256 = generating, lambda files, threads=1: generated_hash
    try:
        yield
    finally:
        job_state.load_for_job, hashing.weights_sha256 = load_for_job, weights_sha256


def reference_loop(model_dir: str, shard: str, out: str, device: str) -> dict:
    """(c) The reference code's algorithm (Yamagiwa & Shimodaira, ``save_token_stats.py``), re-implemented:
    forward, every layer copied to the host, then for each layer and token a running mean
    u ← (k·u + x)/(k + 1), q ← (k·q + ‖x‖²)/(k + 1) in a dict keyed by the token string, with M = ‖u‖²
    and V = q − M recomputed at every update. Writes its (layer, token, n, Q, M, V) to ``out``."""
    job = prepare_shard(shard, settings_for(model_dir, device), hash_weights=False)
    pad = models.pad_id(job.tokenizer)
    strings = job.types[job.type_index].tolist()  # (tokens,) type string of every token
    offsets, lengths = job.encoded.offsets, job.encoded.lengths
    running = [{} for _ in range(job.n_layers)]  # per layer: token → (k, u, q, M, V)
    synchronise(job.device)
    start = time.perf_counter()
    with torch.no_grad():
        for rows in job.batches:
            batch = pad_batch(job.encoded, job.type_index, rows, pad)
            output = job.model(
                input_ids=torch.from_numpy(batch.input_ids).to(job.device),
                attention_mask=torch.from_numpy(batch.attention_mask).to(job.device),
                output_hidden_states=True,
            )
            for layer, states in enumerate(output.hidden_states):
                states = states.float().cpu().numpy()  # (B, T, d)
                for sequence, row in zip(states, rows):
                    first = offsets[row]
                    running_mean_update(running[layer], strings[first : first + lengths[row]], sequence)
    seconds = time.perf_counter() - start
    pd.DataFrame(
        [(layer, token, k, q, m, v) for layer, table in enumerate(running) for token, (k, _, q, m, v) in table.items()],
        columns=["layer", "token", "n", "Q", "M", "V"],
    ).to_parquet(out)
    return {"seconds": seconds, "tokens": len(job.encoded.ids), **peaks(job.device.type)}


def running_mean_update(table: dict, tokens: list[str], states: np.ndarray) -> None:
    """The reference's inner loop over one sentence's tokens at one layer: for each token string and its state
    x, the running mean u ← (k·u + x)/(k + 1) and q ← (k·q + ‖x‖²)/(k + 1), with M = ‖u‖² and V = q − M,
    in ``table`` (token → (k, u, q, M, V)). Padding positions beyond ``tokens`` are not visited."""
    for token, x in zip(tokens, states):
        squared_norm = np.linalg.norm(x) ** 2
        if token in table:
            k, u, q, _, _ = table[token]
            u = k * u / (k + 1) + x / (k + 1)
            q = k * q / (k + 1) + squared_norm / (k + 1)
            m = np.linalg.norm(u) ** 2
            table[token] = (k + 1, u, q, m, q - m)
        else:
            table[token] = (1, x, squared_norm, squared_norm, 0.0)
