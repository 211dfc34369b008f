"""docs/performance.md quotes the committed benchmark results it cites, number for number."""

from __future__ import annotations

import re

import pytest

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
    (command,) = re.findall(rf"^`(python bench/{script}\.py[^`]*)`", results, re.MULTILINE)
    section = PERFORMANCE[PERFORMANCE.index(heading) :]
    assert command in section
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


@pytest.mark.parametrize("config", ["config.yaml", "config/machina_mercer_2024.yaml", "config/razzhigaev_2024.yaml"])
def test_the_cost_plans_of_the_studies_are_the_commands_output(config, tmp_path, monkeypatch, capsys):
    """Each study's plan as ``python -m ctxvar.run.cost`` prints it with nothing in the HF cache and nothing run."""
    from huggingface_hub import constants

    from ctxvar.run import cost

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(REPO)
    cost.main([config, "--results", str(tmp_path / "results")])
    printed = capsys.readouterr().out.rstrip()
    section = PERFORMANCE[PERFORMANCE.index("## Cost plans of the studies") :]
    quoted = section[section.index(f"`python -m ctxvar.run.cost {config}`") :]
    assert quoted.split("```text\n", 1)[1].split("\n```", 1)[0] == printed
