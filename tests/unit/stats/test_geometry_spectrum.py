"""Unit tier: the spectrum metrics of ctxvar.stats.geometry. The three effective ranks from N, Σx, Σxxᵀ against
the papers' definitions on the data matrix; ``isoscore`` against the IsoScore package (Rudman et al., Findings of
ACL 2022; PyPI IsoScore 2.0.1) on the same points, its closed form (PR − 1)/(d − 1) from the per-layer sums equal
to the package's algorithm; and a layer whose embeddings are all identical (a LayerNorm with zero gain: every token
gets its bias), which has no spectrum: its isotropy metrics and effective ranks are NaN in geometry.csv, with a
warning naming the layer, and the other layers' rows are computed."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from IsoScore.IsoScore import IsoScore

from ctxvar.stats.geometry import covariance, covariance_metrics, rank_metrics, spectrum_metrics

from support.effective_rank_reference import entropy_rank, rankme, roy_vetterli_effective_rank
from support.oracle import moments_of

RTOL = 1e-6


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


SPECTRUM_K = 3


def moments(x: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    return len(x), x.sum(axis=0), x.T @ x


def test_identical_embeddings_give_nan_metrics_and_a_warning_naming_the_layer(caplog):
    collapsed = np.full((20, 6), 0.5)
    with caplog.at_level(logging.WARNING):
        metrics = covariance_metrics(*moments(collapsed), SPECTRUM_K, layer=4)
    assert metrics and all(np.isnan(value) for value in metrics.values())
    assert {"anisotropy", "explained_3", "isoscore", "effective_rank", "rankme"} <= set(metrics)
    assert "layer 4" in caplog.text and "identical" in caplog.text


def test_spread_embeddings_give_the_metrics():
    spread = np.random.default_rng(0).standard_normal((50, 6))
    metrics = covariance_metrics(*moments(spread), SPECTRUM_K, layer=0)
    assert all(np.isfinite(value) for value in metrics.values())
    assert 0 < metrics["anisotropy"] < 1 and 1 < metrics["effective_rank"] <= 6


@pytest.mark.parametrize("seed, offset", [(0, 0.0), (1, 50.0), (2, 1e4)])
def test_isoscore_equals_the_isoscore_package(seed, offset):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(3000, 24)) * np.geomspace(10, 0.1, 24) @ np.linalg.qr(rng.normal(size=(24, 24)))[0]
    points += offset
    ours = spectrum_metrics(covariance(len(points), points.sum(0), points.T @ points), 1)["isoscore"]
    assert ours == pytest.approx(float(IsoScore(points)), rel=1e-6)
