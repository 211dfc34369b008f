"""Benchmark of the extraction and the merge; writes report.md and results.csv.

    python bench/run.py --quick            # a few minutes on a 2-core CPU
    python bench/run.py                    # CPU: more tokens, bert-base-scale merge (≈ 10 GB of partials on disk)
    python bench/run.py --device cuda      # GPU: bert-base, gpt2-medium and a 1.2B-parameter GPT-2

On one machine, over the same token-budget batches of a synthetic Zipf corpus,
with random-weight models of real sizes (same cost as trained ones):

    (a) forward      the bare forward pass with all hidden states (the limit)
    (b) extraction   our job end to end, shard Parquet → partial sums Parquet, less model loading;
                     the paper's sums alone, and with the workflow's default geometry sums
    (c) reference    the reference code's algorithm: forward, every layer copied to the host, a running
                     mean per token and layer in a Python dict (checked to give our Q and V)
    (d) merge        merge + layer statistics of synthetic partials as shards, layers, d and types grow
    (e) precision    bf16 forward vs fp32: speed, and the error it puts on Q, M, V and the per-layer statistics

Each step runs in a fresh process, so peak RSS is the step's own (the merge's without torch imported);
(a), (b) and (c), whose ratios are the targets, are the fastest of two runs outside --quick.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import merging
import numpy as np
import pandas as pd
import pyarrow as pa
import steps
import torch

from ctxvar.corpus.sentences import synthetic_sentences
from ctxvar.corpus.shards import write_shards
from ctxvar.io import write_table
from ctxvar.models.random_init import build_random_model
from ctxvar.stats.layers import layers_table
from ctxvar.stats.merge import merge_partials

ARCHS = {  # random-weight models with the published shapes
    "bert-base": {"arch": "bert", "hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072},
    "gpt2": {"arch": "gpt2", "hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072},
    "gpt2-medium": {"arch": "gpt2", "hidden_size": 1024, "num_layers": 24, "num_heads": 16, "intermediate_size": 4096},
    "gpt2-1.2b": {"arch": "gpt2", "hidden_size": 2048, "num_layers": 24, "num_heads": 16, "intermediate_size": 8192},
}
MODES = {
    "quick": {
        "sentences": 120,
        "archs": ["bert-base", "gpt2"],
        "repeats": 1,
        "merge": (3000, 2000, 13, 128, [1, 2, 4, 8]),
    },
    "cpu": {
        "sentences": 1500,
        "archs": ["bert-base", "gpt2"],
        "repeats": 2,
        "merge": (25000, 15000, 13, 768, [1, 2, 4, 8]),
    },
    "gpu": {
        "sentences": 60000,
        "archs": ["bert-base", "gpt2-medium", "gpt2-1.2b"],
        "repeats": 2,
        "merge": (25000, 15000, 13, 768, [1, 2, 4, 8]),
    },
}
CORPUS = {"vocab_size": 20000, "zipf_exponent": 1.1, "mean_words": 14}


def in_fresh_process(function, *args, **kwargs) -> dict:
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args, **kwargs).result()


def fastest(repeats: int, function, *args) -> dict:
    """The fastest of ``repeats`` runs, each in a fresh process (a shared machine's noise only slows runs down)."""
    return min((in_fresh_process(function, *args) for _ in range(repeats)), key=lambda run: run["seconds"])


def write_corpus(folder: Path, n_sentences: int, seed: int = 0) -> Path:
    """One shard of synthetic sentences (sentence_id, text, chunk) as the workflow writes them."""
    texts = synthetic_sentences({"n_sentences": n_sentences, **CORPUS}, seed)
    texts = [t for t in texts if len(t.split(" ")) < 64]
    write_table(pa.table({"sentence_id": np.arange(len(texts)), "text": texts}), folder / "sentences.parquet")
    # chunks of similar length, as a real corpus gives (the paper's: 1,024 of ≈ 92,000 sentences per shard)
    write_shards(folder / "sentences.parquet", [folder / "shard.parquet"], chunk_sentences=max(8, len(texts) // 64))
    return folder / "shard.parquet"


def extraction_rows(name: str, folder: Path, device: str, repeats: int) -> list[dict]:
    model_dir = folder / name
    texts = pd.read_parquet(folder / "sentences.parquet")["text"].tolist()
    build_random_model({"id": name, **ARCHS[name], "vocab_size": 8000, "seed": 0}, texts, model_dir)
    model_dir, shard = str(model_dir), str(folder / "shard.parquet")
    load = fastest(repeats, steps.load_model, model_dir, device)
    rows = [{"step": "(a) forward", **fastest(repeats, steps.forward, model_dir, shard, device)}]
    for step, runs, stem, args in [
        ("(b) extraction", repeats, "fp32", ()),  # only (b)'s ratios are targets: repeated
        ("(b) extraction + geometry", 1, "geometry", ("float32", True)),
        ("(e) extraction bf16", 1, "bf16", ("bfloat16",)),
    ]:
        b = fastest(runs, steps.extraction, model_dir, shard, str(folder / f"{name}-{stem}.parquet"), device, *args)
        rows.append(
            {"step": step, **b, "seconds_less_load": b["seconds"] - load["seconds"], "load_seconds": load["seconds"]}
        )
    for stem in ("fp32", "bf16"):  # per-type Q, M, V for the comparisons below
        merge_partials([folder / f"{name}-{stem}.parquet"], *merged(folder, name, stem))
    c = fastest(repeats, steps.reference_loop, model_dir, shard, str(folder / f"{name}-reference.parquet"), device)
    rows.append({"step": "(c) reference loop", **c, **reference_agreement(folder, name)})
    rows.append({"step": "(e) forward bf16", **in_fresh_process(steps.forward, model_dir, shard, device, "bfloat16")})
    for row in rows:
        row.update(model=name, device=device, tokens_per_s=row["tokens"] / row.get("seconds_less_load", row["seconds"]))
    (a, b, geometry, b16, c, a16), per_token = rows, (lambda row: 1 / row["tokens_per_s"])
    b["overhead_b_over_a"], geometry["overhead_b_over_a"] = (
        per_token(b) / per_token(a),
        per_token(geometry) / per_token(a),
    )
    b16["overhead_b_over_a"] = per_token(b16) / per_token(a16)
    c["speedup_c_over_b"], c["loop_share"] = per_token(c) / per_token(b), 1 - per_token(a) / per_token(c)
    return rows


def merged(folder: Path, name: str, stem: str) -> tuple[Path, Path]:
    """The merged stats and tokens files of the partial ``{name}-{stem}.parquet``."""
    return folder / f"{name}-{stem}-stats.parquet", folder / f"{name}-{stem}-tokens.parquet"


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


def run_json(command: list[str]) -> dict:
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-1])


def markdown(frame: pd.DataFrame) -> str:
    return frame.to_markdown(index=False, floatfmt=".3g") if not frame.empty else "(none)"


def report(
    extraction: pd.DataFrame, precision: pd.DataFrame, merging: pd.DataFrame, device: str, mode: str, seconds: float
) -> str:
    cpu = platform.processor() or platform.machine()
    lines = [
        "# ctxvar benchmark",
        "",
        f"`python bench/run.py{' --quick' if mode == 'quick' else ''}{' --device cuda' if device == 'cuda' else ''}`: "
        f"{time.strftime('%Y-%m-%d')}, {cpu}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, "
        f"device {device}{' (' + torch.cuda.get_device_name() + ')' if device == 'cuda' else ''}; ran {seconds:.0f} s.",
        "",
        "## Extraction: (a) forward, (b) our job less model loading, (c) reference-style loop, (e) bf16",
        "",
        markdown(
            extraction[
                [
                    c
                    for c in [
                        "model",
                        "step",
                        "tokens",
                        "seconds",
                        "seconds_less_load",
                        "tokens_per_s",
                        "overhead_b_over_a",
                        "speedup_c_over_b",
                        "loop_share",
                        "padding_fraction",
                        "peak_rss_mb",
                        "peak_gpu_mb",
                        "Q_max_diff_over_Q_reference",
                        "V_max_diff_over_Q_reference",
                    ]
                    if c in extraction
                ]
            ]
        ),
        "",
        "(b) + geometry: the workflow's default geometry sums as well (Σxxᵀ, Σ x/‖x‖, the TwoNN sample). "
        "(e) extraction bf16: overhead against (e) forward bf16. The reference columns: the largest difference "
        "of Q and of V, over Q, between (c)'s float32 running means and (b)'s float64 sums, types with n ≥ 10.",
        "",
        "## Precision: bf16 forward against fp32 (sums float64 in both)",
        "",
        markdown(precision),
        "",
        "## Merge: (d) merge + layers.csv of synthetic partials",
        "",
        markdown(merging),
        "",
    ]
    if device != "cuda":
        lines += ["GPU rows: not measured (no GPU on this machine).", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpus and merge: a few minutes on a 2-core CPU")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--models", nargs="+", choices=list(ARCHS), help="architectures to run (default: the mode's)")
    parser.add_argument("--out", default="bench/results", help="folder for report.md and results.csv")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else ("gpu" if args.device == "cuda" else "cpu")
    spec, start = MODES[mode], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_corpus(folder, spec["sentences"])
        extraction, precision = [], []
        for name in args.models or spec["archs"]:
            extraction += extraction_rows(name, folder, args.device, spec["repeats"])
            precision += precision_rows(name, folder)
        merge_folder = folder / "merge"
        merge_folder.mkdir()
        merging = merge_rows(merge_folder, *spec["merge"])
    frames = [pd.DataFrame(rows) for rows in (extraction, precision, merging)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(report(*frames, args.device, mode, time.perf_counter() - start))
    pd.concat([f.assign(table=name) for f, name in zip(frames, ["extraction", "precision", "merge"])]).to_csv(
        out / "results.csv", index=False
    )
    print((out / "report.md").read_text())


if __name__ == "__main__":
    sys.exit(main())
