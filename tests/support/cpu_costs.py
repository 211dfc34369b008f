"""Where the suite's time goes: a pytest plugin, opt-in, that writes each test's wall-clock and CPU seconds.

    python -m pytest -m "" -p support.cpu_costs --cpu-costs cpu_costs.csv

One row per test, in the order they ran, written as each ends: ``test`` (its node id), ``tier`` (its folder of
tests/, or empty), ``wall_s``, ``cpu_s`` (the test process's user + system seconds: the in-process tests) and
``children_cpu_s`` (the user + system seconds of the subprocesses that were waited for while it ran: its Snakemake
runs and their jobs, the benchmark scripts, the workers of an inner pytest). A shared fixture counts for the first
test that uses it (the tiny models' build, the background runs' start), and a run started in the background
(``conftest.BACKGROUND_RUNS``) for the test that waits for it to end; a process nobody here waits for (SLURM's
jobs, run by the cluster's daemons) counts for none. The line the plugin prints gives the run's wall-clock and CPU
seconds from the process's start (start-up and collection included, which are in no row), the cores they kept busy on
average, and the share of those seconds the rows hold.
"""

from __future__ import annotations

import csv
import resource
import time

import psutil
import pytest

COLUMNS = ("test", "tier", "wall_s", "cpu_s", "children_cpu_s")
WRITER = pytest.StashKey[tuple]()  # (the open CSV file, its csv.writer)
ROWS_CPU = pytest.StashKey[list]()  # [the rows' CPU seconds so far]


def pytest_addoption(parser):
    parser.addoption("--cpu-costs", default="cpu_costs.csv", help="the CSV each test's seconds are written to")


def pytest_configure(config):
    """One process (a worker of -n would count its own tests alone, and the workers would share one file); the
    file opened before the first test, so that a path that cannot be written stops the run before it starts."""
    if getattr(config.option, "numprocesses", None) or getattr(config.option, "tx", None):
        raise pytest.UsageError("-p support.cpu_costs measures a run in one process: leave out -n and --tx")
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    out = open(config.getoption("cpu_costs"), "w", newline="", encoding="utf-8")  # noqa: SIM115 (closed at the end)
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    config.stash[WRITER] = (out, writer)
    config.stash[ROWS_CPU] = [0.0]


def cpu_seconds(who: int) -> float:
    """User + system seconds of ``who`` (``resource.RUSAGE_SELF`` or ``RUSAGE_CHILDREN``) so far."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def clocks() -> tuple[float, float, float]:
    """(``time.perf_counter()``, this process's CPU seconds, its waited-for children's CPU seconds) now."""
    return time.perf_counter(), cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The test's setup, call and teardown (session fixtures' teardown with the last test) measured together."""
    before = clocks()
    yield
    after = clocks()
    if WRITER not in item.config.stash:
        return
    wall, cpu, children = (round(end - start, 3) for start, end in zip(before, after))
    parts = item.nodeid.split("::")[0].split("/")
    tier = parts[1] if parts[0] == "tests" and len(parts) > 2 else ""
    out, writer = item.config.stash[WRITER]
    writer.writerow((item.nodeid, tier, wall, cpu, children))
    out.flush()
    item.config.stash[ROWS_CPU][0] += cpu + children


def pytest_unconfigure(config):
    """Close the file; then one line: the run's wall-clock and CPU seconds from the process's start, the cores busy
    on average, and the share of its CPU seconds that the rows hold."""
    if WRITER not in config.stash:
        return
    out, _ = config.stash[WRITER]
    out.close()
    wall = time.time() - psutil.Process().create_time()
    cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)
    in_rows = config.stash[ROWS_CPU][0]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    line = (
        f"cpu costs: {wall:.0f} s, {cpu:.0f} CPU-s ({cpu / wall:.2f} cores), {in_rows / cpu:.0%} of them in the "
        f"rows of {out.name}"
    )
    if reporter is not None:
        reporter.write_line(line)
