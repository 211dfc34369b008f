"""One extraction job under torch.profiler, for each of the GPU benchmark's models (see docs/performance.md).

    python -m bench profile_job --device cuda --work W       # W: bench/gpu.py's --work folder (models kept)
    python -m bench profile_job --quick --out D              # tiny shapes on the CPU: checks the script only

Per model, in a fresh process, one job as a workflow job runs it (the config's default geometry; bert-base in
fp32 over the benchmark's corpus, the Llama-2-7B-shaped decoder in bf16 over its smaller one), after a warm-up
batch outside the profile's batch window, under ``torch.profiler`` with CPU and CUDA activity. Writes
``profile.md`` and ``profile.csv`` (one row per model) to ``--out``:

- seconds of the whole job, of its model loading and of its batches (the window of the passes' batch loops);
- gpu_busy_fraction: per batch window (one per pass), the union of the kernels, copies and memsets that the
  window's runtime calls launched, over the time from the window's start to its end or the last of them, if
  later; summed over the windows;
- syncs_per_batch: the waits on the device (cudaStreamSynchronize, cudaDeviceSynchronize,
  cudaEventSynchronize; a copy to or from pageable memory waits with one of these) in the windows, by the
  thread that runs the batches, per batch; other_thread_syncs: those of other threads (the weight hash's);
  pageable_copies: the copies to or from pageable host memory launched in the windows, by any thread;
- where the GPU idles in that window: each idle gap is put down to the innermost op under way at its start
  in the thread that runs the batches (or "(Python)" outside any op), summed by op;
- ``key_averages()`` tables sorted by self CUDA time and by self CPU time.
"""

from __future__ import annotations

import collections
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

from ctxvar.extraction.extract import extract_shard

import gpu_models
import steps
from harness import command, in_fresh_process, markdown, write_results

OPTIONS = gpu_models.gpu_options("profile.md and profile.csv", "bench/gpu.py's --work folder")

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver"}
SYNC_CALLS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"}
JOBS = {"bert-base": ("float32", False), "llama-2-7b": ("bfloat16", True)}  # dtype, on the smaller corpus
TABLE_ROWS = 25


def profiled_job(model_dir: str, shard: str, out: str, device: str, dtype: str) -> dict:
    """One extraction job with the default geometry, profiled; its summary and the two key_averages tables."""
    options = steps.default_geometry()
    settings = steps.settings_for(model_dir, device, dtype, options)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.device(device).type == "cuda" else [])
    timings = {}
    with profile(activities=activities) as profiler, steps.timed_loading_and_warm_up(timings):
        start = time.perf_counter()
        metadata = extract_shard(shard, out, settings)  # the moments and sample files beside ``out``
        seconds = time.perf_counter() - start
    batches = timings["batches"]
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    averages = profiler.key_averages()
    return {
        "summary": {
            "seconds": seconds,
            "tokens": metadata["n_tokens"],
            "batches": sum(batches),
            "passes": len(batches),
            **trace_summary(events, sum(batches)),
            **steps.peaks(metadata["device"]),
        },
        "by_cuda": averages.table(sort_by="self_cuda_time_total", row_limit=TABLE_ROWS, max_name_column_width=60),
        "by_cpu": averages.table(sort_by="self_cpu_time_total", row_limit=TABLE_ROWS, max_name_column_width=60),
    }


def trace_summary(events: list[dict], n_batches: int) -> dict:
    """The measures of the module docstring from a Chrome trace's events (times in µs): load_seconds,
    batches_seconds, syncs_per_batch, other_thread_syncs, pageable_copies, gpu_busy_fraction and
    idle_by_host_op (seconds by op, largest first). Without CUDA activity in a batch window the GPU's
    measures are NaN (and no idle time); without batches, the per-batch one is."""
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    annotations = [e for e in spans if e.get("cat") == "user_annotation"]  # on the host's timeline
    marks = sorted((e for e in annotations if e["name"] == "ctxvar.batches"), key=lambda e: e["ts"])
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in marks]
    thread = marks[0].get("tid") if marks else None
    runtime = [
        [e for e in spans if e.get("cat") in RUNTIME_CATEGORIES and start <= e["ts"] <= end] for start, end in windows
    ]
    launched = [{e["args"]["correlation"] for e in calls if "correlation" in e.get("args", {})} for calls in runtime]
    device = [
        [e for e in spans if e.get("cat") in DEVICE_CATEGORIES and e.get("args", {}).get("correlation") in ids]
        for ids in launched
    ]
    syncs = [e for calls in runtime for e in calls if e["name"] in SYNC_CALLS]
    loop_syncs = sum(e.get("tid") == thread for e in syncs)
    out = {
        "load_seconds": sum(e["dur"] for e in annotations if e["name"] == "ctxvar.load") / 1e6,
        "batches_seconds": sum(end - start for start, end in windows) / 1e6,
        "syncs_per_batch": loop_syncs / n_batches if n_batches else float("nan"),
        "other_thread_syncs": len(syncs) - loop_syncs,
        "pageable_copies": sum("Pageable" in e["name"] for work in device for e in work if e["cat"] == "gpu_memcpy"),
    }
    if not any(device):
        return {**out, "gpu_busy_fraction": float("nan"), "idle_by_host_op": {}}
    busy_us = span_us = 0.0
    idle = []
    for (start, end), work in zip(windows, device):
        busy = merged([(e["ts"], e["ts"] + e["dur"]) for e in work])
        last = max([end] + [stop for _, stop in busy])  # the window's kernels may end after its host calls
        busy_us += sum(stop - begin for begin, stop in busy)
        span_us += last - start
        idle += gaps(busy, start, last)
    host_ops = [e for e in spans if e.get("cat") in {"cpu_op", "cuda_runtime"} and e.get("tid") == thread]
    return {**out, "gpu_busy_fraction": busy_us / span_us, "idle_by_host_op": idle_by_host_op(idle, host_ops)}


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals`` as sorted disjoint intervals."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(start, end) for start, end in out]


