"""Peak disk of a whole run against its merged sums, measured: writes disk.md and disk.csv.

    python bench/disk.py                       # config/minilm.yaml with 8 shards: ≈ 3 min on a 2-core CPU
    python bench/disk.py --shards 4 --config config/demo.yaml

Runs the workflow in a temporary folder with partials deleted once merged (``keep_partials: false``, the
default) and samples the size of its ``results/{run}/`` every 0.5 s (the models the run builds or unpacks
excluded: they are inputs, not sums). The merged sums are every model's ``stats*.parquet``; the report gives
the peak against them, and the merged sums per (type, layer), per type and per token, from each ``run.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]


def folder_bytes(folder: Path, exclude: str = "models") -> int:
    """Bytes of the files below ``folder``, except below ``folder/exclude``; files vanishing meanwhile are skipped."""
    total = 0
    for root, dirs, files in os.walk(folder):
        if Path(root) == folder and exclude in dirs:
            dirs.remove(exclude)
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


class PeakSampler(threading.Thread):
    """Samples ``folder_bytes(run_folder)`` and the partials' bytes every ``interval`` seconds until stopped."""

    def __init__(self, run_folder: Path, interval: float = 0.5):
        super().__init__(daemon=True)
        self.run_folder, self.interval, self.stopped = run_folder, interval, threading.Event()
        self.peak, self.partials_at_peak = 0, 0

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            if self.run_folder.exists():
                size = folder_bytes(self.run_folder)
                if size > self.peak:
                    self.peak, self.partials_at_peak = size, folder_bytes(self.run_folder / "partials", exclude="")


def measure(config_path: Path, shards: int, chunk_sentences: int, workdir: Path) -> dict:
    config = yaml.safe_load(config_path.read_text())
    config.update(run="disk", shards=shards, chunk_sentences=chunk_sentences, keep_partials=False)
    (workdir / "disk.yaml").write_text(yaml.safe_dump(config))
    command = ["snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir / "run"), "--cores", "2"]
    command += ["--configfile", str(workdir / "disk.yaml")]
    run_folder = workdir / "run" / "results" / "disk"
    sampler = PeakSampler(run_folder)
    sampler.start()
    start = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    sampler.stopped.set()
    sampler.join()
    if finished.returncode != 0:
        raise RuntimeError(f"the run failed:\n{finished.stderr[-3000:]}")
    rows = []
    for model_folder in sorted(p for p in run_folder.iterdir() if (p / "run.json").exists()):
        provenance = json.loads((model_folder / "run.json").read_text())
        stats = (model_folder / "stats.parquet").stat().st_size
        merged = sum(p.stat().st_size for p in model_folder.glob("stats*.parquet"))
        rows.append(
            {
                "model": model_folder.name,
                "types": provenance["n_types"],
                "tokens": provenance["n_tokens"],
                "layers": provenance["n_layers"],
                "d": provenance["d"],
                "merged_bytes": merged,
                "stats_bytes_per_type_layer": stats / (provenance["n_types"] * provenance["n_layers"]),
                "merged_bytes_per_type": merged / provenance["n_types"],
                "merged_bytes_per_token": merged / provenance["n_tokens"],
            }
        )
    merged = sum(row["merged_bytes"] for row in rows)
    run = {
        "config": str(config_path.relative_to(REPO) if config_path.is_relative_to(REPO) else config_path),
        "shards": shards,
        "chunk_sentences": chunk_sentences,
        "seconds": seconds,
        "peak_bytes": sampler.peak,
        "partials_bytes_at_peak": sampler.partials_at_peak,
        "final_bytes": folder_bytes(run_folder),
        "merged_bytes": merged,
        "peak_over_merged": sampler.peak / merged,
    }
    return {"run": run, "models": rows}


def report(result: dict) -> str:
    run = result["run"]
    return "\n".join(
        [
            "# Peak disk of a run against its merged sums",
            "",
            f"`python bench/disk.py --config {run['config']} --shards {run['shards']}`: {time.strftime('%Y-%m-%d')}; "
            f"chunk_sentences {run['chunk_sentences']}, partials deleted once merged, sizes sampled every 0.5 s "
            f"(built and unpacked models excluded); the run took {run['seconds']:.0f} s.",
            "",
            pd.DataFrame([run]).drop(columns=["config"]).to_markdown(index=False, floatfmt=".3g"),
            "",
            pd.DataFrame(result["models"]).to_markdown(index=False, floatfmt=".4g"),
            "",
            "Merged sums: each model's stats.parquet (Σx, Σ‖x‖², n and, with geometry.cosine, Σ x/‖x‖ per type and "
            "layer), stats.moments.parquet (Σxxᵀ) and stats.sample.parquet (the TwoNN points).",
            "",
        ]
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "config" / "minilm.yaml"), type=Path)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--chunk-sentences", type=int, default=128)
    parser.add_argument("--out", default="bench/results", help="folder for disk.md and disk.csv")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ctxvar-disk-") as tmp:
        result = measure(args.config.resolve(), args.shards, args.chunk_sentences, Path(tmp))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{**result["run"], **row} for row in result["models"]]).to_csv(out / "disk.csv", index=False)
    (out / "disk.md").write_text(report(result))
    print((out / "disk.md").read_text())


if __name__ == "__main__":
    sys.exit(main())
