"""Unit tier: the three effective ranks from N, Σx, Σxxᵀ against the papers' definitions on the data matrix."""

from __future__ import annotations

import numpy as np
import pytest

from ctxvar.stats.geometry import rank_metrics

from support.effective_rank_reference import entropy_rank, rankme, roy_vetterli_effective_rank

RTOL = 1e-6


def moments_of(x: np.ndarray):
    return len(x), x.sum(0), x.T @ x


@pytest.mark.parametrize("n, d, offset", [(500, 12, 0.0), (500, 12, 30.0), (7, 12, 3.0), (2000, 40, 1e3)])
def test_effective_ranks_match_the_data_matrix_svd(n, d, offset):
    """Anisotropic data, off-centre (offset), and fewer tokens than dimensions (n = 7: RankMe has 7 values)."""
    rng = np.random.default_rng(n + d)
    x = rng.standard_normal((n, d)) * np.geomspace(5, 0.1, d) + offset
    got = rank_metrics(*moments_of(x))
    centred = x - x.mean(0)
    lam = np.linalg.eigvalsh(np.cov(x.T, bias=True))
    assert got["effective_rank"] == pytest.approx(roy_vetterli_effective_rank(centred), rel=RTOL)
    assert got["effective_rank_covariance"] == pytest.approx(entropy_rank(lam / lam.sum()), rel=RTOL)
    assert got["rankme"] == pytest.approx(rankme(x), rel=RTOL)


def test_singular_value_rank_exceeds_the_covariance_rank_on_a_decaying_spectrum():
    """p ∝ √λ is flatter than p ∝ λ: the same name for the two would differ by a factor, not a rounding."""
    x = np.random.default_rng(0).standard_normal((4000, 64)) * np.geomspace(10, 0.01, 64)
    got = rank_metrics(*moments_of(x))
    assert got["effective_rank"] > 1.5 * got["effective_rank_covariance"]


def test_known_spectrum():
    """C = diag(4, 1) from N = 2 centred points: σ ∝ (2, 1) so p = (2/3, 1/3); λ-weights (4/5, 1/5)."""
    x = np.array([[2.0, 1.0], [-2.0, -1.0], [2.0, -1.0], [-2.0, 1.0]])
    got = rank_metrics(*moments_of(x))
    assert got["effective_rank"] == pytest.approx(entropy_rank(np.array([2, 1]) / 3))
    assert got["effective_rank_covariance"] == pytest.approx(entropy_rank(np.array([4, 1]) / 5))
