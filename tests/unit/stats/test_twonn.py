"""TwoNN (ctxvar.stats.twonn): the intrinsic dimension equals scikit-dimension's and recovers a plane; Gaussian points'
TwoNN, the null it is read against, is biased low in high dimension."""

from __future__ import annotations

import numpy as np
import pytest
import skdim

from ctxvar.stats.twonn import gaussian_twonn, twonn_dimension


def test_twonn_equals_scikit_dimension_and_recovers_a_plane():
    rng = np.random.default_rng(2)
    plane = rng.standard_normal((1500, 2)) @ rng.standard_normal((2, 30))
    assert twonn_dimension(plane) == pytest.approx(skdim.id.TwoNN().fit(plane).dimension_, rel=1e-9)
    assert twonn_dimension(plane) == pytest.approx(2, rel=0.1)
    assert gaussian_twonn(2000, 5, seed=0) == pytest.approx(5, rel=0.15)
    assert gaussian_twonn(2000, 200, seed=0) < 100  # biased low in high dimension: why the null is reported
