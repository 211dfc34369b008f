"""A layer whose embeddings are all identical (a LayerNorm with zero gain: every token gets its bias) has no
spectrum: its isotropy metrics and effective ranks are NaN in geometry.csv, with a warning naming the layer,
and the other layers' rows are computed; before, the whole geometry job failed with a line naming neither."""

from __future__ import annotations

import logging

import numpy as np

from ctxvar.stats.geometry import covariance_metrics

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
