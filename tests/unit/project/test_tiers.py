"""The fast tier in two processes (pytest-xdist), and the tiers that share the background runs refused there."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
import tomllib

from support.workflow_runs import ONE_PROCESS_TIERS, REPO, one_process_tiers


def test_the_default_selection_is_the_fast_tier_and_may_run_in_two_processes():
    pytest_options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    options = shlex.split(pytest_options["addopts"])
    assert one_process_tiers(options[options.index("-m") + 1]) == []


@pytest.mark.parametrize(
    "expression, tiers",
    [
        ("", ONE_PROCESS_TIERS),
        ("workflow", ("workflow",)),
        ("not slurm", ("workflow", "real_model")),
        ("bench or integration", ()),
        ("not (", ()),  # pytest says what is wrong with it
    ],
)
def test_every_selection_of_a_tier_that_reads_the_background_runs_needs_one_process(expression, tiers):
    assert one_process_tiers(expression) == list(tiers)


def test_n_with_such_a_selection_stops_with_one_line():
    """Before any worker starts, even when started from a worker of a session under -n (as this test is under
    ``python -m pytest -n 2``), whose environment names the worker."""
    environment = {**os.environ, "PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "2"}
    session = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-m", "", "--co", "tests/workflow/test_results.py"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environment,
        timeout=120,
    )
    assert session.returncode == pytest.ExitCode.USAGE_ERROR
    assert session.stderr.strip().splitlines()[-1] == (
        "ERROR: -m '' selects the workflow, slurm, real_model tiers, which run in one process (they share the "
        "demo's, the small demo's, the quick start's and the SLURM runs, each started once): leave out -n"
    ), session.stderr