def gaps(busy: list[tuple[float, float]], first: float, last: float) -> list[tuple[float, float]]:
    """The parts of [first, last] outside the sorted disjoint ``busy`` intervals."""
    out, at = [], first
    for start, end in busy:
        if start > at:
            out.append((at, min(start, last)))
        at = max(at, end)
    return out + ([(at, last)] if at < last else [])


def idle_by_host_op(idle: list[tuple[float, float]], host_ops: list[dict]) -> dict[str, float]:
    """Seconds of ``idle`` per innermost op of ``host_ops`` (one thread's, so nested) under way at each gap's
    start, "(Python)" where none is; largest first. One sweep over both, sorted by start."""
    total: dict[str, float] = collections.defaultdict(float)
    ops = sorted(host_ops, key=lambda e: (e["ts"], -e["dur"]))  # an op before the ops it encloses
    open_ops: list[dict] = []  # the ops under way, outermost first
    index = 0
    for gap_start, gap_end in idle:
        while index < len(ops) and ops[index]["ts"] <= gap_start:
            op = ops[index]
            while open_ops and open_ops[-1]["ts"] + open_ops[-1]["dur"] <= op["ts"]:
                open_ops.pop()
            open_ops.append(op)
            index += 1
        while open_ops and open_ops[-1]["ts"] + open_ops[-1]["dur"] < gap_start:
            open_ops.pop()
        total[open_ops[-1]["name"] if open_ops else "(Python)"] += (gap_end - gap_start) / 1e6
    return dict(sorted(total.items(), key=lambda item: -item[1]))


def report(results: dict[str, dict], gpu_name: str, made_by: str) -> str:
    lines = [
        f"# Profile of one extraction job per model ({gpu_name}, torch {torch.__version__})",
        "",
        f"`{made_by}`; see bench/profile_job.py for what each measure is.",
        "",
        markdown(summary_table(results)),
    ]
    for name, result in results.items():
        idle = result["summary"]["idle_by_host_op"]
        lines += ["", f"## {name}", "", "GPU idle time in the batches' window, by the host op under way:", ""]
        lines += [f"- {op}: {seconds:.3f} s" for op, seconds in list(idle.items())[:12]] or ["- (no CUDA activity)"]
        lines += ["", "By self CUDA time:", "", "```", result["by_cuda"], "```", "", "By self CPU time:", ""]
        lines += ["```", result["by_cpu"], "```"]
    return "\n".join(lines) + "\n"


def summary_table(results: dict[str, dict]) -> pd.DataFrame:
    rows = []
    for name, result in results.items():
        row = {k: v for k, v in result["summary"].items() if k != "idle_by_host_op"}
        rows.append({"model": name, "dtype": JOBS[name][0], **row})
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    args = OPTIONS.parser(__doc__).parse_args(argv)
    mode = gpu_models.MODES["quick" if args.quick else "gpu"]
    work, shard, small = gpu_models.corpora(args, mode)
    dirs = gpu_models.build_models(work, args.quick, mode["shard_size"], list(JOBS))
    gpu_name = gpu_models.device_name(args.device)
    results = {}
    for name, (dtype, on_small) in JOBS.items():
        out = str(work / f"profile-{name}.parquet")
        corpus = str(small if on_small else shard)
        results[name] = in_fresh_process(profiled_job, str(dirs[name]), corpus, out, args.device, dtype)
        print(summary_table(results).to_string(), flush=True)
    made_by = command(__file__, *gpu_models.measured_options(args))
    text = report(results, gpu_name, made_by)
    write_results(args.out, {"profile.csv": summary_table(results), "profile.md": text}, echo=False)


if __name__ == "__main__":
    main()
