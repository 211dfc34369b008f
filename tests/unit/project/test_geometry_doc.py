"""docs/geometry.md documents every geometry.csv column (the manual lists what the code writes)."""

from __future__ import annotations

from ctxvar.stats.geometry import geometry_columns

from support.workflow_runs import REPO


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
