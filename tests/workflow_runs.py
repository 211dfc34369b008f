"""Running the workflow from tests: Snakemake in a subprocess, as a user would."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
# The demo's first model on a sixth of its corpus, still 4 shards (so the running merges of shards 0..1 and 0..2
# run): the runs that show how jobs are submitted, killed and resumed, where the data's size changes nothing.
SMALL_DEMO = {
    **DEMO,
    "models": DEMO["models"][:1],
    "corpus": {**DEMO["corpus"], "synthetic": {**DEMO["corpus"]["synthetic"], "n_sentences": 1000}},
}
MERGED_SUMS = (  # a model's merged files with the demo's geometry
    "tokens.parquet",
    "sums.parquet",
    "sums.moments.parquet",
    "sums.sample.parquet",
    "sums.words.parquet",
    "sums.sentences.parquet",
)
# What the tests compare across runs of SMALL_DEMO: every merged sum, the layer table, one per-model figure.
SMALL_DEMO_OUTPUTS = [
    *(f"results/demo/tiny-bert/{name}" for name in (*MERGED_SUMS, "layers.csv")),
    "results/demo/tiny-bert/figures/fig05_decomposition.csv",  # plot_model_figure
]
RUN_SECONDS: dict[str, float] = {}  # shipped config → wall-clock seconds of its run, printed after the tests


def timed_run(workdir: Path, config: Path) -> subprocess.CompletedProcess:
    """:func:`snakemake` on a shipped config, its wall-clock time kept in :data:`RUN_SECONDS` under the config's
    path: the times the README gives for the demo and the quick start are these, printed under "measured"."""
    start = time.perf_counter()
    run = snakemake(workdir, config)
    RUN_SECONDS[str(config.relative_to(REPO))] = time.perf_counter() - start
    return run


def snakemake(
    workdir: Path, config: dict | Path, *args: str, env: dict | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """Run the workflow with ``config`` in ``workdir``; returns the finished process (not checked).

    No time limit by default: a busy 2-core machine can take far longer than usual, and
    Snakemake ends on its own. A dict ``config`` without ``run`` runs as ``run: test``.
    """
    process = start_snakemake(workdir, config, *args, env=env)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def start_snakemake(
    workdir: Path, config: dict | Path, *args: str, env: dict | None = None, output: Path | None = None
) -> subprocess.Popen:
    """:func:`snakemake` started and not waited for: runs that mostly wait, such as a cluster's, can go side by side.
    Its stdout and stderr go to ``output``'s ``.out`` and ``.err`` files when given (a pipe that nobody reads while
    another run is awaited would fill and stop it), else to pipes (``communicate()`` gives them)."""
    if isinstance(config, dict):  # written beside workdir, which stays as a user's checkout would be
        config = {"run": "test", **config}
        workdir.mkdir(parents=True, exist_ok=True)
        handle, path = tempfile.mkstemp(suffix=".yaml", dir=workdir.parent)
        os.write(handle, yaml.safe_dump(config).encode())
        os.close(handle)
        config = path
    streams = (
        [open(output.with_suffix(".out"), "w"), open(output.with_suffix(".err"), "w")]
        if output
        else [subprocess.PIPE, subprocess.PIPE]
    )
    try:
        return subprocess.Popen(
            snakemake_command(workdir, config, *args),
            stdout=streams[0],
            stderr=streams[1],
            text=True,
            env={**os.environ, **(env or {})},
        )
    finally:
        for stream in streams:
            if stream is not subprocess.PIPE:
                stream.close()  # the child holds its own copy


def snakemake_command(workdir: Path, config_path, *args: str) -> list[str]:
    """The command line that runs the workflow in ``workdir`` with the config file ``config_path`` on 2 cores."""
    return [
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(config_path),
        "--cores",
        "2",
        *args,
    ]  # a later -s in args wins


def scheduled_jobs(dry_run: subprocess.CompletedProcess) -> dict[str, int]:
    """Rule → job count from a dry-run's 'Job stats' table."""
    assert dry_run.returncode == 0, dry_run.stderr + dry_run.stdout
    table = (dry_run.stdout + dry_run.stderr).split("Job stats:")[-1]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.M) if rule != "total"}


def end_of_run(output: str) -> tuple[dict[str, str], list[str]]:
    """The run's closing block (ctxvar.run_end) as ``{label: text}``, and the lines Snakemake prints after it."""
    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("==== ctxvar: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    block = {"banner": lines[start]}
    for line in lines[start + 1 : end]:
        label, _, text = line.strip().partition("  ")
        block[label] = text.strip()
    return block, lines[end:]
