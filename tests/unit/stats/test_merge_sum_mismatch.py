"""Partials or moments files holding different sums (geometry.cosine or geometry.covariance on for one, off for the
other, e.g. written by another ctxvar version under the same settings) stop the merge with one line naming both
files, their sums and which to delete."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.stats.merge import merge_layer_files, merge_partials
from ctxvar.stats.sums import LayerSums, LayerWriter, moments_schema, moments_table, write_sums

D, N_LAYERS = 3, 2
METADATA = {"n_layers": N_LAYERS, "d": D, "model_id": "m", "n_tokens": 4}


def partial(path, shard: int, cosine: bool, mtime: int) -> str:
    types, count = np.array(["a", "b"], object), np.array([1, 3])
    unit = np.ones((2, D)) if cosine else None
    layers = [
        LayerSums.of(i, types, count, sum=np.ones((2, D)), sum_sq=np.full(2, 9.0), sum_unit=unit)
        for i in range(N_LAYERS)
    ]
    write_sums(path, layers, D, {**METADATA, "shard": shard})
    os.utime(path, (mtime, mtime))
    return str(path)


def moments(path, shard: int, outer: bool) -> str:
    metadata = {**METADATA, "shard": shard}
    schema = moments_schema(D, metadata, outer=outer)
    with LayerWriter(path, schema) as writer:
        for layer in range(N_LAYERS):
            writer.write(moments_table(layer, 4, np.ones(D), np.eye(D) if outer else None, schema))
    return str(path)


def test_partials_with_and_without_the_cosine_sums_name_the_older(tmp_path):
    old = partial(tmp_path / "0.parquet", 0, cosine=False, mtime=1_000_000)
    new = partial(tmp_path / "1.parquet", 1, cosine=True, mtime=2_000_000)
    with pytest.raises(StatisticsError) as caught:
        merge_partials([new, old], tmp_path / "merged.parquet")
    message = str(caught.value)
    assert "\n" not in message
    assert f"{new} holds the sums ['sum_sq', 'sum', 'sum_unit'], {old} ['sum_sq', 'sum']" in message
    assert f"delete the older, {old}, and re-run" in message


def test_moments_with_and_without_the_outer_products_name_both(tmp_path):
    files = [moments(tmp_path / "0.moments.parquet", 0, True), moments(tmp_path / "1.moments.parquet", 1, False)]
    with pytest.raises(StatisticsError) as caught:
        merge_layer_files("moments", files, tmp_path / "merged.moments.parquet", {**METADATA, "shards": [0, 1]})
    message = str(caught.value)
    assert "\n" not in message
    assert f"{files[1]} holds the moments ['sum'], {files[0]} ['sum', 'sum_outer']" in message
