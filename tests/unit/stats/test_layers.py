"""Per-layer statistics (ctxvar.stats.layers): the frequency filter's bounds inclusive, OLS as scipy's linregress
computes it and NaN where there is no line, a layer's row against brute force and NaN with no type in range, and the
decomposition V(X) = V_W + V_B checked within what the variance clamps take."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ctxvar.stats.finalize import clamp_variance
from ctxvar.stats.layers import decomposition, frequency_filter, layer_statistics, ols

from support.oracle import clusters, sums_of


def test_the_decomposition_holds_where_every_v_t_is_just_under_the_resolution():
    """V_t of (1 − 3·10⁻⁷ u)·10⁻⁹ Q_t is 0, V(X) is not: the check allows what the two clamps take."""
    rng, tried = np.random.default_rng(1), 0
    for _ in range(600):
        mean = rng.normal(0, 10, (50, 8))
        count = rng.integers(2, 100, 50)
        m = np.einsum("ud,ud->u", mean, mean)
        q = m / (1 - 1e-9 * (1 - rng.uniform(0, 3e-7)))
        v = clamp_variance(q - m, q)
        if (v == 0).all():  # else rounding left some V_t above the resolution
            tried += 1
            decomposition(count, mean, q, v)
    assert tried > 300


def test_frequency_filter_bounds_are_inclusive():
    count = np.array([9, 10, 11, 99_999, 100_000, 100_001])
    assert frequency_filter(count, 1, 5).tolist() == [False, True, True, True, True, False]


def test_ols_of_a_line_and_degenerate_cases():
    x = np.arange(5.0)
    assert ols(x, 3 - 2 * x) == pytest.approx((-2.0, 3.0, 1.0))
    assert np.isnan(ols(np.ones(4), x[:4])).all() and np.isnan(ols(x[:1], x[:1])).all()
    assert ols(x, np.full(5, 7.0)) == pytest.approx((0.0, 7.0, 0.0))  # a constant y: R² 0, as scipy gives it


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", ["outlier", "offset"])
def test_ols_is_scipys_linregress(seed, shape):
    """On V-on-M-like data: M over 7 decades (a decoder's sentence-start token), V noisy and falling with M; and
    M far from 0 beside its spread (10⁸ ± 1), where an uncentred fit loses its digits."""
    rng = np.random.default_rng(seed)
    x = np.r_[10 ** rng.uniform(0, 3, 300), 4e7] if shape == "outlier" else 1e8 + rng.uniform(-1, 1, 300)
    y = 50 - 0.01 * x + rng.normal(0, 20, len(x)) * (seed + 1)
    fit = stats.linregress(x, y)
    np.testing.assert_allclose(ols(x, y), (fit.slope, fit.intercept, fit.rvalue**2), rtol=1e-9)


def test_layer_statistics_match_brute_force():
    points, labels = clusters(seed=3)
    count, sum_, sum_sq = sums_of(points, labels)
    row = layer_statistics(count, sum_, sum_sq, layer=2, n_layers=5, min_log10_n=1, max_log10_n=5)
    kept = np.flatnonzero((count >= 10) & (count <= 100_000))
    x = points[np.isin(labels, kept)]
    lab = labels[np.isin(labels, kept)]
    mu = x.mean(0)
    type_means = np.array([points[labels == t].mean(0) for t in kept])
    q_t = np.array([(points[labels == t] ** 2).sum(1).mean() for t in kept])
    v_t = np.array([((points[labels == t] - type_means[i]) ** 2).sum(1).mean() for i, t in enumerate(kept)])
    m_t = (type_means**2).sum(1)
    expected = {
        "n_types": len(kept),
        "n": len(x),
        "depth": 0.5,
        "Q": (x**2).sum(1).mean(),
        "M": (mu**2).sum(),
        "V": ((x - mu) ** 2).sum(1).mean(),
        "V_W": np.mean([((x[i] - type_means[np.searchsorted(kept, lab[i])]) ** 2).sum() for i in range(len(x))]),
        "V_B": sum(count[t] * ((type_means[i] - mu) ** 2).sum() for i, t in enumerate(kept)) / len(x),
        "cv_Q": q_t.std() / q_t.mean(),
    }
    slope, intercept = np.polyfit(m_t, v_t, 1)
    expected.update(slope_VM=slope, intercept_VM=intercept, r2_VM=np.corrcoef(m_t, v_t)[0, 1] ** 2)
    for name, values in (("Q", q_t), ("M", m_t), ("V", v_t)):
        y = np.log10(1 + values)
        expected[f"slope_log{name}"] = np.polyfit(np.log10(count[kept]), y, 1)[0]
        expected[f"r2_log{name}"] = np.corrcoef(np.log10(count[kept]), y)[0, 1] ** 2
    for key, value in expected.items():
        assert row[key] == pytest.approx(value, rel=1e-9), key
    assert row["V"] == pytest.approx(row["V_W"] + row["V_B"], rel=1e-12)


def test_layer_with_no_type_in_range_gives_nans():
    row = layer_statistics(np.array([1, 2]), np.ones((2, 3)), np.ones(2) * 3, 0, 2, 1, 5)
    assert row["n_types"] == 0 and row["n"] == 0 and np.isnan(row["Q"]) and np.isnan(row["slope_VM"])
