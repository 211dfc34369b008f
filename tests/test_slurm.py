"""SLURM tier: the demo through the SLURM profile on a real single-node cluster on loopback.

tests/slurm/cluster.sh starts munged, slurmctld and slurmd (Debian's slurm-wlm and munge,
as root) and stops exactly those daemons, by PID, when the tier ends.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from workflow_runs import REPO, snakemake

pytestmark = pytest.mark.slurm
CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
DAEMONS = ("munged", "slurmctld", "slurmd")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    try:
        subprocess.run(["bash", str(CLUSTER), "start", str(state)], check=True, timeout=120)
        pids = {d: int((state / f"{d}.pid").read_text()) for d in DAEMONS}
        yield state
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], check=True, timeout=120)
    for daemon, pid in pids.items():
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower(), f"{daemon} left running"


def test_demo_through_slurm_equals_the_local_run(tmp_path, cluster, demo):
    run = snakemake(
        tmp_path, REPO / "config" / "demo.yaml",
        "--profile", str(REPO / "workflow" / "profiles" / "slurm"),
        # the test cluster's partition and sizes, as a user would fill them into the profile
        "--default-resources", "slurm_partition=debug", "mem_mb=500", "runtime=10",
        "--set-resources", "extract_statistics:slurm_partition=debug",
        "--slurm-init-seconds-before-status-checks", "2", "--latency-wait", "5",
        "--slurm-logdir", str(tmp_path / "logs" / "slurm"),  # the plugin resolves it from the caller's cwd
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert list((tmp_path / "logs" / "slurm").rglob("*.log")), "no per-job SLURM logs"
    outputs = [f"results/{m}/{f}" for m in ("tiny-bert", "tiny-roberta", "tiny-gpt2") for f in ("tokens.parquet", "layers.csv")]
    for output in [*outputs, "results/summary/layers.csv"]:
        assert (tmp_path / output).read_bytes() == (demo / output).read_bytes(), output
