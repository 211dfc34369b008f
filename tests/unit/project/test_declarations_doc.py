"""docs/outputs.md lists every declared sum and every column it finalizes into, as the declarations give them."""

from __future__ import annotations

from ctxvar.stats.declarations import docs_rows, layer_docs_rows

from support.workflow_runs import REPO

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
