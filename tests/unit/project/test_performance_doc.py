"""docs/performance.md quotes the committed benchmark results it cites, number for number."""

from __future__ import annotations

import re

import support.bench_scripts  # noqa: F401  (puts bench/ on sys.path, where harness is)
from support.workflow_runs import REPO

PERFORMANCE = (REPO / "docs" / "performance.md").read_text()


def markdown_tables(text: str) -> list[list[str]]:
    """The tables of ``text``, each as its lines (header, rule and rows)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def assert_quoted(script: str, heading: str, n_lines: int) -> None:
    """The first table of bench/results/{script}.md, every line (header, rule and ``n_lines`` − 2 rows) as the
    file has it, and the command that made it, in docs/performance.md's section ``heading``."""
    results = (REPO / "bench" / "results" / f"{script}.md").read_text()
    from harness import command_pattern

    (command,) = re.findall(rf"^`({command_pattern(script)}[^`]*)`", results, re.MULTILINE)
    section = PERFORMANCE[PERFORMANCE.index(heading) :]
    assert command.replace(f"python bench/{script}.py", f"python -m bench {script}") in section  # one script
    table = markdown_tables(results)[0]
    assert len(table) == n_lines
    for line in table:
        assert line in section, f"docs/performance.md does not quote this row of {script}.md: {line}"


def test_the_cost_of_each_geometry_switch_is_quoted_from_its_results_file():
    assert_quoted("switches", "## Cost of each geometry switch", 9)  # header, rule, 7 settings


def test_the_extraction_orders_are_quoted_from_their_results_file():
    assert_quoted("extraction_order", "## Layer-major or whole-model extraction", 6)  # 2 models × 2 orders


def test_the_streamed_weights_are_quoted_from_their_results_file():
    assert_quoted("weight_streaming", "## Weights streamed from the files", 4)  # streamed and whole


def test_the_memory_plans_are_quoted_from_their_results_file():
    assert_quoted("memory_plans", "## Memory plans of large models", 13)  # 6 paper models, 7B, 13B, 70B, 405B twice


def test_the_job_parts_table_quotes_its_results_file():
    """Each number of the job's parts (bench/job_parts.py) as docs/performance.md rounds it."""
    import pandas as pd

    parts = pd.read_csv(REPO / "bench" / "results" / "job_parts.csv").set_index("model")
    section = PERFORMANCE[PERFORMANCE.index("**An extraction job's parts, on a CPU**") :]
    assert "`python -m bench job_parts`" in section
    bert, llama = parts.loc["bert-base"], parts.loc["llama-2-7b"]
    rows = {
        "on the GPU's path, outside the batches": (f"{bert.path_seconds:.2f} s", f"{llama.path_seconds:.2f} s"),
        "loading (": (f"{bert.load:.3f} s", f"{llama.load:.3f} s"),
        "the weight hash, once per model": (f"{bert.weight_hash:.2f} s", f"{llama.weight_hash:.2f} s"),
        "writing one layer's sums": (f"{bert.write_per_layer:.2f} s", f"{llama.write_per_layer:.2f} s"),
    }
    table = markdown_tables(section)[0]
    for start, values in rows.items():
        (row,) = [line for line in table if line.startswith(f"| {start}")]
        assert row.split(" | ")[1:] == [values[0], f"{values[1]} |"], row
