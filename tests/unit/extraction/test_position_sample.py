"""The sample's position keys (ctxvar.extraction.position_sample): SplitMix64 as published, a key for every token that
depends on its position alone (sentence, window, position and seed), and split sentences' windows numbered within their
sentence."""

from __future__ import annotations

import numpy as np

from ctxvar.extraction.position_sample import GOLDEN, sequence_windows, splitmix64, token_keys


def test_keys_depend_on_the_position_only():
    one = token_keys(np.array([4, 9]), np.array([0, 0]), np.array([0, 3, 8]), seed=1)
    alone = token_keys(np.array([9]), np.array([0]), np.array([0, 5]), seed=1)
    np.testing.assert_array_equal(one[3:], alone)
    assert not np.array_equal(token_keys(np.array([9]), np.array([1]), np.array([0, 5]), seed=1), alone)  # window
    assert not np.array_equal(token_keys(np.array([9]), np.array([0]), np.array([0, 5]), seed=2), alone)  # seed
    np.testing.assert_array_equal(sequence_windows(np.array([0, 1, 1, 1, 4, 5, 5])), [0, 0, 1, 2, 0, 0, 1])


def test_splitmix64_is_the_published_generators_sequence():
    """SplitMix64 seeded 0 (Vigna's splitmix64.c) begins 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
    0x06C45D188009454F: its state before the i-th output is i times the golden increment."""
    state = np.arange(3, dtype=np.uint64) * GOLDEN
    expected = np.array([0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F], np.uint64)
    np.testing.assert_array_equal(splitmix64(state), expected)


def test_every_token_of_every_sequence_gets_its_own_key():
    offsets = np.array([0, 3, 3, 8])  # three sequences, the second empty
    keys = token_keys(np.array([5, 6, 7]), np.zeros(3), offsets, seed=0)
    assert keys.dtype == np.uint64 and len(keys) == 8 and len(np.unique(keys)) == 8
    np.testing.assert_array_equal(keys[3:], token_keys(np.array([7]), np.zeros(1), np.array([0, 5]), seed=0))
