"""Peak disk of a whole run against its merged sums, measured: writes peak_disk.md, peak_disk.csv and
peak_disk_models.csv.

    python -m bench peak_disk                       # config/minilm.yaml, 8 shards, both merge modes × 3: ≈ 15 min
    python -m bench peak_disk --shards 4 --config config/demo.yaml --repeats 1
    python -m bench peak_disk --until merge_statistics  # the runs end with the merged sums: no tables or figures
    python -m bench peak_disk --config config/encoder_vs_decoder.yaml --shards 2 --repeats 1 --merges incremental \
        --out bench/results/encoder_vs_decoder    # an example run as the README runs it: ≈ 20 min

Runs the workflow in a temporary folder with partials deleted once merged (``keep_partials: false``, the
default), once with ``incremental_merge: true`` (each shard added to a running merge as it finishes) and
once with ``false`` (one merge per model once all its shards are done), ``--repeats`` times each, in turn.
What comes before the extraction (the corpus sample, the models, their shards) is the same for every run: it
is made once, and each run starts from a copy of it, which is already on disk at the peak either way
(``seconds`` in peak_disk.csv: the run from that copy; ``prepare_seconds``: the making of it, once).
It samples the size of ``results/{run}/`` every 0.2 s (the models the run builds or unpacks excluded: they
are inputs, not sums), split at the peak into partials, running merges (``partials/*/through/``) and the
rest. The merged sums are every model's ``sums*.parquet``; the report gives the peak against them (the
median of the repeats, with its range), and the merged sums per (type, layer), per type and per token,
from each ``run.json``. Which jobs Snakemake starts first decides the peak, hence the repeats.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import yaml

from harness import Options, command, markdown, spread, write_results

OPTIONS = Options(out="peak_disk.md and the CSVs")
REPO = Path(__file__).resolve().parents[1]


def sizes(run_folder: Path) -> dict[str, int]:
    """Bytes below ``run_folder`` by kind: ``partial`` sums, ``running`` merges, ``other`` (merged sums, tables,
    figures, corpus), ``total``; the ``models`` folder is left out, and files vanishing meanwhile are skipped."""
    found = {"partial": 0, "running": 0, "other": 0}
    for root, dirs, files in os.walk(run_folder):
        parts = Path(root).relative_to(run_folder).parts
        if not parts and "models" in dirs:
            dirs.remove("models")
        kind = ("running" if "through" in parts else "partial") if parts[:1] == ("partials",) else "other"
        for name in files:
            try:
                found[kind] += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return {**found, "total": sum(found.values())}


class PeakSampler(threading.Thread):
    """Samples ``sizes(run_folder)`` every ``interval`` seconds until stopped; keeps the sample of largest total."""

    def __init__(self, run_folder: Path, interval: float = 0.2):
        super().__init__(daemon=True)
        self.run_folder, self.interval, self.stopped = run_folder, interval, threading.Event()
        self.peak = {"total": 0}

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            if self.run_folder.exists():
                now = sizes(self.run_folder)
                if now["total"] > self.peak["total"]:
                    self.peak = now


def snakemake(config_path: Path, shards: int, incremental: bool, workdir: Path, what: str, *options: str) -> None:
    """The workflow in ``workdir / "run"`` with ``config_path`` as this benchmark sets it (``run: disk``), its
    config file in that folder: named by the same relative path, it is the config of a copied run folder too."""
    config = yaml.safe_load(config_path.read_text())
    config.update(run="disk", shards=shards, keep_partials=False, incremental_merge=incremental)
    run = workdir / "run"
    run.mkdir(exist_ok=True)
    (run / "disk.yaml").write_text(yaml.safe_dump(config))
    call = ["snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(run), "--cores", "2"]
    finished = subprocess.run([*call, "--configfile", str(run / "disk.yaml"), *options], capture_output=True, text=True)
    if finished.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{finished.stderr[-3000:]}")


def prepare(config_path: Path, shards: int, folder: Path) -> tuple[Path, float]:
    """``(run folder, seconds)``: the run folder (with Snakemake's records) as far as the shards of the corpus,
    what every measured run starts from (no job before extraction depends on ``incremental_merge``), and the
    seconds it took to make."""
    print("preparing the corpus sample, the models and their shards (snakemake --until split_corpus)", flush=True)
    start = time.perf_counter()
    snakemake(
        config_path, shards, True, folder, "preparing the inputs (--until split_corpus)", "--until", "split_corpus"
    )
    return folder / "run", time.perf_counter() - start


def measure(
    config_path: Path,
    shards: int,
    incremental: bool,
    workdir: Path,
    until: str | None,
    prepared: Path,
) -> dict:
    """One run of the workflow in ``workdir`` (as far as the jobs of rule ``until`` if given), from a copy of the
    ``prepared`` run folder: its peak, the split of the peak, and the merged sums per model."""
    shutil.copytree(prepared, workdir / "run", symlinks=True)
    run_folder = workdir / "run" / "results" / "disk"
    sampler = PeakSampler(run_folder)
    sampler.start()
    start = time.perf_counter()
    try:
        snakemake(config_path, shards, incremental, workdir, "the run", *(["--until", until] if until else []))
    finally:
        seconds = time.perf_counter() - start
        sampler.stopped.set()
        sampler.join()
    rows = []
    for model_folder in sorted(p for p in run_folder.iterdir() if (p / "run.json").exists()):
        provenance = json.loads((model_folder / "run.json").read_text())
        stats = (model_folder / "sums.parquet").stat().st_size
        merged = sum(p.stat().st_size for p in model_folder.glob("sums*.parquet"))
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
        "incremental_merge": incremental,
        "shards": shards,
        "seconds": seconds,
        "peak_bytes": sampler.peak["total"],
        "partials_bytes_at_peak": sampler.peak.get("partial", 0),
        "running_bytes_at_peak": sampler.peak.get("running", 0),
        "final_bytes": sizes(run_folder)["total"],
        "merged_bytes": merged,
        "peak_over_merged": sampler.peak["total"] / merged,
    }
    return {"run": run, "models": rows}


def report(runs: pd.DataFrame, models: pd.DataFrame, args) -> str:
    options = ["--config", runs["config"].iloc[0], "--shards", str(args.shards), "--repeats", str(args.repeats)]
    options += ["--merges", args.merges] if args.merges != "both" else []
    options += ["--until", args.until] if args.until else []
    medians = {"median_peak_bytes": "peak_bytes", "merged_bytes": "merged_bytes", "median_seconds": "seconds"}
    before, after = {"runs": ("peak_bytes", "size")}, {name: (column, "median") for name, column in medians.items()}
    summary = spread(runs, "incremental_merge", ["peak_over_merged"], before=before, after=after)
    return "\n".join(
        [
            "# Peak disk of a run against its merged sums",
            "",
            f"`{command(__file__, *options)}`: {time.strftime('%Y-%m-%d')}; "
            "partials deleted "
            "once merged, sizes sampled every 0.2 s (built and unpacked models excluded); the merge modes in turn, "
            "each from a copy of the same corpus sample, models and shards: `seconds` is the run after them, "
            "`prepare_seconds` the making of them (once), so a whole run takes their sum.",
            "",
            markdown(summary.reset_index()),
            "",
            "Every run, with the split of its peak (partials, running merges, the rest):",
            "",
            markdown(runs.drop(columns=["config"])),
            "",
            markdown(models.drop_duplicates("model"), ".4g"),
            "",
            "Merged sums: each model's sums.parquet (Σx, Σ‖x‖², n and, with geometry.cosine, Σ x/‖x‖ per type and "
            "layer), sums.moments.parquet (Σxxᵀ) and sums.sample.parquet (the TwoNN points).",
            "",
        ]
    )


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--config", default=str(REPO / "config" / "minilm.yaml"), type=Path)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each merge mode (default 3)")
    parser.add_argument(
        "--merges",
        choices=("both", "incremental", "final"),
        default="both",
        help="incremental_merge true, false or both in turn (default both)",
    )
    parser.add_argument(
        "--until", help="end each run with this rule's jobs (snakemake --until), e.g. merge_statistics: the merged sums"
    )
    args = parser.parse_args(argv)
    runs, models = [], []
    with tempfile.TemporaryDirectory(prefix="ctxvar-disk-inputs-") as inputs:
        prepared, prepare_seconds = prepare(args.config.resolve(), args.shards, Path(inputs))
        for repeat in range(args.repeats):
            for incremental in {"both": (True, False), "incremental": (True,), "final": (False,)}[args.merges]:
                with tempfile.TemporaryDirectory(prefix="ctxvar-disk-") as tmp:
                    result = measure(args.config.resolve(), args.shards, incremental, Path(tmp), args.until, prepared)
                runs.append({"repeat": repeat, **result["run"], "prepare_seconds": prepare_seconds})
                models += result["models"]
                print(f"repeat {repeat}, incremental_merge {incremental}: {result['run']['peak_over_merged']:.2f}×")
    runs, models = pd.DataFrame(runs), pd.DataFrame(models)
    write_results(
        args.out,
        {
            "peak_disk.csv": runs,
            "peak_disk_models.csv": models.drop_duplicates("model"),
            "peak_disk.md": report(runs, models, args),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
