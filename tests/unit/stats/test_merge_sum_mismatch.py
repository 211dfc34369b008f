"""Partials or moments files holding different sums (geometry.cosine or geometry.covariance on for one, off for the
other, e.g. written by another ctxvar version under the same settings) stop the merge with one line naming both
files, their sums and which to delete."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.stats.declarations import kept_layer_sums
from ctxvar.stats.merge import merge_layer_files, merge_partials
from ctxvar.stats.sums import LayerWriter, moments_schema, moments_table, write_sums

from support.declared_sums import COSINE, layer_sums_of, layer_values, sum_names

D, N_LAYERS = 3, 2
METADATA = {"n_layers": N_LAYERS, "d": D, "model_id": "m", "n_tokens": 4}


def partial(path, shard: int, cosine: bool, mtime: int) -> str:
    """A partial of two types over four points, with every sum the geometry keeps (Σ x/‖x‖ with ``cosine``)."""
    types, labels = np.array(["a", "b"], object), np.array([0, 1, 1, 1])
    points = np.arange(4 * D, dtype=np.float64).reshape(4, D) + 1
    layers = [layer_sums_of(i, types, labels, points, {"cosine": cosine}) for i in range(N_LAYERS)]
    write_sums(path, layers, D, {**METADATA, "shard": shard})
    os.utime(path, (mtime, mtime))
    return str(path)


def moments(path, shard: int, outer: bool) -> str:
    metadata = {**METADATA, "shard": shard}
    schema = moments_schema(D, metadata, outer=outer, layer_sums=[item.name for item in kept_layer_sums({})])
    points = np.ones((4, D))
    with LayerWriter(path, schema) as writer:
        for layer in range(N_LAYERS):
            sum_, outer_ = points.sum(axis=0), points.T @ points if outer else None
            writer.write(moments_table(layer, len(points), sum_, outer_, schema, layer_values(points, {})))
    return str(path)


def test_partials_with_and_without_the_cosine_sums_name_the_older(tmp_path):
    old = partial(tmp_path / "0.parquet", 0, cosine=False, mtime=1_000_000)
    new = partial(tmp_path / "1.parquet", 1, cosine=True, mtime=2_000_000)
    with pytest.raises(StatisticsError) as caught:
        merge_partials([new, old], tmp_path / "merged.parquet")
    message = str(caught.value)
    assert "\n" not in message
    assert f"{new} holds the sums {list(sum_names(COSINE))}, {old} {list(sum_names({}))}" in message
    assert f"delete the older, {old}, and re-run" in message


def test_moments_with_and_without_the_outer_products_name_both(tmp_path):
    files = [moments(tmp_path / "0.moments.parquet", 0, True), moments(tmp_path / "1.moments.parquet", 1, False)]
    with pytest.raises(StatisticsError) as caught:
        merge_layer_files("moments", files, tmp_path / "merged.moments.parquet", {**METADATA, "shards": [0, 1]})
    message = str(caught.value)
    assert "\n" not in message
    per_layer = [item.name for item in kept_layer_sums({})]
    assert (
        f"{files[1]} holds the moments {['sum', *per_layer]}, {files[0]} {['sum', 'sum_outer', *per_layer]}" in message
    )
