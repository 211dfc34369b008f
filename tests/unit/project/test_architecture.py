"""The package's shape: imports point down its layers, no import cycle between its modules, a DAG build that
imports no torch, and jobs that import no library they do not use; and the tests mirror it: each module has a test
file of its name in tests/unit or tests/integration, and each test file there is named after a module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "ctxvar"
DAG_BUILD_IMPORTS = [
    "ctxvar.config.checks",
    "ctxvar.config.entries",
    "ctxvar.config.hashes",
    "ctxvar.config.kinds",
    "ctxvar.config.run_name",
    "ctxvar.config.schema",
    "ctxvar.corpus.enwik8",
    "ctxvar.corpus.shards",
    "ctxvar.errors",
    "ctxvar.figures.catalogue",
    "ctxvar.models.archive",
    "ctxvar.models.batching",
    "ctxvar.run.console",
    "ctxvar.run.cost",
    "ctxvar.run.disk",
    "ctxvar.run.end",
    "ctxvar.run.hf_cache",
    "ctxvar.run.inputs",
    "ctxvar.run.layout",
    "ctxvar.run.origin",
    "ctxvar.run.resources",
    "ctxvar.stats.declarations",
]  # what workflow/rules/common.smk and run_end.smk import

# Libraries that a job of workflow/scripts/ does not use, left out of its imports: each costs CPU in every job
# process (torch about 2.5 s, transformers 1.5 s more, pandas 0.6 s). Most jobs import pandas when they run all
# the same: pyarrow imports it on its first pa.array, to_numpy or pq.read_table.
JOBS_WITHOUT = {
    "build_random_model": {"pandas"},
    "merge_pca_points": {"torch", "transformers"},
    "merge_statistics": {"torch", "transformers"},
    "plot_pca": {"transformers"},
    "release_hf_cache": {"pandas", "torch", "transformers"},
    "sample_corpus": {"torch", "transformers"},
    "select_pca_tokens": {"torch", "transformers"},
    "split_corpus": {"torch", "transformers"},  # imported when the tokenizer is loaded
}

# The package's layers, bottom first: a module imports only modules of its own layer or of layers before it.
# A layer is a list of module-name prefixes; a module belongs to the layer of its longest prefix ("ctxvar" alone is
# the package's __init__, which re-exports load_results).
LAYERS = [
    ("base", ["ctxvar.errors", "ctxvar.versions"]),
    ("files", ["ctxvar.files"]),
    ("config", ["ctxvar.config"]),
    ("models", ["ctxvar.models"]),
    ("corpus", ["ctxvar.corpus"]),
    ("stats", ["ctxvar.stats"]),
    ("extraction", ["ctxvar.extraction"]),
    ("figures", ["ctxvar.figures"]),
    ("run", ["ctxvar.run"]),
    ("results", ["ctxvar", "ctxvar.results"]),
]
ROOT_MODULES_AT_MOST = 6  # errors, versions, the public load_results and __init__; the rest lives in a wing

# The tests mirror the package (docs/testing.md, "Layout"): ctxvar.<subpackage>.<module> has
# tests/<tier>/<subpackage>/test_<module>.py or test_<module>_<what>.py in one of these tiers, a module of the
# package root tests/unit/test_<module>.py; tests/unit/project checks the whole tree.
TESTS = PACKAGE.parents[1] / "tests"
MIRRORING_TIERS = ("unit", "integration")
WHOLE_TREE = TESTS / "unit" / "project"
WITHOUT_A_TEST_FILE: dict[str, str] = {}  # module → where its tests are instead of a file of its name


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").exists() or (
        PACKAGE.parent / relative / "__init__.py"
    ).exists()


def imported(node: ast.AST, package: str) -> set[str]:
    """The modules an import statement ``node`` of a module in ``package`` names (none for other nodes)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
    if not base.startswith("ctxvar"):
        return {base}
    # from ctxvar.models import hub: the module ctxvar.models.hub
    return {f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}") else base for alias in node.names}


def package_of(path: Path) -> str:
    return module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)


def imports(path: Path) -> set[str]:
    """The ctxvar modules ``path`` imports anywhere, function bodies included (a hidden cycle is still a cycle)."""
    found = set().union(*(imported(node, package_of(path)) for node in ast.walk(ast.parse(path.read_text()))))
    return {name for name in found if name.startswith("ctxvar") and name != "ctxvar"}


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


def import_time_imports(path: Path, package: str) -> set[str]:
    """The modules that importing ``path``, a module of ``package``, imports: its imports outside function bodies
    and ``if TYPE_CHECKING:``."""
    found = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return visit_all(node.orelse)
        found.update(imported(node, package))
        visit_all(ast.iter_child_nodes(node))

    def visit_all(nodes):
        for node in nodes:
            visit(node)

    visit(ast.parse(path.read_text()))
    return found


def module_path(name: str) -> Path:
    relative = PACKAGE.parent / Path(*name.split("."))
    return relative.with_suffix(".py") if relative.with_suffix(".py").exists() else relative / "__init__.py"


def import_time_libraries(modules: set[str]) -> set[str]:
    """The top-level packages outside ctxvar that importing ``modules`` imports, followed through the package's
    modules (and their parent packages) but not through the libraries' own imports (transformers imports torch)."""
    libraries, seen, pending = set(), set(), list(modules)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        pending += [".".join(parts[:end]) for end in range(1, len(parts))]
        path = module_path(name)
        for found in import_time_imports(path, package_of(path)):
            if found == "ctxvar" or found.startswith("ctxvar."):
                pending.append(found)
            else:
                libraries.add(found.split(".")[0])
    return libraries


