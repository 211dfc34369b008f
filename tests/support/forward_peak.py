"""Peak memory of the extraction's batch loop on CPU proxy models, in a fresh process; prints JSON.

    python tests/support/forward_peak.py '[{"model_type": "llama", "hidden_size": 256, ...}, ...]' ROWS WIDTH BATCHES

For each config, runs :func:`ctxvar.extraction.passes.run_batches` over BATCHES batches
of ROWS × WIDTH tokens with real sums of every layer (allocated before the measurement),
and gives ``peak_bytes``, the growth of resident memory from just before the loop to its
peak, next to what the device budget allows for it: ``activation_bytes`` of
:mod:`ctxvar.extraction.budget`, ``batch_bytes`` and the padded batches.

Run it with ``MALLOC_MMAP_THRESHOLD_=65536``: glibc then maps every tensor of 64 kB or
more on its own and unmaps it when freed, so resident memory follows the live tensors
(within 1 MB of torch's own allocation count, checked with ``torch.profiler``) instead
of the heap's high-water mark.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from transformers import AutoConfig, AutoModel

from ctxvar.extraction.accumulator import EmbeddingSums
from ctxvar.extraction.budget import activation_bytes, batch_bytes
from ctxvar.extraction.passes import run_batches
from ctxvar.models.batching import pad_batches
from ctxvar.models.tokens import EncodedShard

N_TYPES = 1000


def resident_bytes(field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (peak since the last reset) of this process."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def reset_peak() -> None:
    """Start ``VmHWM`` again from the current resident memory (Linux ≥ 4.0)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def loop_peak(spec: dict, rows: int, width: int, n_batches: int) -> dict:
    config = AutoConfig.for_model(**spec)
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    n_hidden, d = config.num_hidden_layers + 1, config.hidden_size
    rng = np.random.default_rng(0)
    n_sequences = rows * n_batches
    encoded = EncodedShard(
        ids=rng.integers(5, config.vocab_size, n_sequences * width), offsets=np.arange(n_sequences + 1) * width
    )
    type_index = rng.integers(0, N_TYPES, n_sequences * width)
    batches = [np.arange(b * rows, (b + 1) * rows) for b in range(n_batches)]
    padded = pad_batches(encoded, type_index, batches, pad_id=0)
    sums = EmbeddingSums(range(n_hidden), n_hidden, N_TYPES, d, torch.device("cpu"))
    with torch.inference_mode():  # the first forward pass's one-time allocations (thread pools, kernels)
        model(input_ids=torch.ones(2, width, dtype=torch.long), output_hidden_states=True, use_cache=False)
    reset_peak()
    before = resident_bytes("VmRSS")
    run_batches(model, sums, padded, torch.device("cpu"), progress=False)
    tokens = rows * width
    return {
        "peak_bytes": resident_bytes("VmHWM") - before,
        "hidden_state_bytes": 4 * n_hidden * tokens * d,
        "activation_bytes": activation_bytes(config, n_hidden, d, tokens, width, 4),
        "buffer_bytes": batch_bytes(n_hidden, tokens, d) + padded.device_bytes(),
    }


if __name__ == "__main__":
    rows, width, n_batches = map(int, sys.argv[2:])
    print(json.dumps([loop_peak(spec, rows, width, n_batches) for spec in json.loads(sys.argv[1])]))
