"""The points of the PCA figure (Fig. 1) merged (ctxvar.extraction.pca_points): the merge refuses a shard with no chosen
types beside shards with them; and the disk estimate of the points is bounded by the tokens and the types drawn."""

from __future__ import annotations

import numpy as np
import pytest

from ctxvar.run.disk import ROW_OVERHEAD, pca_points_bytes
from ctxvar.run.resources import ModelShape


def test_the_disk_estimate_of_fig1_points_is_bounded_by_the_tokens_and_the_types_drawn():
    shape = ModelShape(13, 768, 30522)
    config = {"figures": {"pca": {"n_bins": 10}}, "analysis": {"max_log10_n": 2}}
    assert pca_points_bytes(1000, shape, config) == 1000 * (4 * 768 + ROW_OVERHEAD)
    assert pca_points_bytes(10**6, shape, config) == 6 * 10 * 100 * (4 * 768 + ROW_OVERHEAD)


def test_merged_points_refuse_a_shard_with_no_chosen_types_beside_shards_with_them(tmp_path):
    """A shard's file of no layer (written when types.csv chose none) beside files of a layer: the shards were
    extracted with different choices, and the merged file would lack that shard's points without a word."""
    import pyarrow as pa

    from ctxvar.errors import StatisticsError
    from ctxvar.extraction.pca_points import merge_points, points_schema
    from ctxvar.files.parquet import vector_column, write_table

    d = 2
    rows = np.ones((1, d), np.float32)
    chosen = pa.table([pa.array(["a"]), pa.array([0], pa.int32()), vector_column(rows, "<f4")], schema=points_schema(d))
    write_table(chosen, tmp_path / "points0.parquet", metadata={"model_id": "m", "shard": 0, "layer": 1, "d": d})
    none = {"model_id": "m", "shard": 1, "layer": None, "d": d}
    write_table(points_schema(d).empty_table(), tmp_path / "points1.parquet", metadata=none)
    with pytest.raises(StatisticsError, match="do not belong with"):
        merge_points([tmp_path / "points0.parquet", tmp_path / "points1.parquet"], tmp_path / "points.parquet")
    merge_points([tmp_path / "points1.parquet"], tmp_path / "none.parquet")  # no types chosen at all: one layer
