"""Peak resident memory of an extraction job whose model's weights are streamed from its files, in a fresh
process; prints JSON.

    MALLOC_MMAP_THRESHOLD_=65536 python tests/support/streamed_peak.py \\
        SHARD MODEL_DIR OUT DTYPE MAX_DEVICE_MB WARM_UP_DIR

Runs :func:`ctxvar.extraction.extract.extract_shard` on a CPU with ``max_device_mb`` as the device budget,
once with the small model of the same family in WARM_UP_DIR (so that every module the job imports is imported
and every library has set up its working memory; streamed too where the job has a budget), then with the model
in MODEL_DIR, and gives ``peak_bytes``: the growth of resident memory (``VmHWM`` after ``VmRSS`` once warmed
up) to its peak over the second job, loading and hashing included; ``plan_bytes``: what the job's memory plan
(:class:`ctxvar.extraction.layer_major.MemoryPlan`, ``device_bytes``) counts on the device (resident weights,
hidden states, one layer's sums, transients); ``weights_bytes``: all the weights; ``streamed``: whether the
weights were streamed; ``seconds``: the second job's wall time. On a CPU the device is the host, so resident
memory is what the plan bounds; the rest (the tokenizer, the shard's tokens, the hash's read buffer, the
libraries' working memory) is a few tens of MB whatever the model's size (the hash reads 16 MB at a time).

``MALLOC_MMAP_THRESHOLD_=65536`` makes glibc map every block of 64 kB or more on its own and unmap it when
freed, so resident memory follows the live tensors instead of the heap's high-water mark.
"""

from __future__ import annotations

import json
import sys
import time

from forward_peak import reset_peak, resident_bytes  # tests/support, the script's folder
from pipeline_runs import streaming_budget_mb

from ctxvar.extraction import extract, order
from ctxvar.extraction.settings import ExtractionSettings

BATCH_TOKENS = 128  # the tests' whole-model job's, so that both give the same bits


def main(shard: str, model_dir: str, out: str, dtype: str, max_device_mb: str, warm_up_dir: str) -> dict:
    plans = []
    planned = order.memory_plan
    order.memory_plan = lambda *args, **kwargs: plans.append(planned(*args, **kwargs)) or plans[-1]
    settings = ExtractionSettings(
        model={"id": "streamed"},
        source=warm_up_dir,
        dtype=dtype,
        device="cpu",
        batch_tokens=BATCH_TOKENS,
        max_device_mb=streaming_budget_mb(warm_up_dir, dtype) if float(max_device_mb) else 0,  # streamed too
        progress=False,
        config_hash="peak",
    )
    extract.extract_shard(shard, f"{out}.warm-up", settings)
    settings.source, settings.max_device_mb = model_dir, float(max_device_mb)
    reset_peak()
    baseline = resident_bytes("VmRSS")
    start = time.perf_counter()
    metadata = extract.extract_shard(shard, out, settings)
    seconds = time.perf_counter() - start
    peak = resident_bytes("VmHWM") - baseline
    plan = plans[-1]
    return {
        "seconds": seconds,
        "peak_bytes": peak,
        "plan_bytes": plan.device_bytes(),
        "weights_bytes": plan.weights,
        "block_bytes": plan.block_weights,
        "resident_weights_bytes": plan.resident_weights,
        "streamed": plan.streamed,
        "weights_sha256": metadata["weights_sha256"],
    }


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
