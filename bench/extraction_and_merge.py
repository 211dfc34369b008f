"""Benchmark of the extraction and the merge; writes report.md and results.csv.

    python -m bench extraction_and_merge --quick    # bert-base (--large's model) in a tiny shape: checks the script
    python -m bench extraction_and_merge            # CPU: 3 rounds on ≈ 30 k tokens, bert-base-scale merge (≈ 25 min)
    python -m bench extraction_and_merge --large    # CPU: bert-base on a 200 k-token shard, (a) and (b) (≈ 15 min)
    python -m bench extraction_and_merge --device cuda  # GPU: bert-base, gpt2-medium and a 1.2B-parameter GPT-2

On one machine, over the same token-budget batches of a synthetic Zipf corpus,
with random-weight models of real sizes (same cost as trained ones):

    (a) forward      the bare forward pass with all hidden states (the limit), after a warm-up batch
    (b) extraction   our job end to end, shard Parquet → partial sums Parquet, less its model loading
                     and a warm-up batch (both timed in its process); the paper's sums alone, and
                     with the workflow's default geometry sums
    (c) reference    the reference code's algorithm: forward, every layer copied to the host, a running
                     mean per token and layer in a Python dict (checked to give our Q and V)
    (d) merge        merge + layer statistics of synthetic partials as shards, layers, d and types grow
    (e) precision    bf16 forward vs fp32: speed, and the error it puts on Q, M, V and the per-layer statistics

Each step runs in a fresh process (forked from a server that imported the libraries once), so peak RSS is the
step's own (the merge's without torch imported).
A round runs every step of a model one after the other, and each ratio comes from one round, side by
side; the report gives the median over the rounds (3 outside --quick and --large) with the range.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ctxvar.stats.layers import layers_table
from ctxvar.stats.merge import merge_partials

import merging
import steps
from harness import Options, command, in_fresh_process, markdown, median_range, spread, write_results
from synthetic import corpus_folder, random_model

OPTIONS = Options(
    out="report.md and results.csv",
    quick="tiny shapes, small corpus and merge, one round: checks the script",
    device="cpu",
    rounds="every step",
    default_rounds=None,  # the mode's (MODES)
)

ARCHS = {  # random-weight models with the published shapes
    "bert-base": {"arch": "bert", "hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072},
    "gpt2": {"arch": "gpt2", "hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072},
    "gpt2-medium": {"arch": "gpt2", "hidden_size": 1024, "num_layers": 24, "num_heads": 16, "intermediate_size": 4096},
    "gpt2-1.2b": {"arch": "gpt2", "hidden_size": 2048, "num_layers": 24, "num_heads": 16, "intermediate_size": 8192},
}
EXTRACTION_STEPS = (
    "(a) forward",
    "(b) extraction",
    "(b) extraction + geometry",
    "(c) reference loop",
    "(e) extraction bf16",
    "(e) forward bf16",
)
QUICK_SHAPE = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 128}
MODES = {
    "quick": {  # bf16 matmuls on a CPU without bf16 units run at a small fraction of fp32's: real shapes take hours
        "sentences": 120,
        "archs": ["bert-base"],
        "shape": QUICK_SHAPE,
        "rounds": 1,
        "merge": (3000, 2000, 13, 128, [1, 2, 4, 8]),
    },
    "cpu": {
        "sentences": 1500,
        "archs": ["bert-base", "gpt2"],
        "rounds": 3,
        "merge": (25000, 15000, 13, 768, [1, 2, 4, 8]),
    },
    "large": {  # a shard of realistic size for the overhead of the sums against the forward pass
        "sentences": 12000,
        "archs": ["bert-base"],
        "rounds": 1,
        "steps": EXTRACTION_STEPS[:3],
        "merge": None,
    },
    "gpu": {
        "sentences": 60000,
        "archs": ["bert-base", "gpt2-medium", "gpt2-1.2b"],
        "rounds": 3,
        "merge": (25000, 15000, 13, 768, [1, 2, 4, 8]),
    },
}
RATIOS = {  # ratio column: (numerator step, denominator step), of seconds per token within a round
    "overhead_b_over_a": {
        "(b) extraction": "(a) forward",
        "(b) extraction + geometry": "(a) forward",
        "(e) extraction bf16": "(e) forward bf16",
    },
    "speedup_c_over_b": {"(c) reference loop": "(b) extraction"},
}


def extraction_rows(
    name: str, folder: Path, device: str, rounds: int, wanted=EXTRACTION_STEPS, shape: dict | None = None
) -> list[dict]:
    """Per round, each of the ``wanted`` steps in a fresh process, in turn, with the round's ratios; ``shape``
    (hidden size, layers, heads, intermediate size) replaces the architecture's published one."""
    model_dir = str(random_model(folder, name, **{**ARCHS[name], **(shape or {})}))
    shard = str(folder / "shard.parquet")
    partial = {stem: str(folder / f"{name}-{stem}.parquet") for stem in ("fp32", "geometry", "bf16", "reference")}
    calls = {
        "(a) forward": (steps.forward, model_dir, shard, device),
        "(b) extraction": (steps.extraction, model_dir, shard, partial["fp32"], device),
        "(b) extraction + geometry": (steps.extraction, model_dir, shard, partial["geometry"], device, "float32", True),
        "(c) reference loop": (steps.reference_loop, model_dir, shard, partial["reference"], device),
        "(e) extraction bf16": (steps.extraction, model_dir, shard, partial["bf16"], device, "bfloat16"),
        "(e) forward bf16": (steps.forward, model_dir, shard, device, "bfloat16"),
    }
    rows = []
    for round_ in range(rounds):
        measured = {step: in_fresh_process(*calls[step]) for step in wanted}
        for step, row in measured.items():
            if "extraction" in step:  # the job less its model loading and warm-up batch, which (a) does not time
                row["seconds_less_load"] = row["seconds"] - row["load_seconds"] - row["warm_up_seconds"]
            row.update(model=name, device=device, round=round_, step=step)
            row["tokens_per_s"] = row["tokens"] / row.get("seconds_less_load", row["seconds"])
        for column, pairs in RATIOS.items():
            for step, base in pairs.items():
                if step in measured and base in measured:
                    measured[step][column] = measured[base]["tokens_per_s"] / measured[step]["tokens_per_s"]
        if "(c) reference loop" in measured:
            measured["(c) reference loop"]["loop_share"] = 1 - (
                measured["(c) reference loop"]["tokens_per_s"] / measured["(a) forward"]["tokens_per_s"]
            )
        rows += measured.values()
    for stem in ("fp32", "bf16"):  # per-type Q, M, V of the last round, for the comparisons below
        if Path(partial[stem]).exists():
            merge_partials([partial[stem]], *merged(folder, name, stem))
    if "(c) reference loop" in measured:
        measured["(c) reference loop"].update(reference_agreement(folder, name))
    return rows


