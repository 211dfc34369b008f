"""Style and lint: ruff (lint and format), snakefmt and Snakemake's own linter are clean (config in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.workflow_runs import REPO

CHECKS = {
    "ruff check": [sys.executable, "-m", "ruff", "check", "."],
    "ruff format": [sys.executable, "-m", "ruff", "format", "--check", "."],
    "snakefmt": ["snakefmt", "--check", "Snakefile", "workflow/rules"],
    "snakemake --lint": ["snakemake", "--lint", "--cores", "1"],
}


@pytest.mark.parametrize("name", CHECKS)
def test_tree_is_clean(name):
    run = subprocess.run(CHECKS[name], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, f"{name}:\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
