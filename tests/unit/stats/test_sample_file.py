"""The sample's file and its exact merge (ctxvar.stats.sample_file): a layer's sampled points and where each sits read
back as written; the bottom k of the shards' bottom k is the bottom k of the whole corpus, and the merge keeps the
smallest keys of the shards' samples in key order."""

from __future__ import annotations

import numpy as np

from ctxvar.extraction.position_sample import token_keys
from ctxvar.stats.sample_file import (
    bottom_k,
    merge_sample_layer,
    points,
    read_sample_layer,
    sample_schema,
    sample_table,
)
from ctxvar.stats.sums import LayerWriter


def test_bottom_k_of_shard_samples_is_the_bottom_k_of_all():
    keys = token_keys(np.arange(500), np.zeros(500), np.arange(0, 5001, 10), seed=3)
    assert len(np.unique(keys)) == len(keys)
    expected = np.sort(keys)[:50]
    shards = np.array_split(np.random.default_rng(0).permutation(len(keys)), 7)
    union = np.concatenate([shard[bottom_k(keys[shard], 50)] for shard in shards])
    np.testing.assert_array_equal(keys[union[bottom_k(keys[union], 50)]], expected)


def sample_of(layer: int, keys: list[int], d: int = 3) -> tuple[dict, np.ndarray]:
    """Where each of ``keys``'s points sits, and the points: key k at sentence k, position k % 5, token t{k}."""
    keys = np.array(keys, np.uint64)
    where = {
        "key": keys,
        "sentence_id": keys.astype(np.int64),
        "window": np.zeros(len(keys), np.int32),
        "position": (keys % 5).astype(np.int32),
        "token": np.array([f"t{k}" for k in keys], object),
    }
    return where, np.arange(len(keys) * d, dtype=np.float32).reshape(-1, d) + 100 * layer


def test_a_layers_sample_reads_back_as_written(tmp_path):
    schema = sample_schema(3, {"n_layers": 2})
    with LayerWriter(tmp_path / "0.sample.parquet", schema) as writer:
        for layer in range(2):
            writer.write(sample_table(layer, *sample_of(layer, [4, 9, 17]), schema))
    table = read_sample_layer(tmp_path / "0.sample.parquet", 1)
    where, rows = sample_of(1, [4, 9, 17])
    assert table.column("layer").to_pylist() == [1, 1, 1] and table.column("token").to_pylist() == ["t4", "t9", "t17"]
    assert table.column("position").to_pylist() == [4, 4, 2]
    np.testing.assert_array_equal(points(table), rows)


def test_the_merge_keeps_the_smallest_keys_of_the_shards_samples_in_key_order():
    schema = sample_schema(3, {"n_layers": 1})
    shards = [sample_table(0, *sample_of(0, keys), schema) for keys in ([5, 40, 41], [2, 30], [])]
    merged = merge_sample_layer(shards, 3)
    assert merged.column("key").to_pylist() == [2, 5, 30]
    assert merge_sample_layer(shards, 10).column("key").to_pylist() == [2, 5, 30, 40, 41]
