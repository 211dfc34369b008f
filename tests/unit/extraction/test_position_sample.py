"""The sample's position keys (ctxvar.extraction.position_sample): a token's key depends on its position alone
(sentence, window, position and seed), and split sentences' windows are numbered within their sentence."""

from __future__ import annotations

import numpy as np

from ctxvar.extraction.position_sample import sequence_windows, token_keys


def test_keys_depend_on_the_position_only():
    one = token_keys(np.array([4, 9]), np.array([0, 0]), np.array([0, 3, 8]), seed=1)
    alone = token_keys(np.array([9]), np.array([0]), np.array([0, 5]), seed=1)
    np.testing.assert_array_equal(one[3:], alone)
    assert not np.array_equal(token_keys(np.array([9]), np.array([1]), np.array([0, 5]), seed=1), alone)  # window
    assert not np.array_equal(token_keys(np.array([9]), np.array([0]), np.array([0, 5]), seed=2), alone)  # seed
    np.testing.assert_array_equal(sequence_windows(np.array([0, 1, 1, 1, 4, 5, 5])), [0, 0, 1, 2, 0, 0, 1])
