"""TwoNN intrinsic dimension (Facco, d'Errico, Rodriguez & Laio 2017, Sci. Rep. 7:12140).

For each point, μ = r₂/r₁, the ratio of the distances to its second and first
nearest neighbours, follows a Pareto law with shape equal to the intrinsic
dimension. With the N ratios sorted, F_emp(μ_(i)) = i/N, the estimate is the slope
of the line through the origin fitted to (log μ_(i), −log(1 − F_emp(μ_(i)))) over
the smallest (1 − discard) · N ratios. This is scikit-dimension's ``TwoNN``
(linear method, ≥ 0.5.0, with the F_emp off-by-one fixed), which the tests compare
against. Duplicate points must be removed first (r₁ = 0).

:func:`razzhigaev_twonn` is the variant of Razzhigaev et al.'s public code
(AIRI-Institute/LLM-Microscope, ``intrinsic_dimension`` in LLM_microscope.ipynb at
commit b6db939b2696845ce1f88cf69cddc41e808eea17), which keeps duplicate points and
fits on the smallest 20 % of the ratios; see its docstring.
"""

from __future__ import annotations

import numpy as np

from ctxvar.errors import StatisticsError

DISCARD_FRACTION = 0.1  # largest ratios left out of the fit (Facco et al.)
BLOCK_ROWS = 1024  # rows of the distance matrix held at once: BLOCK_ROWS × n float64
CANDIDATES = 4  # nearest candidates by the Gram formula, re-measured exactly


def two_nearest(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean distances ``(r1, r2)`` of each row to its nearest and second-nearest other row, float64.

    Candidates come from ‖b‖² − 2a·b in blocks (BLAS; memory BLOCK_ROWS × n; ‖a‖², the same along a row, leaves
    its order as it is);
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
        rank = block @ x.T
        rank *= -2.0
        rank += sq  # ‖b‖² − 2a·b orders a row's distances as ‖a − b‖² does: ‖a‖² is the row's constant
        rank[np.arange(len(block)), rows] = np.inf
        candidates = np.argpartition(rank, n_candidates - 1, axis=1)[:, :n_candidates]
        exact = np.sort(np.linalg.norm(block[:, None, :] - x[candidates], axis=2), axis=1)
        r1[rows], r2[rows] = exact[:, 0], exact[:, 1]
    return r1, r2


def twonn_dimension(points: np.ndarray, discard_fraction: float = DISCARD_FRACTION) -> float:
    """The TwoNN estimate for distinct ``points`` (n, d)."""
    return facco_twonn(*two_nearest(points), discard_fraction)


def facco_twonn(r1: np.ndarray, r2: np.ndarray, discard_fraction: float = DISCARD_FRACTION) -> float:
    """The TwoNN estimate from each point's first and second nearest-neighbour distances (all r₁ > 0)."""
    if (r1 == 0).any():
        raise StatisticsError("TwoNN: duplicate points (distance 0); remove them first (numpy.unique(points, axis=0))")
    mu = np.sort(r2 / r1)
    n_keep = int(len(mu) * (1 - discard_fraction))
    log_mu = np.log(mu[:n_keep])
    y = -np.log(1 - np.arange(1, n_keep + 1) / len(mu))
    return float(log_mu @ y / (log_mu @ log_mu))


RAZZHIGAEV_EPS = 1e-8  # LLM-Microscope's eps, in units of the mean norm of the centred points
RAZZHIGAEV_REDUCTION = 5  # LLM-Microscope's reduction_factor: the fit uses the smallest n // 5 ratios


def mean_centred_norm(points: np.ndarray) -> float:
    """The mean Euclidean norm of the rows of ``points`` after subtracting their mean (float64)."""
    x = np.asarray(points, dtype=np.float64)
    return float(np.linalg.norm(x - x.mean(axis=0), axis=1).mean())


def razzhigaev_twonn(r1: np.ndarray, r2: np.ndarray, scale: float) -> float:
    """TwoNN as Razzhigaev et al.'s public code computes it, from the n points' r₁, r₂ (duplicates kept).

    With ε = 1e-8 · ``scale`` (their code divides the centred points by their mean norm, ``scale`` here,
    then uses ε = 1e-8): a point with r₁ < ε gets μ = −1, else μ = r₂/r₁. The u ratios with μ ≤ 1 + 1e-8
    (duplicates, and ties r₂ = r₁) are dropped from the fit but stay in N: the m = n − u others, sorted,
    get F_emp = (u + i)/n, i = 1 … m. The estimate is the slope through the origin of −log(1 − F_emp) on
    log μ over the first min(⌊m/5⌋, m − 1) of them (the smallest 20 % of the kept ratios):
    Σ log μ · (−log(1 − F)) / Σ (log μ)². Their standard deviation over batches is not in the code.
    """
    bad = r1 < RAZZHIGAEV_EPS * scale
    mu = np.sort(np.where(bad, -1.0, r2 / np.where(bad, 1.0, r1)))
    dropped = int(np.count_nonzero(mu <= 1 + RAZZHIGAEV_EPS))
    kept = mu[dropped:]
    m = len(kept)
    used = min(m // RAZZHIGAEV_REDUCTION, m - 1)
    if used < 1:
        return np.nan
    log_mu = np.log(kept[:used])
    y = -np.log(1 - np.arange(dropped + 1, dropped + used + 1) / len(mu))
    return float(log_mu @ y / (log_mu @ log_mu))


def distinct_points(points: np.ndarray) -> np.ndarray:
    """``points`` without exact duplicates (e.g. the [bos] position of a causal model, identical in every sentence)."""
    return np.unique(points, axis=0)


def gaussian_twonn(n: int, d: int, seed: int) -> float:
    """TwoNN of n standard Gaussian points in d dimensions: the estimator's value where the truth is d."""
    return twonn_dimension(np.random.default_rng(seed).standard_normal((n, d)))
