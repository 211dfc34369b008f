"""bench/'s one command, ``python -m bench``: its list holds every benchmark script of bench/ (a script with a
``main``) and nothing else, prints what each measures, runs one by name and refuses an unknown name in one line."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

from support.workflow_runs import REPO

BENCH = REPO / "bench"
_spec = importlib.util.spec_from_file_location("bench_entry_point", BENCH / "__main__.py")  # a folder of scripts
ENTRY_POINT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ENTRY_POINT)
BENCHMARKS, summary = ENTRY_POINT.BENCHMARKS, ENTRY_POINT.summary


def bench(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *argv], cwd=REPO, capture_output=True, text=True)


def test_the_list_is_every_script_with_a_main():
    scripts = {path.stem for path in BENCH.glob("*.py") if re.search(r"^def main\(", path.read_text(), re.M)}
    assert set(BENCHMARKS) == scripts - {"__main__"}
    assert all(summary(name) for name in BENCHMARKS)  # each says what it measures


def test_the_command_lists_the_benchmarks_runs_one_and_refuses_an_unknown_name():
    listed = bench()
    assert listed.returncode == 0 and all(f"  {name} " in listed.stdout for name in BENCHMARKS)
    helped = bench("compare_runs", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python -m bench compare_runs")
    unknown = bench("nonesuch")
    assert unknown.returncode == 1 and "no benchmark 'nonesuch'" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
