"""Unit tier: finalize, combine and per-layer statistics against definitions on synthetic vectors."""

import numpy as np
import pytest
import torch
from scipy import stats

from ctxvar.errors import StatisticsError
from ctxvar.extraction.accumulator import CPU_CHUNK_ROWS, EmbeddingSums, GeometryOptions, column_sums
from ctxvar.extraction.budget import batch_bytes, check_one_layer_fits, device_layers, state_bytes
from ctxvar.stats.finalize import clamp_variance, finalize
from ctxvar.stats.layers import decomposition, frequency_filter, layer_statistics, ols


def clusters(seed=0, n_types=40, d=6, offset=0.0):
    """Per-type point clouds with Zipf-ish counts; returns (points, type labels)."""
    rng = np.random.default_rng(seed)
    counts = np.maximum(1, (2000 / np.arange(1, n_types + 1) ** 1.1).astype(int))
    labels = np.repeat(np.arange(n_types), counts)
    means = rng.normal(size=(n_types, d)) * rng.uniform(0.2, 3, size=(n_types, 1))
    points = offset + means[labels] + rng.normal(size=(len(labels), d)) * rng.uniform(0.1, 2, size=(n_types, 1))[labels]
    return points, labels


def sums_of(points, labels):
    n_types = labels.max() + 1
    count = np.bincount(labels, minlength=n_types)
    sum_ = np.zeros((n_types, points.shape[1]))
    np.add.at(sum_, labels, points)
    return count, sum_, np.bincount(labels, weights=(points**2).sum(1), minlength=n_types)


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


def test_variance_above_the_resolution_is_kept():
    assert clamp_variance(np.array([2e-9]), np.array([1.0]))[0] == 2e-9
    assert clamp_variance(np.array([5e-10]), np.array([1.0]))[0] == 0.0


def test_negative_variance_beyond_rounding_is_an_error():
    assert clamp_variance(np.array([-1e-12]), np.array([10.0]))[0] == 0.0
    with pytest.raises(StatisticsError, match="negative beyond rounding"):
        clamp_variance(np.array([-1e-3]), np.array([10.0]))


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


def test_the_leading_layers_on_the_device_keep_the_state_under_the_cap():
    # Llama-size: 128k types, d = 4096, 33 hidden states: 138 GB of sums in one pass
    assert state_bytes(33, 128_000, 4096) > 138e9
    on_device = device_layers(33, 128_000, 4096, max_state_bytes=40e9)
    assert on_device == 9 and state_bytes(9, 128_000, 4096) <= 40e9 < state_bytes(10, 128_000, 4096)
    assert device_layers(13, 20_000, 768, float("inf")) == 13
    assert device_layers(33, 128_000, 4096, max_state_bytes=1e9) == 0  # all of them in host memory


def test_a_cap_below_one_layer_is_refused_where_one_layer_must_fit():
    with pytest.raises(StatisticsError, match="raise max_state_mb"):
        check_one_layer_fits(128_000, 4096, max_state_bytes=1e9)


@pytest.mark.parametrize(
    "options",
    [GeometryOptions(), GeometryOptions(covariance=True, cosine=True, sample_size=5)],
    ids=["chunks gathered one by one", "one gather for the Gram matrix"],
)
def test_type_sums_over_many_chunks_are_those_of_the_kept_rows(options):
    # more real tokens than CPU_CHUNK_ROWS, scattered among padding: every chunk must gather its own positions
    rng = np.random.default_rng(1)
    n_hidden, d, n_types = 3, 8, 50
    hidden = [torch.randn(5, 200, d) for _ in range(n_hidden)]
    positions = np.sort(rng.choice(1000, size=2 * CPU_CHUNK_ROWS + 77, replace=False))
    labels = rng.integers(0, n_types, size=len(positions))
    sample_tokens = np.array([0, 3, 100, 300, len(positions) - 1]) if options.sample_size else None
    sums = EmbeddingSums(range(1, 3), n_hidden, n_types, d, torch.device("cpu"), options, sample_tokens)
    hits = sums.sample.locate(np.arange(len(positions)), np.array([0, len(positions)]))[0] if sums.sample else None
    sums.accumulate(hidden, torch.from_numpy(positions), torch.from_numpy(labels), hits)
    arrays = sums.types.to_numpy()
    for i, layer in enumerate((1, 2)):
        kept = hidden[layer].reshape(-1, d).numpy().astype(np.float64)[positions]
        count, sum_, sum_sq = sums_of(kept, labels)
        np.testing.assert_array_equal(arrays["count"], count)
        np.testing.assert_allclose(arrays["sum"][i], sum_, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(arrays["sum_sq"][i], sum_sq, rtol=1e-12)
        if options.sample_size:
            np.testing.assert_array_equal(sums.sample.to_numpy()[i], kept[sample_tokens].astype(np.float32))


def test_column_sums_over_chunks_are_the_float64_sums():
    x = (1e4 + np.random.default_rng(2).standard_normal((3 * CPU_CHUNK_ROWS + 5, 7))).astype(np.float32)
    ours = column_sums(torch.from_numpy(x))
    assert ours.dtype == torch.float64
    np.testing.assert_allclose(ours.numpy(), x.astype(np.float64).sum(0), rtol=1e-15)


def test_device_state_is_what_the_memory_model_says():
    sums = EmbeddingSums(range(2, 5), 6, n_types=300, d=16, device=torch.device("cpu"))
    tensors = (
        sums.types.count,
        *sums.types.sums.values(),
        *(tensor for _, tensor in sums.layer_sums.values()),
    )  # every sum declared kept
    allocated = sum(t.numel() * t.element_size() for t in tensors)
    assert allocated == state_bytes(3, 300, 16)
    hidden = [torch.randn(4, 10, 16) for _ in range(6)]
    sums.accumulate(hidden, torch.arange(0, 40, 2), torch.randint(0, 300, (20,)))
    assert sums._gather.numel() * 4 + sums.types._rows.numel() * 8 == batch_bytes(3, 20, 16)


def test_sums_leave_the_device_through_a_small_staging_buffer_unchanged():
    from ctxvar.extraction.host_copy import staged_copy, to_host

    sums = torch.randn(7, 13, 5, dtype=torch.float64)
    waits = []
    copied = staged_copy(sums, torch.empty(16, dtype=torch.float64), lambda: waits.append(1))
    np.testing.assert_array_equal(copied, sums.numpy())
    assert copied.shape == (7, 13, 5) and len(waits) == -(-sums.numel() // 16)
    counts = torch.arange(10, dtype=torch.int64)
    np.testing.assert_array_equal(staged_copy(counts, torch.empty(3, dtype=torch.int64)), counts.numpy())
    assert to_host(sums) is not None and np.shares_memory(to_host(sums), sums.numpy()), "no copy on a CPU"
