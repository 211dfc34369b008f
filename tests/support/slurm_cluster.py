"""The SLURM tier's cluster and runs: a real single-node cluster on loopback (tests/slurm/cluster.sh starts munged,
slurmctld and slurmd from Debian's slurm-wlm and munge, as root, and stops exactly those daemons, by PID), and the
tier's runs through the SLURM profile. Fixtures of the whole session (tests/conftest.py starts them with its first
test: the runs mostly wait on the cluster, beside the tiers before theirs)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from support.workflow_runs import BACKGROUND_NICENESS, REPO, SMALL_DEMO, start_snakemake, stop_snakemake

CAN_RUN = os.geteuid() == 0 and all(shutil.which(d) for d in ("munged", "slurmctld", "slurmd"))
NEEDS = "the SLURM tier needs root and Debian's slurm-wlm and munge (apt-get install -y slurm-wlm munge)"
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
        stop_cluster(state)
    for daemon, pid in pids.items():
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower(), (
            f"{daemon} left running"
        )


def stop_cluster(state) -> None:
    """Stop the cluster of :func:`cluster` whose files are in ``state``: its jobs cancelled, its daemons stopped
    (nothing to do once stopped)."""
    subprocess.run(["bash", str(CLUSTER), "stop", str(state)], check=True, timeout=120)


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
        niceness=BACKGROUND_NICENESS,
    )


@pytest.fixture(scope="session")
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