def summary(extraction: pd.DataFrame) -> pd.DataFrame:
    """Per model and step: the median over the rounds of seconds, tokens/s and each ratio, with its range, and the
    largest padding fraction and peaks."""
    measured = [column for column in ("seconds", "tokens_per_s", *RATIOS, "loop_share") if column in extraction]
    peaks = [column for column in ("padding_fraction", "peak_rss_mb", "peak_gpu_mb") if column in extraction]
    before = {"tokens": ("tokens", "first"), "rounds": ("tokens", "size")}
    table = spread(extraction, ["model", "step"], measured, before=before, after={c: (c, "max") for c in peaks})
    return table.assign(**{c: median_range(table, c) for c in measured})[[*before, *measured, *peaks]].reset_index()


def merged(folder: Path, name: str, stem: str) -> tuple[Path, Path]:
    """The merged stats and tokens files of the partial ``{name}-{stem}.parquet``."""
    return folder / f"{name}-{stem}-sums.parquet", folder / f"{name}-{stem}-tokens.parquet"


def reference_agreement(folder: Path, name: str) -> dict:
    """How far the reference loop's float32 running means are from our float64 sums, over (layer, type) with
    n ≥ 10: the largest |ΔQ|/Q and |ΔV|/Q (V = Q − M inherits Q's rounding; V is 0 where there is no context)."""
    ours = pd.read_parquet(merged(folder, name, "fp32")[1], columns=["layer", "token", "n", "Q", "V"])
    both = ours.merge(
        pd.read_parquet(folder / f"{name}-reference.parquet"), on=["layer", "token"], suffixes=("", "_reference")
    )
    if len(both) != len(ours) or not (both["n"] == both["n_reference"]).all():
        raise RuntimeError(f"{name}: the reference loop and the extraction counted different tokens")
    both = both[both["n"] >= 10]
    return {
        f"{column}_max_diff_over_Q_reference": float(
            (np.abs(both[f"{column}_reference"] - both[column]) / both["Q"]).max()
        )
        for column in ("Q", "V")
    }


