"""GPU benchmark (see docs/performance.md).

    python -m bench gpu                 # on CUDA if torch sees it: writes bench/results/gpu.csv and gpu.md
    python -m bench gpu --models llama-2-7b  # those models' rows only; the others' stay from the run before
    python -m bench gpu --quick --out D  # tiny shapes: checks the script, measures nothing

Where a command's time is limited, run the models in parts with --models into one --out: the
rows of the models not run stay when they came from the same GPU, torch version and mode
(else --models refuses). The corpus and the models are written under --work (default:
OUT/gpu-work; bench/results/gpu-work is ignored by git); a model saved there by a run of the
same mode and shape is kept (its marker, bench-model.json, is written last).

Random-weight models of the published shapes, each saved in safetensors shards of at most 2 GB
(bert-base and gpt2-medium in one file, as the Hub ships them): bert-base and gpt2-medium in
fp32 and bf16 over a shard of the benchmark's corpus (about 1.3 M tokens), and a decoder of
Llama-2-7B's shape (vocabulary cut to the corpus tokenizer's) in bf16 over a smaller shard of
at least 30 batches; decoders of Llama-2-13B's and Llama-2-70B's shapes likewise, layer-major with their
weights streamed (column weights): 13B's read from its saved files under a device budget (max_device_mb) of a
third of them, 70B's generated on the device block by block from a seed when the job would read them (the same
compute and device memory; the GPU machine's disk cannot hold its checkpoint), so 70B measures no reading.
Per model and dtype, each step in a fresh process (the streamed decoders: load and (b)+g only):

    (a)        the bare forward pass with all hidden states over the extraction's own batches,
               after a warm-up batch, with no weight hash beside it
    (b)        the extraction job with the paper's sums, less its loading and a warm-up batch,
               both timed in its own process
    (b)+g      the same with the default geometry sums
    load       (b)'s loading of the model onto the device, against reading its weight files (read_seconds)

The CSV has one row per model, dtype and step: model, dtype, step, tokens, batches, tokens_per_s,
overhead_b_over_a (seconds per token against (a)), padding_fraction, peak_host_mb (ru_maxrss, MiB),
peak_gpu_mb (MiB; of the device the step used), gpu_name, torch, quick, and seconds, warm_up_seconds, mfu (the
forward pass's model FLOPs, 2 × non-embedding parameters × real tokens, over the GPU's dense
peak for the dtype), load_seconds, read_seconds, weights (loaded whole, streamed from the files, generated),
max_device_mb, and the parts of a (b) step (steps.timed_loading_and_warm_up): prepare_seconds (the shard read and
batched, before the device is claimed, and the model loaded), batches_seconds (the whole-model batch loop) and
hash_wait_seconds (the wait for the weight hash after the pass: none where the job takes the digest made before it,
as a workflow job takes rule digest_weights'); the rest of (b)'s seconds is mostly the writing of the sums.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import torch

import steps
from gpu_models import (
    MODES,
    PEAK_FLOPS,
    WEIGHTS,
    build_models,
    corpora,
    device_name,
    gpu_family,
    gpu_options,
    measured_options,
)
from harness import command, in_fresh_process, markdown, write_results

OPTIONS = gpu_options("gpu.md and gpu.csv", "corpus and models")


def read_seconds(model_dir: Path) -> float:
    """Time to read every weight file once, in 64 MB blocks through ``read()`` (a copy; loading maps the files)."""
    start = time.perf_counter()
    for path in sorted(model_dir.glob("*.safetensors")):
        with open(path, "rb", buffering=0) as handle:
            while handle.read(64 << 20):
                pass
    return time.perf_counter() - start


def non_embedding_parameters(model_dir: Path) -> int:
    from transformers import AutoConfig, AutoModel

    with torch.device("meta"):
        model = AutoModel.from_config(AutoConfig.from_pretrained(model_dir))
    return sum(p.numel() for name, p in model.named_parameters() if "emb" not in name)


def rows_for(
    name: str, model_dir: Path, shard: Path, dtype: str, device: str, gpu_name: str, quick: bool
) -> list[dict]:
    """Every step for one model and dtype, in fresh processes."""
    partial = str(shard.parent / f"{name}-{dtype}.parquet")
    forward = in_fresh_process(steps.forward, str(model_dir), str(shard), device, dtype)
    forward.update(step="(a) forward")
    paper = in_fresh_process(steps.extraction, str(model_dir), str(shard), partial, device, dtype)
    paper.update(step="(b) extraction")
    geometry = in_fresh_process(steps.extraction, str(model_dir), str(shard), partial, device, dtype, True)
    geometry.update(step="(b) extraction + geometry")
    load = {"step": "load", "seconds": paper["load_seconds"], "read_seconds": read_seconds(model_dir), "tokens": 0}
    load["peak_rss_mb"] = float("nan")  # no peak of its own: it ran in (b)'s process
    flops = 2 * non_embedding_parameters(model_dir) * forward["tokens"] / forward["seconds"]
    forward["mfu"] = flops / PEAK_FLOPS.get(gpu_family(gpu_name), {}).get(dtype, float("nan"))
    forward["padding_fraction"] = 1 - forward["tokens"] / forward["padded_tokens"]
    for job in (paper, geometry):
        job["seconds"] -= job["load_seconds"] + job["warm_up_seconds"]  # as the forward pass is timed
        job["batches"] = forward["batches"]
        job["overhead_b_over_a"] = (job["seconds"] / job["tokens"]) / (forward["seconds"] / forward["tokens"])
    rows = [load, forward, paper, geometry]
    for row in rows:
        row.update(model=name, dtype=dtype, gpu_name=gpu_name, torch=torch.__version__, quick=quick)
        row.update(weights="loaded whole", max_device_mb=0)
        row["peak_host_mb"] = row.pop("peak_rss_mb")
        row["tokens_per_s"] = row["tokens"] / row["seconds"] if row["tokens"] else float("nan")
    return rows


def streamed_rows_for(name: str, model_dir: Path, shard: Path, device: str, gpu_name: str, quick: bool) -> list[dict]:
    """The load and (b)+g steps of a decoder whose job streams its weights (:data:`WEIGHTS`), in bf16: from its files
    under a device budget of a third of them (at least what streaming holds, :func:`steps.least_streamed_mb`), or
    generated on the device (no files: no read_seconds). No (a) nor (b): a bare forward pass of the whole model does
    not fit, and the job is what is measured."""
    generated = WEIGHTS[name] == "generated"
    files = sorted(model_dir.glob("*.safetensors"))
    budget_mb = 0  # generated: no files to read under a budget
    if not generated:
        budget_mb = max(
            sum(path.stat().st_size for path in files) // 3 // 10**6, steps.least_streamed_mb(model_dir, "bfloat16")
        )
    partial = str(shard.parent / f"{name}-bfloat16.parquet")
    geometry = in_fresh_process(
        steps.extraction, str(model_dir), str(shard), partial, device, "bfloat16", True, budget_mb, generated
    )
    geometry.update(step="(b) extraction + geometry")
    geometry["seconds"] -= geometry["load_seconds"] + geometry["warm_up_seconds"]
    geometry["batches"] = sum(geometry["batches"])  # one pass: layer-major
    load = {"step": "load", "seconds": geometry["load_seconds"], "tokens": 0, "peak_rss_mb": float("nan")}
    load["read_seconds"] = float("nan") if generated else read_seconds(model_dir)
    rows = [load, geometry]
    for row in rows:
        row.update(model=name, dtype="bfloat16", gpu_name=gpu_name, torch=torch.__version__, quick=quick)
        row.update(weights=WEIGHTS[name], max_device_mb=budget_mb)
        row["peak_host_mb"] = row.pop("peak_rss_mb")
        row["tokens_per_s"] = row["tokens"] / row["seconds"] if row["tokens"] else float("nan")
    return rows


COLUMNS = [
    "model",
    "dtype",
    "step",
    "tokens",
    "batches",
    "tokens_per_s",
    "overhead_b_over_a",
    "padding_fraction",
    "peak_host_mb",
    "peak_gpu_mb",
    "gpu_name",
    "torch",
    "quick",
    "seconds",
    "warm_up_seconds",
    "mfu",
    "load_seconds",
    "read_seconds",
    "weights",
    "max_device_mb",
    "prepare_seconds",
    "batches_seconds",
    "hash_wait_seconds",
]


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--models", nargs="+", choices=list(MODES["gpu"]["models"]), help="default: every model")
    args = parser.parse_args(argv)
    mode = MODES["quick" if args.quick else "gpu"]
    if set(args.models or ()) - set(mode["models"]):
        parser.error(f"--quick runs only {', '.join(mode['models'])}")
    names = [name for name in mode["models"] if name in (args.models or mode["models"])]
    gpu_name = device_name(args.device)
    earlier = earlier_rows(args.out / "gpu.csv", gpu_name, args.quick)
    if earlier is None and args.models:
        sys.exit(
            f"bench/gpu.py: {args.out / 'gpu.csv'} cannot be read, or holds rows of another GPU, torch version or mode "
            "than this run's "
            f"({gpu_name}, torch {torch.__version__}{', --quick' if args.quick else ''}): run every model (no "
            "--models), or give another --out"
        )
    options = measured_options(args) + (["--models", *names] if args.models else [])
    if earlier is None:  # every model runs: the rows of the other GPU, torch or mode go
        earlier = pd.DataFrame(columns=COLUMNS)
    work, shard, small = corpora(args, mode)
    dirs = build_models(work, args.quick, mode["shard_size"], names)
    rows = []
    for name in names:
        for dtype in mode["models"][name]:
            shard_of_model = small if name in WEIGHTS else shard
            if WEIGHTS.get(name, "loaded whole") == "loaded whole":
                new = rows_for(name, dirs[name], shard_of_model, dtype, args.device, gpu_name, args.quick)
            else:
                new = streamed_rows_for(name, dirs[name], shard_of_model, args.device, gpu_name, args.quick)
            rows += new
            print(pd.DataFrame(new).reindex(columns=COLUMNS).to_string(), flush=True)
            # after every model and dtype: a run cut short keeps its rows, and the earlier ones not yet re-measured
            write_report(earlier, rows, args.out, gpu_name, command(__file__, *options))


def earlier_rows(path: Path, gpu_name: str, quick: bool) -> pd.DataFrame | None:
    """The rows of an earlier run in ``path``, when it ran on this GPU, torch version and mode (empty when there is
    no such file); None when it did not."""
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    try:
        rows = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):  # a run killed while it wrote the file
        return None
    same = {"gpu_name": gpu_name, "torch": torch.__version__, "quick": quick}
    if any(column not in rows or (rows[column] != value).any() for column, value in same.items()):
        return None
    return rows.reindex(columns=COLUMNS)


def write_report(earlier: pd.DataFrame, rows: list[dict], out: Path, gpu_name: str, made_by: str) -> None:
    """gpu.csv and gpu.md in ``out``: ``rows``, and the ``earlier`` rows of every (model, dtype) that ``rows`` do
    not measure, in the order of MODES["gpu"]; the report names ``made_by``, the command (with the options that
    change what is measured), and the (model, dtype) pairs kept from before."""
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    measured = set(zip(table["model"], table["dtype"]))
    kept = earlier.loc[[pair not in measured for pair in zip(earlier["model"], earlier["dtype"])], :]
    if len(kept):
        table = pd.concat([kept, table])
    order = {name: i for i, name in enumerate(MODES["gpu"]["models"])}
    table = table.sort_values("model", key=lambda models: models.map(order), kind="stable")
    pairs = ", ".join(f"{model} {dtype}" for model, dtype in dict.fromkeys(zip(kept["model"], kept["dtype"])))
    text = (
        f"# GPU benchmark ({gpu_name}, torch {table['torch'].iloc[0]})\n\n`{made_by}`; each step in a fresh "
        "process; see bench/gpu.py for the steps."
        + (f" The rows of {pairs} are from an earlier run of the same GPU, torch and mode." if pairs else "")
        + "\n\n"
        + markdown(table)
        + "\n"
    )
    write_results(out, {"gpu.csv": table, "gpu.md": text}, echo=False)


if __name__ == "__main__":
    main()
