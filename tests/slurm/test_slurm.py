"""SLURM tier: the workflow through the SLURM profile on a real single-node cluster on loopback.

It runs the demo's first model on a smaller corpus (``workflow_runs.SMALL_DEMO``): what is checked is how the
jobs are submitted, which the data's size does not change; the local run it must equal is shared with the
workflow tier's killed-and-resumed run. The cluster and the runs are session fixtures of tests/support/slurm_cluster.py.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from support.slurm_cluster import CAN_RUN, NEEDS, TARGETS, stop_cluster
from support.workflow_runs import SMALL_DEMO_OUTPUTS, finished_snakemake, stop_snakemake

pytestmark = pytest.mark.skipif(not CAN_RUN, reason=NEEDS)


@pytest.fixture(scope="module", autouse=True)
def cluster_stops_with_this_tier(cluster, slurm_runs):
    """The cluster stopped once this tier's tests have read its runs (a run still going, after a failed test, is
    stopped first), rather than with the session, whose last seconds would wait on its daemons' ends."""
    yield
    for _, process in slurm_runs.values():
        stop_snakemake(process)
    stop_cluster(cluster)


def submitted_jobs(output: str) -> dict[str, list[str]]:
    """Rule → the SLURM job ids of its jobs that Snakemake submitted, matched by Snakemake's own job id: jobs started
    together print their rule blocks first and their submission lines after, in any order."""
    rules = {
        jobid: rule
        for rule, jobid in re.findall(r"^rule (\w+):\n(?:[ \t]+.*\n)*?[ \t]+jobid: (\d+)$", output, flags=re.M)
    }
    submitted: dict[str, list[str]] = {}
    for job, slurm_job in re.findall(r"^Job (\d+) has been submitted with SLURM jobid (\d+)", output, flags=re.M):
        submitted.setdefault(rules[job], []).append(slurm_job)
    return submitted


def test_demo_through_slurm_equals_the_local_run(slurm_runs, small_demo):
    """The demo's first model through the profile, every kind of job on its way (sample, split, extraction, the
    running and final merges, layer statistics, a per-model figure): byte for byte the local run's files."""
    assert set(TARGETS) <= set(SMALL_DEMO_OUTPUTS)  # what the shared local run wrote
    workdir, process = slurm_runs["cpu"]
    run = finished_snakemake(workdir, process)
    assert run.returncode == 0, run.stderr[-3000:]
    assert list((workdir / "logs" / "slurm").rglob("*.log")), "no per-job SLURM logs"
    output = run.stdout + run.stderr
    submitted = set(submitted_jobs(output))
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
    submitted = {rule: ids[0] for rule, ids in submitted_jobs(output).items()}
    assert set(submitted) >= {"sample_corpus", "extract_statistics"}, output[-3000:]
    for rule, jobid in submitted.items():
        details = subprocess.run(["scontrol", "show", "job", jobid], capture_output=True, text=True, check=True).stdout
        assert bool(re.search(r"gres[:/]gpu", details)) == (rule == "extract_statistics"), (rule, details)