def job_imports(script: str) -> set[str]:
    """The ctxvar modules that ``workflow/scripts/{script}.py`` imports."""
    path = PACKAGE.parents[1] / "workflow" / "scripts" / f"{script}.py"
    return {name for name in import_time_imports(path, "") if name.startswith("ctxvar")}


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
    assert upward_imports({"ctxvar.extraction.extract": {"ctxvar.stats.sums", "ctxvar.files.atomic"}}) == []


def test_the_package_root_holds_a_few_modules():
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(root) <= ROOT_MODULES_AT_MOST, f"the package root holds {root}; put a module in its wing"


def test_imports_point_down_the_layers():
    assert upward_imports(import_graph()) == []


def test_no_import_cycle_between_modules():
    assert find_cycle(import_graph()) is None


def test_building_the_dag_imports_no_torch():
    code = f"import sys; import {', '.join(DAG_BUILD_IMPORTS)}; print('torch' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


def test_import_time_libraries_follow_the_package_and_skip_function_bodies():
    assert "torch" in import_time_libraries({"ctxvar.extraction.settings"})  # through extraction.accumulator
    assert "transformers" not in import_time_libraries({"ctxvar.corpus.shards"})  # models.loading, in a function
    assert "pandas" not in import_time_libraries({"ctxvar.files.atomic"})  # under TYPE_CHECKING


@pytest.mark.parametrize("script", sorted(JOBS_WITHOUT))
def test_a_job_imports_no_library_it_does_not_use(script):
    assert not import_time_libraries(job_imports(script)) & JOBS_WITHOUT[script]


def module_named_by(test_file: str, modules: set[str]) -> str | None:
    """The module of ``modules`` (names in one subpackage) that the test file named ``test_file`` (its stem)
    checks: ``test_<module>`` or ``test_<module>_<what>``, the longest such module (``test_merge_io_x`` is
    merge_io's, not merge's); None for a file named after none."""
    named = [name for name in modules if test_file == f"test_{name}" or test_file.startswith(f"test_{name}_")]
    return max(named, key=len, default=None)


def package_modules() -> dict[str, set[str]]:
    """Subpackage (``""`` for the package root) → the names of its modules."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            found.setdefault(".".join(path.relative_to(PACKAGE).parts[:-1]), set()).add(path.stem)
    return found


def mirroring_test_files() -> dict[Path, str]:
    """Each test file of the mirroring tiers but tests/unit/project → the subpackage its folder stands for
    (``""`` for the folder of the tier itself)."""
    return {
        path: ".".join(path.parent.relative_to(TESTS / tier).parts)
        for tier in MIRRORING_TIERS
        for path in (TESTS / tier).rglob("test_*.py")
        if WHOLE_TREE not in path.parents
    }


def qualified(subpackage: str, name: str) -> str:
    return ".".join(["ctxvar", *([subpackage] if subpackage else []), name])


def module_of_test_file(path: Path, subpackage: str, modules: dict[str, set[str]]) -> str | None:
    """The module (``ctxvar.…``) that the test file ``path``, in the folder of ``subpackage``, is named after; None
    for none (the package root's modules are tested in tests/unit alone)."""
    if not subpackage and path.parent != TESTS / "unit":
        return None
    name = module_named_by(path.stem, modules.get(subpackage, set()))
    return None if name is None else qualified(subpackage, name)


def modules_with_a_test_file() -> set[str]:
    modules = package_modules()
    named = {module_of_test_file(path, subpackage, modules) for path, subpackage in mirroring_test_files().items()}
    return named - {None}


def all_modules() -> set[str]:
    return {qualified(subpackage, name) for subpackage, names in package_modules().items() for name in names}


def test_a_test_file_belongs_to_the_longest_module_it_is_named_after():
    modules = {"merge", "merge_io", "gaussian_null", "gaussian_null_config", "sums"}
    assert module_named_by("test_merge", modules) == "merge"
    assert module_named_by("test_merge_free_space", modules) == "merge"
    assert module_named_by("test_merge_io", modules) == "merge_io"
    assert module_named_by("test_gaussian_null_config", modules) == "gaussian_null_config"
    assert module_named_by("test_mergers", modules) is None and module_named_by("test_hostile_inputs", modules) is None


def test_every_module_has_a_test_file_of_its_name():
    untested = sorted(all_modules() - modules_with_a_test_file() - set(WITHOUT_A_TEST_FILE))
    assert not untested, (
        "modules without tests/<tier>/<subpackage>/test_<module>.py (tests/unit/test_<module>.py for the package "
        f"root's): {untested}"
    )


def test_every_test_file_is_named_after_a_module_of_its_folder():
    modules = package_modules()
    unnamed = sorted(
        str(path.relative_to(TESTS))
        for path, subpackage in mirroring_test_files().items()
        if module_of_test_file(path, subpackage, modules) is None
    )
    assert not unnamed, f"test files named after no module of their folder's subpackage: {unnamed}"


def test_a_module_without_a_test_file_of_its_name_is_one_that_still_needs_its_reason():
    assert set(WITHOUT_A_TEST_FILE) <= all_modules(), "a module that is gone"
    assert not set(WITHOUT_A_TEST_FILE) & modules_with_a_test_file(), "a module that has its test file now"
