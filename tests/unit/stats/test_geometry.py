"""Unit tier: the geometry metrics' formulas (ctxvar.stats.geometry): Gaussian vectors' anisotropy at the
Marchenko–Pastur edge and their mean cosine of zero, and the spectrum metrics of a known covariance."""

from __future__ import annotations

import numpy as np
import pytest

from ctxvar.stats.geometry import covariance, mean_cosine, rank_metrics, spectrum_metrics

from support.oracle import moments_of


def test_gaussian_null_anisotropy_is_the_marchenko_pastur_edge_and_cosine_is_zero():
    n, d = 40_000, 64
    x = np.random.default_rng(0).standard_normal((n, d))
    metrics = spectrum_metrics(covariance(*moments_of(x)), 3)
    edge = (1 + np.sqrt(d / n)) ** 2 / d
    assert metrics["anisotropy"] == pytest.approx(edge, rel=0.03)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert abs(mean_cosine(n, unit.sum(0))) < 5 / n**0.5 / d**0.5
    assert metrics["isoscore"] > 0.95 and rank_metrics(*moments_of(x))["effective_rank"] > 0.95 * d


def test_spectrum_metrics_of_a_known_covariance():
    c = np.diag([4.0, 2.0, 1.0, 1.0])
    metrics = spectrum_metrics(c, 2)
    assert metrics["anisotropy"] == pytest.approx(0.5) and metrics["explained_2"] == pytest.approx(0.25)
    pr = 8.0**2 / (16 + 4 + 1 + 1)
    assert metrics["participation_ratio"] == pytest.approx(pr) and metrics["isoscore"] == pytest.approx((pr - 1) / 3)
    p = np.array([0.5, 0.25, 0.125, 0.125])
    ranks = rank_metrics(1, np.zeros(4), c)  # N = 1, μ = 0: C = Σxxᵀ
    assert ranks["effective_rank_covariance"] == pytest.approx(np.exp(-(p * np.log(p)).sum()))
    assert spectrum_metrics(np.eye(3), 1)["isoscore"] == pytest.approx(1.0)
