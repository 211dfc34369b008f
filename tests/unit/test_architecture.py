"""The package's shape: imports point down its layers, no import cycle between its modules, and a DAG build that
imports no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ctxvar"
DAG_BUILD_IMPORTS = [
    "ctxvar.config",
    "ctxvar.config_hash",
    "ctxvar.config_run",
    "ctxvar.config_schema",
    "ctxvar.disk",
    "ctxvar.errors",
    "ctxvar.resources",
    "ctxvar.corpus.shards",
    "ctxvar.models.batching",
    "ctxvar.figures.catalogue",
    "ctxvar.inputs",
    "ctxvar.models.archive",
    "ctxvar.run_end",
    "ctxvar.console",
    "ctxvar.run_origin",
    "ctxvar.results_layout",
    "ctxvar.stats.declarations",
]  # what workflow/rules/common.smk and run_end.smk import


# The package's layers, bottom first: a module imports only modules of its own layer or of layers before it.
# A layer is a list of module-name prefixes; a module belongs to the layer of its longest prefix ("ctxvar" alone is
# the package's __init__, which re-exports load_results).
BASE = [
    "errors",
    "io",
    "parquet_files",
    "config",
    "config_hash",
    "config_run",
    "config_schema",
    "config_reference",
    "versions",
    "jobs",
    "run_origin",
    "value_digest",
    "byte_digest",
]
RUN = ["resources", "disk", "inputs", "console", "run_end", "results", "results_layout"]
LAYERS = [
    ("base", [f"ctxvar.{name}" for name in BASE]),
    ("models", ["ctxvar.models"]),
    ("corpus", ["ctxvar.corpus"]),
    ("stats", ["ctxvar.stats"]),
    ("extraction", ["ctxvar.extraction"]),
    ("figures", ["ctxvar.figures"]),
    ("run", ["ctxvar"] + [f"ctxvar.{name}" for name in RUN]),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").exists() or (
        PACKAGE.parent / relative / "__init__.py"
    ).exists()


def imports(path: Path) -> set[str]:
    """The ctxvar modules ``path`` imports anywhere, function bodies included (a hidden cycle is still a cycle)."""
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("ctxvar")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if not base.startswith("ctxvar"):
                continue
            for alias in node.names:  # from ctxvar.models import hub: the module ctxvar.models.hub
                found.add(f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}") else base)
    return {name for name in found if name != "ctxvar"}


def import_graph() -> dict[str, set[str]]:
    return {module_name(path): imports(path) for path in PACKAGE.rglob("*.py")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first = last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module``'s layer (its longest matching prefix), or None."""
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".") and prefix != "ctxvar"
    ]
    return max(matches)[1] if matches else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import of a module in a later layer than the importer's."""
    return [
        f"{module} ({LAYERS[layer_of(module)][0]}) -> {name} ({LAYERS[layer_of(name)][0]})"
        for module, names in sorted(graph.items())
        for name in sorted(names)
        if layer_of(name) > layer_of(module)
    ]


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_function_level_and_aliased_imports():
    graph = import_graph()
    assert "ctxvar.models.hub" in graph["ctxvar.models.loading"]  # from ctxvar.models import hub
    assert "ctxvar.models.gaussian_null" in graph["ctxvar.models.build"]


def test_every_module_has_a_layer():
    unplaced = sorted(module for module in import_graph() if layer_of(module) is None)
    assert not unplaced, f"add these modules to a layer of LAYERS: {unplaced}"


def test_the_layer_check_sees_an_upward_import():
    assert upward_imports({"ctxvar.stats.merge": {"ctxvar.extraction.extract"}}) == [
        "ctxvar.stats.merge (stats) -> ctxvar.extraction.extract (extraction)"
    ]
    assert upward_imports({"ctxvar.extraction.extract": {"ctxvar.stats.sums", "ctxvar.io"}}) == []


def test_imports_point_down_the_layers():
    assert upward_imports(import_graph()) == []


def test_no_import_cycle_between_modules():
    assert find_cycle(import_graph()) is None


def test_building_the_dag_imports_no_torch():
    code = f"import sys; import {', '.join(DAG_BUILD_IMPORTS)}; print('torch' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"
