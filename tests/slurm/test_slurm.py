"""SLURM tier: the workflow through the SLURM profile on a real single-node cluster on loopback.

It runs the demo's first model on a smaller corpus (``workflow_runs.SMALL_DEMO``): what is checked is how the
jobs are submitted, which the data's size does not change; the local run it must equal is shared with the
workflow tier's killed-and-resumed run.

tests/slurm/cluster.sh starts munged, slurmctld and slurmd (Debian's slurm-wlm and munge,
as root) and stops exactly those daemons, by PID, when the tier ends.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from workflow_runs import REPO, SMALL_DEMO, SMALL_DEMO_OUTPUTS, finished_snakemake, start_snakemake, stop_snakemake

CAN_RUN = os.geteuid() == 0 and all(shutil.which(d) for d in ("munged", "slurmctld", "slurmd"))
pytestmark = pytest.mark.skipif(
    not CAN_RUN,
    reason="the SLURM tier needs root and Debian's slurm-wlm and munge (apt-get install -y slurm-wlm munge)",
)
CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
DAEMONS = ("munged", "slurmctld", "slurmd")


@pytest.fixture(scope="session")  # for slurm_runs
def cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    try:
        subprocess.run(["bash", str(CLUSTER), "start", str(state)], check=True, timeout=120)
        pids = {d: int((state / f"{d}.pid").read_text()) for d in DAEMONS}
        yield state
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], check=True, timeout=120)
    for daemon, pid in pids.items():
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower(), (
            f"{daemon} left running"
        )


TARGETS = [
    "results/demo/tiny-bert/tokens.parquet",
    "results/demo/tiny-bert/sums.parquet",
    "results/demo/tiny-bert/layers.csv",
    "results/demo/tiny-bert/figures/fig05_decomposition.csv",  # plot_model_figure: a local rule
]


def through_the_profile(workdir, config: dict, *args: str) -> tuple:
    """``(workdir, process)``: :func:`workflow_runs.start_snakemake` through the SLURM profile, with the test
    cluster's partition and sizes as a user would fill them into the profile."""
    return workdir, start_snakemake(
        workdir,
        config,
        *args,
        "--profile",
        str(REPO / "workflow" / "profiles" / "slurm"),
        "--default-resources",
        "slurm_partition=debug",
        "mem_mb=500",
        "runtime=10",
        "--slurm-init-seconds-before-status-checks",
        "2",
        "--latency-wait",
        "5",
        "--slurm-logdir",
        str(workdir / "logs" / "slurm"),  # the plugin resolves it from the caller's cwd
    )


@pytest.fixture(scope="session")  # before the session's local run of SMALL_DEMO, which it goes beside
def slurm_runs(cluster, tmp_path_factory):
    """``name → (workdir, process)`` of this tier's runs, started side by side: they mostly wait on the
    cluster."""
    runs = {}
    try:
        runs["cpu"] = through_the_profile(
            tmp_path_factory.mktemp("slurm-cpu"),
            SMALL_DEMO,
            *TARGETS,
            "--set-resources",
            "extract_statistics:slurm_partition=debug",
        )
        # device: cuda on a node whose GPU is a stand-in: the extraction job fails, after its allocation
        runs["gpu"] = through_the_profile(
            tmp_path_factory.mktemp("slurm-gpu"),
            {**SMALL_DEMO, "device": "cuda"},
            "results/demo/partials/tiny-bert/0.parquet",
            "--retries",
            "0",
        )
        yield runs
    finally:
        for _, process in runs.values():
            stop_snakemake(process)


def test_demo_through_slurm_equals_the_local_run(slurm_runs, small_demo):
    """The demo's first model through the profile, every kind of job on its way (sample, split, extraction, the
    running and final merges, layer statistics, a per-model figure): byte for byte the local run's files."""
    assert set(TARGETS) <= set(SMALL_DEMO_OUTPUTS)  # what the shared local run wrote
    workdir, process = slurm_runs["cpu"]
    run = finished_snakemake(workdir, process)
    assert run.returncode == 0, run.stderr[-3000:]
    assert list((workdir / "logs" / "slurm").rglob("*.log")), "no per-job SLURM logs"
    output = run.stdout + run.stderr
    submitted = set(re.findall(r"^rule (\w+):.*?submitted with SLURM jobid \d+", output, flags=re.S | re.M))
    assert {"sample_corpus", "split_corpus", "extract_statistics", "layer_statistics"} <= submitted, output[-3000:]
    # second-long jobs are not sbatch submissions
    assert "localrule plot_model_figure:" in output and "plot_model_figure" not in submitted
    for output in TARGETS:
        assert (workdir / output).read_bytes() == (small_demo / output).read_bytes(), output


def test_only_extraction_jobs_are_granted_a_gpu(slurm_runs):
    """device: cuda → extraction jobs get gres/gpu from SLURM, the CPU rules none.

    The test node's GPU is a stand-in (File=/dev/null), so the extraction job itself then
    fails with ctxvar's one-line CUDA message; what is checked is SLURM's allocation.
    """
    workdir, process = slurm_runs["gpu"]
    run = finished_snakemake(workdir, process)
    output = run.stdout + run.stderr
    assert run.returncode != 0 and "torch sees no CUDA device" in "".join(
        p.read_text() for p in (workdir / "logs").rglob("*.log")
    )
    submitted = dict(re.findall(r"rule (\w+):.*?submitted with SLURM jobid (\d+)", output, flags=re.S))
    assert set(submitted) >= {"sample_corpus", "extract_statistics"}, output[-3000:]
    for rule, jobid in submitted.items():
        details = subprocess.run(["scontrol", "show", "job", jobid], capture_output=True, text=True, check=True).stdout
        assert bool(re.search(r"gres[:/]gpu", details)) == (rule == "extract_statistics"), (rule, details)
