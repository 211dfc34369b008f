"""TwoNN intrinsic dimension (Facco, d'Errico, Rodriguez & Laio 2017, Sci. Rep. 7:12140).

For each point, μ = r₂/r₁, the ratio of the distances to its second and first
nearest neighbours, follows a Pareto law with shape equal to the intrinsic
dimension. With the N ratios sorted, F_emp(μ_(i)) = i/N, the estimate is the slope
of the line through the origin fitted to (log μ_(i), −log(1 − F_emp(μ_(i)))) over
the smallest (1 − discard) · N ratios. This is scikit-dimension's ``TwoNN``
(linear method, ≥ 0.5.0, with the F_emp off-by-one fixed), which the tests compare
against. Duplicate points must be removed first (r₁ = 0).
"""

from __future__ import annotations

import numpy as np

from ctxvar.errors import StatisticsError

DISCARD_FRACTION = 0.1  # largest ratios left out of the fit (Facco et al.)
BLOCK_ROWS = 1024  # rows of the distance matrix held at once: BLOCK_ROWS × n float64
CANDIDATES = 4  # nearest candidates by the Gram formula, re-measured exactly


def two_nearest(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean distances ``(r1, r2)`` of each row to its nearest and second-nearest other row, float64.

    Candidates come from ‖a‖² + ‖b‖² − 2a·b in blocks (BLAS; memory BLOCK_ROWS × n);
    the few nearest are then measured as ‖a − b‖ directly, free of that formula's cancellation.
    """
    x = np.asarray(points, dtype=np.float64)
    n = len(x)
    if n < 3:
        raise StatisticsError(f"TwoNN needs at least 3 distinct points, got {n}; raise geometry.sample_size")
    sq = np.einsum("nd,nd->n", x, x)
    n_candidates = min(CANDIDATES, n - 1)
    r1, r2 = np.empty(n), np.empty(n)
    for start in range(0, n, BLOCK_ROWS):
        block = x[start : start + BLOCK_ROWS]
        rows = np.arange(start, start + len(block))
        d2 = sq[rows, None] + sq[None, :] - 2.0 * block @ x.T
        d2[np.arange(len(block)), rows] = np.inf
        candidates = np.argpartition(d2, n_candidates - 1, axis=1)[:, :n_candidates]
        exact = np.sort(np.linalg.norm(block[:, None, :] - x[candidates], axis=2), axis=1)
        r1[rows], r2[rows] = exact[:, 0], exact[:, 1]
    return r1, r2


def twonn_dimension(points: np.ndarray, discard_fraction: float = DISCARD_FRACTION) -> float:
    """The TwoNN estimate for distinct ``points`` (n, d)."""
    r1, r2 = two_nearest(points)
    if (r1 == 0).any():
        raise StatisticsError("TwoNN: duplicate points (distance 0); remove them first (numpy.unique(points, axis=0))")
    mu = np.sort(r2 / r1)
    n_keep = int(len(mu) * (1 - discard_fraction))
    log_mu = np.log(mu[:n_keep])
    y = -np.log(1 - np.arange(1, n_keep + 1) / len(mu))
    return float(log_mu @ y / (log_mu @ log_mu))


def distinct_points(points: np.ndarray) -> np.ndarray:
    """``points`` without exact duplicates (e.g. the [bos] position of a causal model, identical in every sentence)."""
    return np.unique(points, axis=0)


def gaussian_twonn(n: int, d: int, seed: int) -> float:
    """TwoNN of n standard Gaussian points in d dimensions: the estimator's value where the truth is d."""
    return twonn_dimension(np.random.default_rng(seed).standard_normal((n, d)))
