"""The fast tier in two processes (pytest-xdist), and the tiers that share the background runs refused there; the
plugin that measures each test's seconds (``-p support.cpu_costs``)."""

from __future__ import annotations

import csv
import os
import re
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


def test_the_cpu_costs_plugin_counts_each_tests_subprocesses_for_it(tmp_path):
    """``-p support.cpu_costs`` (docs/testing.md): a test whose subprocess spins for 0.3 CPU-s has them in its
    ``children_cpu_s``, the test beside it none; a file that cannot be written stops the run before its tests; -n
    is refused."""
    spin = "import time; end = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    (tmp_path / "test_spin.py").write_text(
        "import subprocess, sys\n\n"
        f"def test_spins():\n    subprocess.run([sys.executable, '-c', {spin!r}], check=True)\n\n"
        "def test_idles():\n    pass\n"
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "support.cpu_costs"]
    environment = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    environment["PYTHONPATH"] = str(REPO / "tests")

    def run(*options: str) -> subprocess.CompletedProcess:
        arguments = [*command, "--rootdir", str(tmp_path), "-c", os.devnull, *options]
        return subprocess.run(arguments, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)

    measured = run("--cpu-costs", str(tmp_path / "costs.csv"), "test_spin.py")
    assert measured.returncode == 0, measured.stdout[-2000:] + measured.stderr[-2000:]
    costs = {row["test"]: row for row in csv.DictReader((tmp_path / "costs.csv").open())}
    assert float(costs["test_spin.py::test_spins"]["children_cpu_s"]) >= 0.3
    assert float(costs["test_spin.py::test_idles"]["children_cpu_s"]) == 0
    assert re.search(
        r"^cpu costs: \d+ s, \d+ CPU-s \([\d.]+ cores\), \d+% of them in the rows of ", measured.stdout, re.M
    )
    unwritable = run("--cpu-costs", str(tmp_path / "no such folder" / "costs.csv"), "test_spin.py")
    assert unwritable.returncode != 0 and "passed" not in unwritable.stdout
    refused = run("-n", "2", "test_spin.py")
    assert refused.returncode != 0 and "leave out -n" in refused.stderr
