"""Layer-major against whole-model extraction jobs: time and peak memory, and that their sums are the same bits.

    python -m bench extraction_order                  # gpt2- and bert-shaped models (d = 256, 8 layers), 3 rounds
    python -m bench extraction_order --quick          # d = 64, 2 layers, 120 sentences, one round
    python -m bench extraction_order --device cuda

Both orders run the same extraction job (``extract_shard``, end to end: model loading, tokenization, the
passes, the partial file written) on one synthetic shard, with the workflow's default geometry sums
(config.schema.yaml), each job in a fresh process. A round runs every order of a model once, alternating
which goes first. Per job: wall seconds, peak resident set (``ru_maxrss``) and, on CUDA, peak device memory
allocated, and CPU seconds (the process's user + system time: on a shared machine, less sensitive to
the other processes than wall seconds). The run stops when the two orders' partial files differ. Writes
``extraction_order.csv`` and ``extraction_order.md`` under ``--out`` (default bench/results).
"""

from __future__ import annotations

import platform
import sys
import time

import pandas as pd
import pyarrow.parquet as pq

from ctxvar.extraction.extract import extract_shard
from ctxvar.stats.declarations import sums_files

import steps
from harness import Options, command, in_fresh_process, median_range, spread, write_results
from synthetic import corpus_folder, corpus_texts, random_model

OPTIONS = Options(
    out="extraction_order.md and extraction_order.csv",
    quick="d = 64, 2 layers, 120 sentences, one round",
    device="cpu",
    devices=None,
    rounds="both orders",
)

ORDERS = ("layer_major", "whole_model")
SHAPE = {"hidden_size": 256, "num_layers": 8, "num_heads": 4, "intermediate_size": 1024}
QUICK_SHAPE = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 128}


def job(model_dir: str, shard: str, out: str, device: str, order: str, threads: int) -> dict:
    """One extraction job with ``extraction_order`` = ``order``; its seconds and peaks."""
    import torch

    torch.set_num_threads(threads)
    settings = steps.settings_for(model_dir, device, geometry=steps.default_geometry(), extraction_order=order)
    start, cpu_start = time.perf_counter(), time.process_time()
    extract_shard(shard, out, settings)  # the default geometry's moments and sample files beside ``out``
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, **steps.peaks(device)}


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--sentences", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    shape = QUICK_SHAPE if args.quick else SHAPE
    sentences = args.sentences or (120 if args.quick else 3000)
    rows = []
    with corpus_folder(sentences) as (folder, shard):
        kept = len(corpus_texts(folder))
        for arch in ("gpt2", "bert"):
            model_dir = random_model(folder, arch, arch=arch, **shape)
            for round_ in range(args.rounds):
                order = ORDERS if round_ % 2 == 0 else ORDERS[::-1]
                outs = {name: str(folder / f"{arch}-{name}.parquet") for name in ORDERS}
                for name in order:
                    row = in_fresh_process(job, str(model_dir), str(shard), outs[name], args.device, name, args.threads)
                    rows.append({"model": arch, "order": name, "round": round_, **row})
                files = {
                    name: [out, *sums_files(out.removesuffix(".parquet"), steps.default_geometry()).values()]
                    for name, out in outs.items()
                }
                for major, whole in zip(files["layer_major"], files["whole_model"]):
                    if not pq.read_table(major).equals(pq.read_table(whole)):
                        sys.exit(f"{arch}: the layer-major and whole-model files {major} and {whole} differ")
    table = pd.DataFrame(rows)
    after = {"peak_rss_mb": ("peak_rss_mb", "median")}
    summary = spread(table, ["model", "order"], ["seconds", "cpu_seconds"], after=after, sort=True)
    seconds, cpu = (median_range(summary, column, ".2f") for column in ("seconds", "cpu_seconds"))
    lines = [
        "# Layer-major against whole-model extraction",
        "",
        f"`{command(__file__, *(argv if argv is not None else sys.argv[1:]))}` on "
        f"{platform.machine()} ({args.device}, {args.threads} torch thread(s)): {sentences} sentences "
        f"({kept} kept), shape {shape}, default geometry, {args.rounds} round(s), medians (range). "
        "Both orders gave the same partial files, bit for bit.",
        "",
        "| model | order | seconds | CPU seconds | peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for (model, order), wall, used, peak in zip(summary.index, seconds, cpu, summary["peak_rss_mb"]):
        lines.append(f"| {model} | {order} | {wall} | {used} | {peak:.0f} |")
    write_results(args.out, {"extraction_order.csv": table, "extraction_order.md": "\n".join(lines) + "\n"})


if __name__ == "__main__":
    main()
