"""Per-layer statistics over the frequency-filtered token types (paper §4–§6).

For the types t with 10^min_log10_n ≤ n_t ≤ 10^max_log10_n (both inclusive),
p_t = n_t / n and n = Σ n_t:

    μ(X) = Σ p_t μ_t      Q(X) = Σ p_t Q_t      M(X) = ‖μ(X)‖²      V(X) = Q(X) − M(X)
    V_W  = Σ p_t V_t      V_B  = Σ p_t ‖μ_t − μ(X)‖²            with V(X) = V_W + V_B

cv_Q is std/mean of Q_t over the types (unweighted, ddof = 0). Regressions are
unweighted OLS over the types: V_t on M_t, and log10(1 + S_t) on log10 n_t for
S ∈ {Q, M, V}.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ctxvar.errors import StatisticsError
from ctxvar.stats.finalize import V_RESOLUTION, clamp_variance, finalize
from ctxvar.stats.provenance import SUMS_COLUMN
from ctxvar.stats.sums import SumsFile

DECOMPOSITION_TOLERANCE = 1e-9  # |V(X) − V_W − V_B| allowed, relative to Q(X)

COLUMNS = [
    "layer",
    "depth",
    "final_norm",
    "n_types",
    "n",
    "Q",
    "M",
    "V",
    "V_W",
    "V_B",
    "cv_Q",
    "slope_VM",
    "intercept_VM",
    "r2_VM",
    "slope_logQ",
    "intercept_logQ",
    "r2_logQ",
    "slope_logM",
    "intercept_logM",
    "r2_logM",
    "slope_logV",
    "intercept_logV",
    "r2_logV",
    SUMS_COLUMN,
]

log = logging.getLogger(__name__)


def frequency_filter(count: np.ndarray, min_log10_n: float, max_log10_n: float) -> np.ndarray:
    """Boolean mask of types with min ≤ log10 n_t ≤ max."""
    log_n = np.log10(np.maximum(count, 1))
    return (log_n >= min_log10_n) & (log_n <= max_log10_n)


def ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """``(slope, intercept, R²)`` of y on x; NaNs when fewer than 2 points or x is constant.

    From the centred sums, as ``scipy.stats.linregress`` computes them: with x̃ = x − x̄, ỹ = y − ȳ,
    slope = Σx̃ỹ / Σx̃², intercept = ȳ − slope·x̄, R² = (Σx̃ỹ)² / (Σx̃² Σỹ²) (0 for a constant y). Not scipy
    itself: importing ``scipy.stats`` costs about 1.2 s of CPU, in each of a run's figure jobs."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0:
        return (np.nan, np.nan, np.nan)
    x_mean, y_mean = x.mean(), y.mean()
    x_centred, y_centred = x - x_mean, y - y_mean
    sxx, sxy, syy = x_centred @ x_centred, x_centred @ y_centred, y_centred @ y_centred
    if sxx == 0:  # x's spread underflows
        return (np.nan, np.nan, np.nan)
    slope = sxy / sxx
    r2 = 0.0 if syy == 0 else min(sxy * sxy / (sxx * syy), 1.0)
    return float(slope), float(y_mean - slope * x_mean), float(r2)


def decomposition(count: np.ndarray, mean: np.ndarray, q: np.ndarray, v: np.ndarray) -> dict:
    """Q(X), M(X), V(X), V_W, V_B of the whole set, from per-type n, μ_t, Q_t, V_t."""
    n = count.sum()
    p = count / n
    mu = p @ mean
    q_all = float(p @ q)
    m_all = float(mu @ mu)
    v_all = float(clamp_variance(np.array([q_all - m_all]), np.array([q_all]))[0])
    centred = mean - mu
    v_within = float(p @ v)
    v_between = float(p @ np.einsum("ud,ud->u", centred, centred))
    # V(X) and each V_t are 0 within V_RESOLUTION of their Q: each side may lose up to V_RESOLUTION · Q(X) to that
    if abs(v_all - v_within - v_between) > (DECOMPOSITION_TOLERANCE + 2 * V_RESOLUTION) * max(q_all, 1e-300):
        raise StatisticsError(
            f"V(X) = {v_all:.12g} but V_W + V_B = {v_within + v_between:.12g}: the decomposition does not hold; "
            "the sums are inconsistent, re-run the merge"
        )
    return {"n": int(n), "Q": q_all, "M": m_all, "V": v_all, "V_W": v_within, "V_B": v_between}


def layer_statistics(
    count, sum_, sum_sq, layer: int, n_layers: int, min_log10_n: float, max_log10_n: float, final_norm: bool = False
) -> dict:
    """One row of layers.csv from the layer's merged sums (all types; filtering happens here).

    ``final_norm``: whether the model's last hidden state is the output of a final norm.
    """
    keep = frequency_filter(count, min_log10_n, max_log10_n)
    row = {
        "layer": layer,
        "depth": layer / max(n_layers - 1, 1),
        "final_norm": bool(final_norm and layer == n_layers - 1),
        "n_types": int(keep.sum()),
    }
    if not keep.any():
        return {**row, **{c: np.nan for c in COLUMNS if c not in row}, "n": 0}
    count = count[keep]
    mean, q, m, v = finalize(count, sum_[keep], sum_sq[keep])
    row.update(decomposition(count, mean, q, v))
    row["cv_Q"] = float(q.std() / q.mean()) if q.mean() > 0 else np.nan
    row["slope_VM"], row["intercept_VM"], row["r2_VM"] = ols(m, v)
    log_n = np.log10(count)
    for name, values in (("Q", q), ("M", m), ("V", v)):
        row[f"slope_log{name}"], row[f"intercept_log{name}"], row[f"r2_log{name}"] = ols(log_n, np.log10(1 + values))
    return row


def layers_table(stats_path, min_log10_n: float, max_log10_n: float) -> pd.DataFrame:
    """layers.csv for a merged sums file, streaming one layer at a time; the last column names the sums
    (:mod:`ctxvar.stats.provenance`)."""
    sums = SumsFile(stats_path)
    rows = []
    for layer in range(sums.n_layers):
        part = sums.layer(layer, columns=["n", "sum", "sum_sq"])
        rows.append(
            layer_statistics(
                part.count,
                part.sum,
                part.sum_sq,
                layer,
                sums.n_layers,
                min_log10_n,
                max_log10_n,
                sums.metadata.get("final_norm", False),
            )
        )
    table = pd.DataFrame(rows, columns=COLUMNS).assign(**{SUMS_COLUMN: sums.metadata.get(SUMS_COLUMN, "")})
    if not table["n_types"].any():
        log.warning(
            "%s: no token type has %s ≤ log10 n_t ≤ %s, so the per-layer statistics are empty (NaN); use a larger "
            "corpus or widen analysis.min_log10_n … max_log10_n",
            stats_path,
            min_log10_n,
            max_log10_n,
        )
    return table
