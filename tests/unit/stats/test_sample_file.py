"""The sample's file and merge (ctxvar.stats.sample_file): the bottom k of the shards' bottom k is the bottom k of the
whole corpus."""

from __future__ import annotations

import numpy as np

from ctxvar.extraction.position_sample import token_keys
from ctxvar.stats.sample_file import bottom_k


def test_bottom_k_of_shard_samples_is_the_bottom_k_of_all():
    keys = token_keys(np.arange(500), np.zeros(500), np.arange(0, 5001, 10), seed=3)
    assert len(np.unique(keys)) == len(keys)
    expected = np.sort(keys)[:50]
    shards = np.array_split(np.random.default_rng(0).permutation(len(keys)), 7)
    union = np.concatenate([shard[bottom_k(keys[shard], 50)] for shard in shards])
    np.testing.assert_array_equal(keys[union[bottom_k(keys[union], 50)]], expected)
