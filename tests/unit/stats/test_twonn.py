"""TwoNN (ctxvar.stats.twonn): the intrinsic dimension equals scikit-dimension's and recovers a plane, Gaussian points'
TwoNN, the null it is read against, is biased low in high dimension; the two nearest neighbours are brute force's in
every block, duplicates and fewer than three points are refused, and Razzhigaev et al.'s variant fits the smallest fifth
of the ratios with duplicates kept in N."""

from __future__ import annotations

import numpy as np
import pytest
import skdim

from ctxvar.errors import StatisticsError
from ctxvar.stats import twonn
from ctxvar.stats.twonn import gaussian_twonn, twonn_dimension


def test_twonn_equals_scikit_dimension_and_recovers_a_plane():
    rng = np.random.default_rng(2)
    plane = rng.standard_normal((1500, 2)) @ rng.standard_normal((2, 30))
    assert twonn_dimension(plane) == pytest.approx(skdim.id.TwoNN().fit(plane).dimension_, rel=1e-9)
    assert twonn_dimension(plane) == pytest.approx(2, rel=0.1)
    assert gaussian_twonn(2000, 5, seed=0) == pytest.approx(5, rel=0.15)
    assert gaussian_twonn(2000, 200, seed=0) < 100  # biased low in high dimension: why the null is reported


def test_the_two_nearest_neighbours_are_brute_forces_across_blocks(monkeypatch):
    monkeypatch.setattr(twonn, "BLOCK_ROWS", 7)  # 60 rows: nine blocks, the last short
    points = np.random.default_rng(5).normal(size=(60, 4)) + 100  # far from 0: the Gram formula's cancellation
    r1, r2 = twonn.two_nearest(points)
    distances = np.linalg.norm(points[:, None] - points[None], axis=2)
    np.fill_diagonal(distances, np.inf)
    nearest = np.sort(distances, axis=1)
    np.testing.assert_allclose(r1, nearest[:, 0], rtol=1e-13)
    np.testing.assert_allclose(r2, nearest[:, 1], rtol=1e-13)


def test_duplicates_and_fewer_than_three_points_are_refused_and_duplicates_can_be_removed():
    with pytest.raises(StatisticsError, match="at least 3 distinct points, got 2; raise geometry.sample_size"):
        twonn.twonn_dimension(np.eye(2))
    points = np.vstack([np.eye(4), np.eye(4)[:1]])
    with pytest.raises(StatisticsError, match="duplicate points"):
        twonn.twonn_dimension(points)
    np.testing.assert_array_equal(twonn.distinct_points(points), np.eye(4)[::-1])


def test_razzhigaevs_variant_keeps_duplicates_in_n_and_fits_the_smallest_fifth():
    """Ratios by hand: two duplicates (μ = −1) and a tie (μ = 1) dropped from the fit and kept in N = 13."""
    r1 = np.array([0.0, 0.0, 1.0] + [1.0] * 10)
    r2 = np.array([1.0, 1.0, 1.0] + [1.5, 2.0, 1.2, 3.0, 1.1, 4.0, 2.5, 1.3, 5.0, 6.0])
    kept = np.sort(r2[3:])[:2]  # m = 10 kept ratios: the smallest ⌊10/5⌋ = 2
    log_mu, y = np.log(kept), -np.log(1 - np.arange(4, 6) / 13)
    assert twonn.razzhigaev_twonn(r1, r2, scale=1.0) == pytest.approx(log_mu @ y / (log_mu @ log_mu), rel=1e-14)
    assert np.isnan(twonn.razzhigaev_twonn(np.ones(4), np.full(4, 2.0), scale=1.0))  # too few ratios to fit
