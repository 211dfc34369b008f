"""The points of the PCA figure (Fig. 1) a job keeps and merges: :class:`ctxvar.extraction.type_points.TypePoints`
keeps exactly the selected rows of their layer in batch order and refuses a batch left out; the merge
(:mod:`ctxvar.extraction.pca_points`) refuses a shard with no chosen types beside shards with them; and the disk
estimate of the points is bounded by the tokens and the types drawn."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ctxvar.extraction.type_points import TypePoints
from ctxvar.run.disk import ROW_OVERHEAD, pca_points_bytes
from ctxvar.run.resources import ModelShape


def test_type_points_keep_exactly_the_selected_rows_of_their_layer_in_batch_order():
    torch.manual_seed(0)
    hidden = [[torch.randn(2, 5, 6) for _ in range(3)] for _ in range(2)]  # per batch, per layer: (B, T, d)
    positions = [torch.tensor([0, 1, 2, 5, 6, 7]), torch.tensor([0, 1, 5])]
    type_index = np.array([0, 1, 2, 1, 3, 1, 3, 0, 1])  # the batches' tokens, in batch order
    batches = SimpleNamespace(
        type_index=type_index, tokens=np.array([4, 5, 6, 7, 8, 0, 1, 2, 3]), real=np.array([0, 6, 9])
    )
    points = TypePoints(1, np.array([False, True, False, True]), batches, 6, torch.device("cpu"))
    assert points.device_bytes() == 4 * 6 * 6
    for batch in range(2):
        for layer in range(3):
            points.add(layer, hidden[batch][layer].reshape(-1, 6), positions[batch])
    kept, batch_of, rows = points.to_numpy()
    expected = [hidden[0][1].reshape(-1, 6)[positions[0][[1, 3, 4, 5]]], hidden[1][1].reshape(-1, 6)[[0, 5]]]
    np.testing.assert_array_equal(kept, [1, 1, 3, 1, 3, 1])
    np.testing.assert_array_equal(batch_of, [0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(rows, torch.cat(expected).numpy())


def test_type_points_refuse_a_batch_left_out():
    batches = SimpleNamespace(type_index=np.array([0, 1]), tokens=np.array([0, 1]), real=np.array([0, 1, 2]))
    points = TypePoints(0, np.array([True, True]), batches, 2, torch.device("cpu"))
    points.add(0, torch.zeros(1, 2), torch.tensor([0]))
    with pytest.raises(RuntimeError, match="1 of 2 batches"):
        points.to_numpy()


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
