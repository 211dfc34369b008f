"""The partition-function isotropy I(W) of a set of vectors, and the other measures of one embedding matrix.

Arora et al. (2016) call a set of vectors w (the rows of W, n × d) isotropic when the
partition function Z(c) = Σ_w exp(cᵀw) is nearly constant over unit vectors c.
Mu & Viswanath (2018) and Biś et al. (2021) estimate the ratio over the eigenvectors
of WᵀW, and Machina & Mercer (2024) compute it so on the input and output embedding
matrices, centred (W − mean row) and uncentred:

    I(W) = min_c Z(c) / max_c Z(c),   c ∈ the unit eigenvectors of WᵀW, both signs (±c)

An eigenvector is defined up to its sign, and Z(c) ≠ Z(−c) (most for an uncentred W whose rows share
a direction). The study's code takes one sign per eigenvalue, the one its
eigensolver returns, so its value depends on the LAPACK build (numpy's and torch's give different
signs); :func:`partition_isotropy` takes both signs, which makes I(W) a function of W alone, never larger than
the one-sign value for the same eigenvectors. :func:`eigh_signs_partition_isotropy` takes the study's one sign,
as ``torch.linalg.eigh`` returns it on the CPU in float64, to compare with the study's numbers.

Computed in float64 and in log space, log Z(c) = logsumexp(W c): cᵀw of contextual embeddings with
massive activations reaches the thousands, past exp's float64 range (≈ 709). ``log_isotropy`` =
min log Z − max log Z is kept because I(W) itself underflows to 0 below e^−745.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ctxvar.errors import StatisticsError


def float64_rows(w) -> np.ndarray:
    """``w`` as a 2-D float64 array of at least one row, or :class:`StatisticsError`."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2 or len(w) == 0 or w.shape[1] == 0:
        raise StatisticsError(f"I(W) needs a non-empty matrix of row vectors; got shape {w.shape}")
    if not np.isfinite(w).all():
        raise StatisticsError("the matrix holds NaN or infinite values; I(W) is undefined (check the model's weights)")
    return w


def centred(w: np.ndarray) -> np.ndarray:
    """W − mean row (the mean over the n rows, unweighted)."""
    return w - w.mean(axis=0, keepdims=True)


def gram_eigenvectors(w: np.ndarray) -> np.ndarray:
    """(d, d): the unit eigenvectors of WᵀW as columns (``numpy.linalg.eigh``, ascending eigenvalues)."""
    gram = w.T @ w
    return np.linalg.eigh((gram + gram.T) / 2)[1]


def log_partition(w: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """log Z(c) = log Σ_w exp(cᵀw) for each column c of ``directions`` (d, k): logsumexp over the rows of W c."""
    return logsumexp(w @ directions, axis=0)


def log_partition_both_signs(w: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """(2k,): log Z(c) for each column c of ``directions``, then log Z(−c), from one product W c."""
    products = w @ directions
    return np.concatenate([logsumexp(products, axis=0), logsumexp(-products, axis=0)])


def eigh_sign_eigenvectors(w: np.ndarray) -> np.ndarray:
    """(d, d): the unit eigenvectors of WᵀW as columns, each with the one sign ``torch.linalg.eigh`` returns for
    the float64 product WᵀW on the CPU (ascending eigenvalues), as Machina & Mercer's ``compute_IW`` takes them."""
    import torch

    rows = torch.tensor(w, dtype=torch.float64)  # a copy: w may be read-only
    return torch.linalg.eigh(rows.T @ rows).eigenvectors.numpy()


def isotropy_of(log_z: np.ndarray) -> dict:
    """``{"isotropy": min Z / max Z, "log_isotropy": min log Z − max log Z}`` from the values log Z(c)."""
    log_iso = float(log_z.min() - log_z.max())
    return {"isotropy": float(np.exp(log_iso)), "log_isotropy": log_iso}


def partition_isotropy(w, centre: bool = False) -> dict:
    """``{"isotropy": I(W), "log_isotropy": log I(W)}`` of the rows of ``w`` (module docstring), over the
    eigenvectors of WᵀW with both signs; of W − mean row when ``centre``."""
    w = float64_rows(w)
    if centre:
        w = centred(w)
    return isotropy_of(log_partition_both_signs(w, gram_eigenvectors(w)))


def eigh_signs_partition_isotropy(w, centre: bool = False) -> dict:
    """The same as :func:`partition_isotropy` over one sign per eigenvector, the one ``torch.linalg.eigh`` returns
    (:func:`eigh_sign_eigenvectors`), as the study's code takes them: its ``compute_IW`` in log space."""
    return partition_isotropies(w, centre)[1]


def partition_isotropies(w, centre: bool = False) -> tuple[dict, dict]:
    """``(both signs, eigh signs)``: :func:`partition_isotropy` and :func:`eigh_signs_partition_isotropy` of the
    rows of ``w`` from one eigendecomposition and one product W c: ``torch.linalg.eigh``'s eigenvectors, with
    their signs for the study's value and with both for ours (a function of W alone, for any basis of each
    eigenspace), where each function alone solves and multiplies again."""
    w = float64_rows(w)
    if centre:
        w = centred(w)
    products = w @ eigh_sign_eigenvectors(w)
    eigh_signs = logsumexp(products, axis=0)
    return isotropy_of(np.concatenate([eigh_signs, logsumexp(-products, axis=0)])), isotropy_of(eigh_signs)


def mean_cosine_of_rows(w) -> tuple[float, int]:
    """``(mean cosine, zero rows)``: the mean cosine similarity over the n(n − 1) ordered pairs of distinct
    nonzero rows, (‖Σu‖² − n) / (n (n − 1)) with u = w/‖w‖, from Σu; rows of norm 0 have no direction and
    are left out (their count is returned)."""
    w = float64_rows(w)
    norms = np.linalg.norm(w, axis=1)
    nonzero = norms > 0
    n = int(nonzero.sum())
    if n < 2:
        return float("nan"), int(len(w) - n)
    sum_unit = (w[nonzero] / norms[nonzero, None]).sum(axis=0)
    return float((sum_unit @ sum_unit - n) / (n * (n - 1))), int(len(w) - n)


def svd_projection(w, centre: bool = False) -> np.ndarray:
    """(n, 2): each row of W (W − mean row when ``centre``) projected onto the first two right singular vectors
    of that matrix, Wv₁ and Wv₂ (σ₁u₁, σ₂u₂); one coordinate is 0 where d = 1. Each axis's sign is the one
    that makes the mean coordinate of the uncentred rows non-negative (singular vectors have no sign)."""
    w = float64_rows(w)
    rows = centred(w) if centre else w
    _, _, vt = np.linalg.svd(rows, full_matrices=False)
    coordinates = rows @ vt[:2].T
    signs = np.where(w.mean(axis=0) @ vt[:2].T < 0, -1.0, 1.0)
    coordinates = coordinates * signs
    return coordinates if coordinates.shape[1] == 2 else np.column_stack([coordinates[:, 0], np.zeros(len(w))])
