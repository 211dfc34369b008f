"""docs/outputs.md names the files and columns the code writes, and every results path the manual names elsewhere
(README.md, docs/, config/README.md, the shipped configs' comments) is one docs/outputs.md documents; it and
docs/geometry.md list every declared sum and every column it finalizes into, as the declarations give them, and
docs/geometry.md every geometry.csv column. The workflow tier checks the same tables against the demo's files
(tests/workflow/test_documented_outputs_workflow.py); these need no run."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ctxvar.figures.pca_selection import SELECTION_COLUMNS
from ctxvar.stats import declarations
from ctxvar.stats.declarations import docs_rows, layer_docs_rows
from ctxvar.stats.embedding_matrices import MATRIX_COLUMNS
from ctxvar.stats.geometry import geometry_columns
from ctxvar.stats.layers import COLUMNS as LAYER_COLUMNS
from ctxvar.stats.pca_components import components_table
from ctxvar.stats.provenance import SUMS_COLUMN
from ctxvar.stats.sample_file import sample_schema
from ctxvar.stats.summary import MODEL_COLUMNS
from ctxvar.stats.sums import KEY_COLUMNS, moments_schema, sums_schema
from ctxvar.stats.word_files import sentences_schema, words_schema

from support.documented_outputs import (
    column_differences,
    documented_columns,
    file_rows,
    layout_rows,
    parquet_type,
    path_regex,
    sample_path,
)
from support.workflow_runs import REPO

MANUAL = [  # and the shipped configs' comments
    REPO / "README.md",
    REPO / "config" / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "config.yaml",
    *sorted((REPO / "config").glob("*.yaml")),
]
RESULTS_PATH = re.compile(r"results/(?=\{)(?:\{[^{}\s]*\}|[^\s`|,;(){}])+")  # with placeholders: results/{run}/…


def row_of(name: str):
    """The file-table row whose first path ends with ``name``."""
    rows = file_rows()
    found = [row for row in rows if row.paths[0].endswith(name)]
    assert len(found) == 1, f"{len(found)} rows of docs/outputs.md's file table end with {name}"
    return found[0], rows


def is_documented(path: str) -> bool:
    """Whether a results path the manual names (with placeholders) is one the file table documents, a figure's
    name without its extensions (docs/figures.md), or a folder that holds one."""
    sample, patterns = sample_path(path), [pattern for row in file_rows() for pattern in row.paths]
    if sample.endswith("/"):
        return any(sample_path(pattern).startswith(sample) for pattern in patterns)
    figure = sample + ".png" if "." not in sample.rsplit("/", 1)[-1] else sample
    return any(path_regex(pattern, "xrun").fullmatch(figure) for pattern in patterns)


def test_every_results_path_the_manual_names_is_documented_in_outputs():
    named = {
        (page.relative_to(REPO).as_posix(), path) for page in MANUAL for path in RESULTS_PATH.findall(page.read_text())
    }
    assert named, "no results/{run}/… path found: the pattern no longer reads the manual"
    assert sorted(f"{page}: {path}" for page, path in named if not is_documented(path.rstrip(".:"))) == []


def test_every_file_name_the_configuration_reference_gives_is_a_documented_file():
    """config/README.md, generated from the schema, names result files in its descriptions."""
    text = (REPO / "config" / "README.md").read_text()
    names = set(re.findall(r"[\w{}.-]+\.(?:parquet|csv|json)\b", text))
    documented = {sample_path(path).rsplit("/", 1)[-1] for row in file_rows() for path in row.paths}
    assert {sample_path(name).rsplit("/", 1)[-1] for name in names} - documented == set()


@pytest.mark.parametrize(
    ("name", "written"),
    [
        ("{id}/layers.csv", LAYER_COLUMNS),
        ("summary/layers.csv", ["model", *LAYER_COLUMNS]),
        ("summary/models.csv", MODEL_COLUMNS),
        ("{id}/geometry.csv", geometry_columns(3)),
        ("summary/geometry.csv", ["model", *geometry_columns(3)]),
        ("{id}/embedding_matrices.csv", MATRIX_COLUMNS),
        ("pca/selection.csv", [*SELECTION_COLUMNS, SUMS_COLUMN]),
        ("pca/components.csv", list(components_table(np.zeros((2, 3))).columns)),
        ("{id}/tokens.parquet", [*KEY_COLUMNS, *(c.name for item in declarations.TYPE_SUMS for c in item.columns)]),
    ],
)
def test_the_documented_columns_are_the_ones_the_code_writes(name, written):
    row, rows = row_of(name)
    missing, extra = column_differences(documented_columns(row, rows), list(written))
    assert (missing, extra) == ([], []), f"{name}: documented, not written: {missing}; written, not documented: {extra}"


def test_the_sums_layout_table_is_the_schemas_the_code_writes():
    d = 3
    schemas = {
        "sums.parquet": sums_schema(d, {}, [item.name for item in declarations.TYPE_SUMS]),
        "sums.moments.parquet": moments_schema(d, {}, layer_sums=[item.name for item in declarations.LAYER_SUMS]),
        "sums.sample.parquet": sample_schema(d, {}),
        "sums.words.parquet": words_schema(d, {}),
        "sums.sentences.parquet": sentences_schema({}),
    }
    layouts = layout_rows()
    assert sorted(layouts) == sorted(schemas)
    for name, schema in schemas.items():
        assert [(column, parquet_type(kind, d)) for column, kind in layouts[name]] == [
            (field.name, field.type) for field in schema
        ], name


def test_each_merged_sums_file_row_names_its_layouts_columns():
    """The file table's row of each merged sums file lists the columns of its layout table."""
    for name, layout in layout_rows().items():
        row, rows = row_of("{id}/" + name)
        missing, extra = column_differences(documented_columns(row, rows), [column for column, _ in layout])
        assert (missing, extra) == ([], []), (
            f"{name}: in the file table, not the layout: {missing}; the reverse: {extra}"
        )


OUTPUTS = REPO / "docs" / "outputs.md"


def test_outputs_doc_holds_the_declared_rows_in_order():
    lines = OUTPUTS.read_text(encoding="utf-8").splitlines()
    for rows in docs_rows():
        start = lines.index(rows[0])
        assert lines[start : start + len(rows)] == rows


def test_geometry_and_outputs_docs_hold_the_declared_layer_rows():
    """Each declared per-layer sum's row in the moments table of docs/outputs.md, its columns in docs/geometry.md."""
    sums, columns = layer_docs_rows()
    outputs = OUTPUTS.read_text(encoding="utf-8").splitlines()
    geometry = (OUTPUTS.parent / "geometry.md").read_text(encoding="utf-8").splitlines()
    assert all(row in outputs for row in sums)
    assert all(row in geometry for row in columns)


def test_every_geometry_column_is_in_the_geometry_doc():
    text = (REPO / "docs" / "geometry.md").read_text()
    columns = [c for c in geometry_columns(1) if not c.startswith("explained_")]
    assert "`explained_1` … `explained_k`" in text
    assert [c for c in columns if f"`{c}`" not in text] == []


def test_every_embedding_matrix_column_is_in_the_outputs_doc():
    from ctxvar.stats.embedding_matrices import MATRIX_COLUMNS

    text = (REPO / "docs" / "outputs.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `results/{run}/{id}/embedding_matrices.csv`"))
    assert [c for c in MATRIX_COLUMNS if f"`{c}`" not in row] == []
