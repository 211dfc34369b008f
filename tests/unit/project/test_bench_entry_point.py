"""bench/'s one command, ``python -m bench``: its list holds every benchmark script of bench/ (a script with a
``main``) and nothing else, prints what each measures, runs one by name and refuses an unknown name in one line."""

from __future__ import annotations

import ast
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


def test_every_benchmark_declares_its_shared_options_once_at_its_top():
    for name in BENCHMARKS:
        tree = ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))
        declared = [
            node for node in tree.body if isinstance(node, ast.Assign) and "OPTIONS" in map(ast.unparse, node.targets)
        ]
        assert len(declared) == 1, name
        assert "OPTIONS.parser(__doc__)" in ast.unparse(tree), name  # its parser is the declaration's


def test_the_parser_resolves_rounds_and_the_summary_gives_median_min_and_max():
    import pandas as pd

    import support.bench_scripts  # noqa: F401  (puts bench/ on sys.path, where harness is)
    from harness import Options, median_range, spread

    parser = Options(quick="tiny", rounds="every step").parser("doc")
    assert [parser.parse_args(argv).rounds for argv in ([], ["--quick"], ["--rounds", "5"])] == [3, 1, 5]
    assert "rounds of every step (default 3; --quick 1)" in " ".join(parser.format_help().split())
    assert Options(rounds="a mode's", default_rounds=None).parser("doc").parse_args([]).rounds is None
    table = pd.DataFrame({"step": ["b", "b", "b", "a"], "seconds": [3.0, 1.0, 2.0, 4.0], "tokens": [7, 7, 7, 8]})
    summary = spread(table, "step", ["seconds"], before={"tokens": ("tokens", "first")})
    assert list(summary.columns) == ["tokens", "median_seconds", "min_seconds", "max_seconds"]
    assert list(summary.index) == ["b", "a"] and median_range(summary, "seconds") == ["2 (1–3)", "4"]
