"""The modules that building the DAG imports are the ones the workflow's rule files import, and
docs/architecture.md names them all: a module added to a rule file's imports cannot stay out of the torch check
(tests/unit/project/test_architecture.py) or the docs."""

from __future__ import annotations

import re
from pathlib import Path

from .test_architecture import DAG_BUILD_IMPORTS
from support.workflow_runs import REPO

IMPORT = re.compile(r"^\s*(?:from (ctxvar(?:\.\w+)*) import \(?\s*(\w+)|import (ctxvar(?:\.\w+)*))", re.MULTILINE)


def workflow_imports() -> set[str]:
    """ctxvar modules imported by the Snakefile and the rule files (``from ctxvar.run import resources``: the
    module)."""
    files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").rglob("*.smk"))]
    found = set()
    for text in (path.read_text() for path in files):
        for package, name, module in IMPORT.findall(text):
            if module:
                found.add(module)
            elif (REPO / "src" / Path(*package.split(".")) / f"{name}.py").exists():
                found.add(f"{package}.{name}")
            else:
                found.add(package)
    return found - {"ctxvar"}  # the install check's bare import


def test_the_torch_check_covers_every_module_the_workflow_imports():
    assert workflow_imports() == set(DAG_BUILD_IMPORTS)


def test_the_architecture_page_names_every_module_the_workflow_imports():
    text = " ".join((REPO / "docs" / "architecture.md").read_text().split())
    listed = re.search(r"Building the DAG imports no torch \(the workflow imports only (.*?)\)\.", text).group(1)
    assert set(re.findall(r"`([\w.]+)`", listed)) == {name.removeprefix("ctxvar.") for name in workflow_imports()}
