"""docs/performance.md quotes the committed benchmark results it cites, number for number."""

from __future__ import annotations

import re

from workflow_runs import REPO

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


def test_the_cost_of_each_geometry_switch_is_quoted_from_its_results_file():
    """The first table of bench/results/switches.md, every row as the file has it, and the command that made it."""
    results = (REPO / "bench" / "results" / "switches.md").read_text()
    (command,) = re.findall(r"^`(python bench/switches\.py[^`]*)`", results, re.MULTILINE)
    section = PERFORMANCE[PERFORMANCE.index("## Cost of each geometry switch") :]
    assert command in section
    table = markdown_tables(results)[0]
    assert len(table) == 9  # header, rule, 7 settings
    for line in table:
        assert line in section, f"docs/performance.md does not quote this row of switches.md: {line}"


def test_the_extraction_orders_are_quoted_from_their_results_file():
    """Every row of bench/results/extraction_order.md, and the command that made it."""
    results = (REPO / "bench" / "results" / "extraction_order.md").read_text()
    (command,) = re.findall(r"^`(python bench/extraction_order\.py[^`]*)`", results, re.MULTILINE)
    section = PERFORMANCE[PERFORMANCE.index("## Layer-major or whole-model extraction") :]
    assert command in section
    table = markdown_tables(results)[0]
    assert len(table) == 6  # header, rule, 2 models × 2 orders
    for line in table:
        assert line in section, f"docs/performance.md does not quote this row of extraction_order.md: {line}"
