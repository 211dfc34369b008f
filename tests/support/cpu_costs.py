"""Where the suite's time goes: a pytest plugin, opt-in, that writes each test's wall-clock and CPU seconds.

    python -m pytest -m "" -p support.cpu_costs --cpu-costs cpu_costs.csv

One row per test, in the order they ran: ``test`` (its node id), ``tier`` (its folder of tests/), ``wall_s``,
``cpu_s`` (the test process's user + system seconds: the in-process tests) and ``children_cpu_s`` (the user + system
seconds of the subprocesses that ended, and were waited for, while it ran: its Snakemake runs and their jobs, the
benchmark scripts, the workers of an inner pytest). A run started in the background (``conftest.BACKGROUND_RUNS``)
counts for the test that waits for it to end (the demo's for the first test that reads it), and a process the test did
not wait for (SLURM's jobs, run by the cluster's daemons) counts for none. The suite's cores are busy for ``sum(cpu_s
+ children_cpu_s) / (2 * wall)`` of a run on 2 cores; the line the plugin prints last gives the wall-clock and CPU
seconds and the cores busy on average.
"""

from __future__ import annotations

import csv
import resource
import time
from pathlib import Path

import pytest

COLUMNS = ("test", "tier", "wall_s", "cpu_s", "children_cpu_s")
ROWS = pytest.StashKey[list]()  # the rows so far
STARTED = pytest.StashKey[float]()  # perf_counter() at the session's start


def pytest_addoption(parser):
    parser.addoption("--cpu-costs", default="cpu_costs.csv", help="the CSV each test's seconds are written to")


def pytest_configure(config):
    """One process: a worker of -n would count its own tests alone, and the workers would share one file."""
    if getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput"):
        raise pytest.UsageError("-p support.cpu_costs measures a run in one process: leave out -n")
    config.stash[ROWS] = []
    config.stash[STARTED] = time.perf_counter()


def cpu_seconds(who: int) -> float:
    """User + system seconds of ``who`` (``resource.RUSAGE_SELF`` or ``RUSAGE_CHILDREN``) so far."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def now() -> tuple[float, float, float]:
    return time.perf_counter(), cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The test's setup, call and teardown (session fixtures' teardown with the last test) measured together."""
    before = now()
    yield
    after = now()
    parts = Path(item.path).resolve().relative_to(Path(item.config.rootpath).resolve()).parts
    tier = parts[1] if parts[0] == "tests" and len(parts) > 2 else ""
    item.config.stash[ROWS].append((item.nodeid, tier, *(round(end - start, 3) for start, end in zip(before, after))))


def pytest_terminal_summary(terminalreporter, config):
    """Write the rows, then one line: the run's wall-clock seconds, its CPU seconds and the cores they kept busy on
    average."""
    rows = config.stash[ROWS]
    path = Path(config.getoption("cpu_costs"))
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    wall = time.perf_counter() - config.stash[STARTED]
    busy = sum(row[3] + row[4] for row in rows)
    cores = f"{busy:.0f} CPU-s ({busy / wall:.2f} cores)"
    terminalreporter.write_line(f"cpu costs: {len(rows)} tests, {wall:.0f} s, {cores} → {path}")
