"""Finalize sums into the paper's statistics, and combine sums across shards.

Per token type t with n_t occurrences x_1 … x_n (paper §3):

    Q_t = Σ‖x‖² / n_t          (mean squared norm)
    M_t = ‖Σx / n_t‖²          (squared norm of the mean)
    V_t = Q_t − M_t            (1/n variance summed over dimensions)

V_t is a difference of two float64 numbers, resolved to about V_RESOLUTION · Q_t:
where the true V_t is 0 (n_t = 1, or identical vectors such as the first token
of a causal model) rounding leaves ±10⁻¹⁶–10⁻¹³ · Q_t, which would read as a
variance 13 orders of magnitude below the others (and set a log axis's range).
Values within ±V_RESOLUTION · Q_t are therefore 0; anything more negative is
an error, never silently clamped.
"""

from __future__ import annotations

import numpy as np

from ctxvar.errors import StatisticsError

V_RESOLUTION = 1e-9  # relative to Q_t: what Q_t − M_t of float64 sums over up to ~10⁶ terms resolves


def finalize(
    count: np.ndarray, sum_: np.ndarray, sum_sq: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(mean (U, d), Q (U,), M (U,), V (U,))`` from n (U,), Σx (U, d), Σ‖x‖² (U,); n ≥ 1."""
    n = count.astype(np.float64)
    mean = sum_ / n[:, None]
    q = sum_sq / n
    m = np.einsum("ud,ud->u", mean, mean)
    return mean, q, m, clamp_variance(q - m, q)


def clamp_variance(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """V = Q − M with its rounding removed: 0 within ±V_RESOLUTION · |Q| (finite Q); raise on anything more
    negative; NaN stays NaN."""
    resolution = np.where(np.isfinite(q), V_RESOLUTION * np.abs(q), 0.0)
    bad = v < -resolution
    if bad.any():
        worst = int(np.argmin(v / np.maximum(np.abs(q), np.finfo(float).tiny)))
        raise StatisticsError(
            f"variance V = Q − M is negative beyond rounding (V={v[worst]:.6g}, Q={q[worst]:.6g}) for {int(bad.sum())} "
            "type(s); the sums are inconsistent: re-run extraction for this model"
        )
    return np.where(np.abs(v) <= resolution, 0.0, v)  # NaN and ±inf stay what they are


def self_similarity(count: np.ndarray, sum_unit: np.ndarray) -> np.ndarray:
    """S_t = (‖Σu_t‖² − n_t) / (n_t(n_t − 1)) per type from n_t and Σu_t (U, d), u = x/‖x‖: the mean cosine
    between distinct occurrences of t (Ethayarajh, 2019); NaN where n_t < 2."""
    n = count.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 1, (np.einsum("ud,ud->u", sum_unit, sum_unit) - n) / (n * (n - 1)), np.nan)


def combine_into(total: tuple[np.ndarray, ...], part: tuple[np.ndarray, ...], index: np.ndarray) -> None:
    """Add a part's rows (n, Σx, Σ‖x‖², and Σ x/‖x‖ when kept) into ``total`` at rows ``index`` (distinct), in place.

    Addition is exact for n; for the float sums the result depends only on the
    order parts are added in, which callers fix (shard order).
    """
    assert len(total) == len(part), (len(total), len(part))
    for into, values in zip(total, part):
        into[index] += values
