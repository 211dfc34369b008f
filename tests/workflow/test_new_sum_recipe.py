"""docs/architecture.md's recipe for a new sum, followed in a copy of the project: the page's Σ‖x‖⁴ per (layer,
type) and per layer declared in ``ctxvar/stats/declarations.py``, the docs' rows generated (``python -m
ctxvar.stats.declarations_doc``) and one test file of the new sums added, and nothing else edited. There the fast
tier passes, and a finished run of the old declarations re-extracts every shard of its model."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxvar.stats import declarations

from support.workflow_runs import REPO, SMALL_DEMO, SMALL_DEMO_OUTPUTS, project_copy, scheduled_jobs, snakemake

ARCHITECTURE = REPO / "docs" / "architecture.md"


def recipe_declaration(kind: str) -> str:
    """The declaration of ``kind`` (``TypeSum``, ``LayerSum``) that docs/architecture.md's recipe shows, as an item
    of a tuple (``ruff format`` then fits its lines to the project's width)."""
    blocks = re.findall(r"```python\n(.*?)```", ARCHITECTURE.read_text(encoding="utf-8"), flags=re.S)
    block = next(block for block in blocks if block.startswith(f"{kind}("))
    return block.strip().replace("\n", "\n    ")


# The recipe's one new test file: the new sums against brute force, on 1 and 3 shards.
NEW_TEST = '''"""Σ‖x‖⁴ per (layer, type) (tokens.parquet's Q4) and per layer (geometry.csv's mean_fourth_power)."""

import numpy as np
import pandas as pd

from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.stats.geometry import geometry_table

from support.oracle import brute_force_embeddings
from support.pipeline_runs import run_geometry_pipeline


def test_the_fourth_powers_are_the_brute_force_ones_on_1_and_3_shards(tmp_path, tiny_models, corpus_texts):
    texts, model = corpus_texts[:60], tiny_models["bert"]
    keys, X = brute_force_embeddings(model, texts)
    fourth = (X**2).sum(-1) ** 2
    for n_shards in (1, 3):
        (tmp_path / str(n_shards)).mkdir()
        files = run_geometry_pipeline(tmp_path / str(n_shards), model, texts, n_shards, GeometryOptions())
        tokens = pd.read_parquet(files["tokens"])
        for layer in range(X.shape[0]):
            rows = tokens[tokens["layer"] == layer].set_index("token")
            expected = [fourth[layer, keys == key].mean() for key in rows.index]
            np.testing.assert_allclose(rows["Q4"], expected, rtol=1e-9)
        table = geometry_table(files["stats"], files["moments"], None, 4, 0, 0.0, 6.0)
        np.testing.assert_allclose(table["mean_fourth_power"], fourth.mean(1), rtol=1e-9)
'''


def appended(source: str, name: str, item: str) -> str:
    """``source`` with ``item`` (source text) appended to the tuple assigned to ``name``, as a person would."""
    node = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        and getattr(getattr(node, "target", None) or node.targets[0], "id", None) == name
    )
    items = [ast.get_source_segment(source, element) for element in node.value.elts] + [item]
    lines = source.splitlines(keepends=True)
    start = sum(map(len, lines[: node.value.lineno - 1])) + node.value.col_offset
    end = sum(map(len, lines[: node.value.end_lineno - 1])) + node.value.end_col_offset
    return source[:start] + "(\n" + "".join(f"    {item},\n" for item in items) + ")" + source[end:]


def follow_the_recipe(project: Path, env: dict) -> None:
    declarations = project / "src" / "ctxvar" / "stats" / "declarations.py"
    source = appended(declarations.read_text(), "TYPE_SUMS", recipe_declaration("TypeSum"))
    declarations.write_text(appended(source, "LAYER_SUMS", recipe_declaration("LayerSum")))
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(declarations)], check=True)
    subprocess.run([sys.executable, "-m", "ctxvar.stats.declarations_doc"], cwd=project, env=env, check=True)
    (project / "tests" / "integration" / "stats" / "test_declarations_fourth_powers.py").write_text(NEW_TEST)


def test_a_new_sum_by_the_recipe_passes_the_fast_tier_and_re_extracts_an_existing_run(tmp_path, request):
    shown = {ast.parse(recipe_declaration(kind)).body[0].value.args[0].value for kind in ("TypeSum", "LayerSum")}
    declared = {item.name for item in (*declarations.TYPE_SUMS, *declarations.LAYER_SUMS)}
    if declared & shown:  # the page's example was adopted: nothing is left to follow until it shows another
        pytest.skip(f"{sorted(declared & shown)} declared already: show a sum not declared yet in the recipe")
    project = project_copy(tmp_path / "project")
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    follow_the_recipe(project, env)
    edited = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True).stdout
    assert sorted(line[3:] for line in edited.splitlines()) == [
        "docs/geometry.md",
        "docs/outputs.md",
        "src/ctxvar/stats/declarations.py",
        "tests/integration/stats/test_declarations_fourth_powers.py",
    ]
    tier = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'tier'}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert tier.returncode == 0, tier.stdout[-5000:] + tier.stderr[-2000:]

    workdir = tmp_path / "run"  # the small demo, made with the declarations before the recipe
    shutil.copytree(request.getfixturevalue("small_demo"), workdir, symlinks=True)
    assert scheduled_jobs(snakemake(workdir, SMALL_DEMO, *SMALL_DEMO_OUTPUTS, "-n")) == {}
    after = snakemake(workdir, SMALL_DEMO, *SMALL_DEMO_OUTPUTS, "-n", "-s", str(project / "Snakefile"), env=env)
    assert scheduled_jobs(after)["extract_statistics"] == SMALL_DEMO["shards"]
