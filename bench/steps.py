"""What the benchmark measures on a model, one function per step; each runs in a fresh process (see run.py).

Every step returns a dict with ``seconds`` and the process's ``peak_rss_mb`` (and
``peak_gpu_mb`` on CUDA). Timed regions end with a device synchronisation.
"""

from __future__ import annotations

import resource
import time
from collections import defaultdict

import torch

from ctxvar import models
from ctxvar.batching import pad_batch
from ctxvar.extract import ExtractionSettings, extract_shard, prepare_shard


def peaks(device: str) -> dict:
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def synchronise(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def settings_for(model_dir: str, device: str, dtype: str = "float32", batch_tokens: int = 16384) -> ExtractionSettings:
    return ExtractionSettings(model={"id": "bench"}, source=model_dir, device=device, dtype=dtype, batch_tokens=batch_tokens,
                              progress=False, config_hash="bench")


def load_model(model_dir: str, device: str) -> dict:
    """Loading the model alone: common to every approach, subtracted from (b)."""
    start = time.perf_counter()
    models.load({"id": "bench"}, model_dir, "float32", models.resolve_device(device))
    synchronise(device)
    return {"seconds": time.perf_counter() - start, **peaks(device)}


def forward(model_dir: str, shard: str, device: str, dtype: str = "float32") -> dict:
    """(a) The limit: the bare forward pass with all hidden states over the extraction's own batches."""
    job = prepare_shard(shard, settings_for(model_dir, device, dtype))
    pad = models.pad_id(job.tokenizer)
    padded = [pad_batch(job.encoded, job.type_index, rows, pad) for rows in job.batches]
    synchronise(job.device)
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in padded:
            ids = torch.from_numpy(batch.input_ids).to(job.device, non_blocking=True)
            mask = torch.from_numpy(batch.attention_mask).to(job.device, non_blocking=True)
            job.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    synchronise(job.device)
    return {"seconds": time.perf_counter() - start, "tokens": len(job.encoded.ids),
            "padded_tokens": int(sum(b.input_ids.size for b in padded)), **peaks(job.device.type)}


def extraction(model_dir: str, shard: str, out: str, device: str, dtype: str = "float32") -> dict:
    """(b) Our extraction job end to end: shard Parquet → partial sums Parquet (model loading included)."""
    start = time.perf_counter()
    metadata = extract_shard(shard, out, settings_for(model_dir, device, dtype))
    return {"seconds": time.perf_counter() - start, "tokens": metadata["n_tokens"],
            "padding_fraction": metadata["padding_fraction"], **peaks(device if device != "auto" else "cpu")}


def reference_loop(model_dir: str, shard: str, device: str) -> dict:
    """(c) The authors' style: forward, copy every layer to the host, update Python dicts once per token per layer."""
    job = prepare_shard(shard, settings_for(model_dir, device))
    pad = models.pad_id(job.tokenizer)
    keys = job.types[job.type_index]  # (tokens,) type string of every token
    count = defaultdict(int)
    total = [defaultdict(lambda: 0.0) for _ in range(job.n_layers)]
    total_sq = [defaultdict(float) for _ in range(job.n_layers)]
    synchronise(job.device)
    start = time.perf_counter()
    with torch.inference_mode():
        for rows in job.batches:
            batch = pad_batch(job.encoded, job.type_index, rows, pad)
            output = job.model(input_ids=torch.from_numpy(batch.input_ids).to(job.device),
                               attention_mask=torch.from_numpy(batch.attention_mask).to(job.device), output_hidden_states=True)
            hidden = [h.float().cpu().numpy() for h in output.hidden_states]  # (B, T, d) per layer
            for i, row in enumerate(rows):
                first = job.encoded.offsets[row]
                for position in range(job.encoded.lengths[row]):
                    key = keys[first + position]
                    count[key] += 1
                    for layer in range(job.n_layers):
                        x = hidden[layer][i, position]
                        total[layer][key] = total[layer][key] + x
                        total_sq[layer][key] += float(x @ x)
    return {"seconds": time.perf_counter() - start, "tokens": len(job.encoded.ids), **peaks(job.device.type)}
