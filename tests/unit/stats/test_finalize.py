"""Unit tier: per-type Q, M and V from the sums (ctxvar.stats.finalize) against definitions on synthetic vectors: V of a
single occurrence or of identical ones exactly 0, clamped to 0 within rounding and refused beyond it, NaN kept; and
self-similarity, the mean pairwise cosine within a type."""

import numpy as np
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.stats.finalize import clamp_variance, finalize, self_similarity

from support.oracle import clusters, sums_of


@pytest.mark.parametrize("offset", [0.0, 30.0])
def test_finalize_matches_definitions(offset):
    points, labels = clusters(offset=offset)
    mean, q, m, v = finalize(*sums_of(points, labels))
    for t in range(labels.max() + 1):
        x = points[labels == t]
        assert q[t] == pytest.approx((x**2).sum(1).mean(), rel=1e-12)
        assert m[t] == pytest.approx((x.mean(0) ** 2).sum(), rel=1e-12)
        assert v[t] == pytest.approx(((x - x.mean(0)) ** 2).sum(1).mean(), rel=1e-9, abs=1e-9 * q[t])


def test_single_occurrence_has_zero_variance():
    x = np.array([[0.1, 0.7, -3.3]])
    _, q, m, v = finalize(np.array([1]), x, (x**2).sum(1))
    assert v[0] == 0.0 and q[0] == pytest.approx(m[0])


def test_types_whose_occurrences_are_identical_have_a_variance_of_exactly_0():
    """n_t = 1, or n_t copies of one vector (the first token of a causal model): Q − M rounds to ±10⁻¹⁶–10⁻¹³ Q,
    which a log axis would draw 13 decades below the other types; V is 0."""
    rng = np.random.default_rng(0)
    x = rng.normal(0, 30, (500, 64))
    count = rng.integers(1, 3000, 500)
    sum_ = x * count[:, None]
    sum_sq = (x**2).sum(1) * count
    _, q, m, v = finalize(count, sum_, sum_sq)
    assert (np.abs(q - m) > 0).any()  # rounding left something for V to remove
    assert (v == 0.0).all()


def test_nan_variance_stays_nan():
    assert np.isnan(clamp_variance(np.array([np.nan]), np.array([np.nan]))).all()
    assert np.isnan(clamp_variance(np.array([np.nan]), np.array([1.0]))).all()


def test_variance_above_the_resolution_is_kept():
    assert clamp_variance(np.array([2e-9]), np.array([1.0]))[0] == 2e-9
    assert clamp_variance(np.array([5e-10]), np.array([1.0]))[0] == 0.0


def test_negative_variance_beyond_rounding_is_an_error():
    assert clamp_variance(np.array([-1e-12]), np.array([10.0]))[0] == 0.0
    with pytest.raises(StatisticsError, match="negative beyond rounding"):
        clamp_variance(np.array([-1e-3]), np.array([10.0]))


def test_self_similarity_is_the_mean_pairwise_cosine_within_a_type():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 5)) + 3
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    pairs = [unit[i] @ unit[j] for i in range(7) for j in range(7) if i != j]
    got = self_similarity(np.array([7, 1]), np.stack([unit.sum(0), unit[0]]))
    assert got[0] == pytest.approx(np.mean(pairs)) and np.isnan(got[1])
