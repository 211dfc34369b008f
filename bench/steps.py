"""What the benchmark measures on a model, one function per step; each runs in a fresh process (see run.py).

Every step returns a dict with ``seconds`` and the process's ``peak_rss_mb`` (and
``peak_gpu_mb`` on CUDA). Timed regions end with a device synchronisation.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from ctxvar.extraction.accumulator import NO_GEOMETRY, GeometryOptions
from ctxvar.extraction.batching import pad_batch
from ctxvar.extraction.extract import ExtractionSettings, extract_shard, prepare_shard
from ctxvar.models import loading as models

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"


def peaks(device: str) -> dict:
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def synchronise(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def default_geometry() -> GeometryOptions:
    """The geometry sums a workflow job accumulates with the config's defaults (config.schema.yaml)."""
    keys = yaml.safe_load(SCHEMA.read_text())["properties"]["geometry"]["properties"]
    return GeometryOptions.from_config({key: spec["default"] for key, spec in keys.items()})


def settings_for(
    model_dir: str,
    device: str,
    dtype: str = "float32",
    geometry: GeometryOptions = NO_GEOMETRY,
    batch_tokens: int = 16384,
) -> ExtractionSettings:
    return ExtractionSettings(
        model={"id": "bench"},
        source=model_dir,
        device=device,
        dtype=dtype,
        batch_tokens=batch_tokens,
        geometry=geometry,
        progress=False,
        config_hash="bench",
    )


def load_model(model_dir: str, device: str, dtype: str = "float32") -> dict:
    """Loading the model alone: common to every approach, subtracted from (b)."""
    start = time.perf_counter()
    models.load({"id": "bench"}, model_dir, dtype, models.resolve_device(device))
    synchronise(device)
    return {"seconds": time.perf_counter() - start, **peaks(device)}


def forward(model_dir: str, shard: str, device: str, dtype: str = "float32") -> dict:
    """(a) The limit: the bare forward pass with all hidden states over the extraction's own batches."""
    job = prepare_shard(shard, settings_for(model_dir, device, dtype))
    padded = job.padded()
    synchronise(job.device)
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in padded.to(job.device):  # as extraction moves them: once, then slices
            job.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    synchronise(job.device)
    return {
        "seconds": time.perf_counter() - start,
        "tokens": len(job.encoded.ids),
        "padded_tokens": int(padded.grid[-1]),
        **peaks(job.device.type),
    }


def extraction(
    model_dir: str, shard: str, out: str, device: str, dtype: str = "float32", geometry: bool = False
) -> dict:
    """(b) Our extraction job end to end: shard Parquet → partial sums Parquet (model loading included);
    with ``geometry``, also the default geometry sums (moments and sample files), as a workflow job does."""
    options = default_geometry() if geometry else NO_GEOMETRY
    paths = {"moments_path": out + ".moments", "sample_path": out + ".sample"} if geometry else {}
    start = time.perf_counter()
    metadata = extract_shard(shard, out, settings_for(model_dir, device, dtype, options), **paths)
    return {
        "seconds": time.perf_counter() - start,
        "tokens": metadata["n_tokens"],
        "padding_fraction": metadata["padding_fraction"],
        **peaks(device if device != "auto" else "cpu"),
    }


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