def precision_rows(name: str, folder: Path) -> list[dict]:
    """bf16 against fp32 on the same shard: relative error of Q, M, V per (layer, type) with n ≥ 10, and
    absolute error of the per-layer statistics."""
    results = {}
    for dtype in ("fp32", "bf16"):
        stats, tokens = merged(folder, name, dtype)
        results[dtype] = (pd.read_parquet(tokens), layers_table(stats, 1, 5))
    (t32, l32), (t16, l16) = results["fp32"], results["bf16"]
    keep = (t32["n"] >= 10).to_numpy()
    row = {"model": name, "types_compared": int(keep.sum() // l32.shape[0])}
    for column in ("Q", "M", "V"):
        exact, approx = t32[column].to_numpy()[keep], t16[column].to_numpy()[keep]
        nonzero = exact > 0  # V = 0 for types that only occur where the context cannot reach (position 0 of layer 0)
        error = np.abs(approx[nonzero] - exact[nonzero]) / exact[nonzero]
        row[f"{column}_median_rel_error"], row[f"{column}_max_rel_error"] = float(np.median(error)), float(error.max())
    for column in ("cv_Q", "slope_VM", "r2_VM"):
        row[f"{column}_max_abs_error"] = float(np.nanmax(np.abs(l16[column] - l32[column])))
    share16, share32 = l16["M"] / l16["Q"], l32["M"] / l32["Q"]
    row["M_over_Q_max_abs_error"] = float(np.nanmax(np.abs(share16 - share32)))
    return [row]


def merge_rows(folder: Path, vocabulary: int, types: int, n_layers: int, d: int, shard_counts: list[int]) -> list[dict]:
    partials = merging.synthetic_partials(folder, max(shard_counts), vocabulary, types, n_layers, d)
    rows = []
    for n in shard_counts:
        out = folder / f"merged{n}"
        out.mkdir()
        job = {
            step: run_json([sys.executable, merging.__file__, step, str(out), *partials[:n]])
            for step in ("merge", "layers")
        }
        rows.append(
            {
                "step": "(d) merge, then layer statistics",
                "shards": n,
                "types_per_shard": types,
                "vocabulary": vocabulary,
                "layers": n_layers,
                "d": d,
                "partials_gb": n * 8 * types * n_layers * (d + 2) / 1e9,
                "merge_seconds": job["merge"]["seconds"],
                "merge_peak_rss_mb": job["merge"]["peak_rss_mb"],
                "layers_seconds": job["layers"]["seconds"],
                "layers_peak_rss_mb": job["layers"]["peak_rss_mb"],
            }
        )
    return rows


def run_json(argv: list[str]) -> dict:
    return json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()[-1])


def report(
    extraction: pd.DataFrame, precision: pd.DataFrame, merging: pd.DataFrame, device: str, mode: str, seconds: float
) -> str:
    cpu = platform.processor() or platform.machine()
    flags = {"quick": ["--quick"], "large": ["--large"]}.get(mode, [])
    flags += ["--device", "cuda"] if device == "cuda" else []
    reference = (
        extraction.dropna(subset=["Q_max_diff_over_Q_reference"])
        if "Q_max_diff_over_Q_reference" in extraction
        else extraction.iloc[:0]
    )
    lines = [
        "# ctxvar benchmark",
        "",
        f"`{command(__file__, *flags)}`: "
        f"{time.strftime('%Y-%m-%d')}, {cpu}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, "
        f"device {device}{' (' + torch.cuda.get_device_name() + ')' if device == 'cuda' else ''}; ran {seconds:.0f} s.",
        "",
        *(
            [f"--quick: every model has the tiny shape {QUICK_SHAPE}, not its own; the run checks the script.", ""]
            if mode == "quick"
            else []
        ),
        "## Extraction: (a) forward, (b) our job less model loading, (c) reference-style loop, (e) bf16",
        "",
        markdown(summary(extraction)),
        "",
        "Each cell: the median over the rounds (min–max). A round runs a model's steps one after the other, each "
        "in a fresh process, and every ratio is taken within one round: overhead_b_over_a is (b)'s seconds per "
        "token over (a)'s, (e) extraction's over (e) forward's; speedup_c_over_b is (c)'s over (b)'s; loop_share "
        "the part of (c) outside the forward pass. (b) + geometry: the workflow's default geometry sums as well "
        "(Σxxᵀ, Σ x/‖x‖, the TwoNN sample). Every run is in results.csv.",
        "",
    ]
    if not reference.empty:
        lines += [
            "(c)'s float32 running means against (b)'s float64 sums, types with n ≥ 10, largest difference over Q: "
            + "; ".join(
                f"{row.model}: Q {row.Q_max_diff_over_Q_reference:.1e}, V {row.V_max_diff_over_Q_reference:.1e}"
                for row in reference.itertuples()
            )
            + ".",
            "",
        ]
    if not precision.empty:
        lines += ["## Precision: bf16 forward against fp32 (sums float64 in both)", "", markdown(precision), ""]
    if not merging.empty:
        lines += ["## Merge: (d) merge + layers.csv of synthetic partials", "", markdown(merging), ""]
    if device != "cuda":
        lines += ["GPU rows: not measured (no GPU on this machine).", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--large", action="store_true", help="bert-base on a ≥ 200 k-token shard: (a), (b), (b)+g")
    parser.add_argument("--models", nargs="+", choices=list(ARCHS), help="architectures to run (default: the mode's)")
    args = parser.parse_args(argv)
    if args.quick and args.large:
        parser.error("argument --large: not allowed with argument --quick")
    mode = "quick" if args.quick else "large" if args.large else "gpu" if args.device == "cuda" else "cpu"
    spec, start = MODES[mode], time.perf_counter()
    with corpus_folder(spec["sentences"]) as (folder, _):
        extraction, precision, merging = [], [], []
        wanted, rounds = spec.get("steps", EXTRACTION_STEPS), args.rounds or spec["rounds"]
        for name in args.models or spec["archs"]:
            extraction += extraction_rows(name, folder, args.device, rounds, wanted, spec.get("shape"))
            if "(e) extraction bf16" in wanted:
                precision += precision_rows(name, folder)
        if spec["merge"] is not None:
            merge_folder = folder / "merge"
            merge_folder.mkdir()
            merging = merge_rows(merge_folder, *spec["merge"])
    frames = [pd.DataFrame(rows) for rows in (extraction, precision, merging)]
    every_run = pd.concat([f.assign(table=name) for f, name in zip(frames, ["extraction", "precision", "merge"])])
    suffix = "-large" if mode == "large" else ""
    text = report(*frames, args.device, mode, time.perf_counter() - start)
    write_results(args.out, {f"report{suffix}.md": text, f"results{suffix}.csv": every_run})


if __name__ == "__main__":
    sys.exit(main())
