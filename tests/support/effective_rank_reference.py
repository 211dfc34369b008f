"""Effective ranks by their papers' definitions, from the data matrix's singular values (numpy SVD).

Roy & Vetterli, "The effective rank: a measure of effective dimensionality", EUSIPCO 2007, eq. (1)–(3):
p_k = σ_k / ‖σ‖₁, erank = exp(−Σ p_k log p_k), 0 log 0 = 0, σ the singular values of the matrix.
Garrido et al., "RankMe: Assessing the downstream performance of pretrained self-supervised
representations by their rank", ICML 2023, eq. (1)–(2): p_k = σ_k(Z) / ‖σ(Z)‖₁ + ε, k = 1 … min(N, K),
on the (uncentred) N × K embedding matrix Z, with ε = 1e-7 for float32 embeddings.
"""

from __future__ import annotations

import numpy as np


def entropy_rank(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(np.exp(-np.sum(p * np.log(p))))


def roy_vetterli_effective_rank(matrix: np.ndarray) -> float:
    sigma = np.linalg.svd(matrix, compute_uv=False)
    return entropy_rank(sigma / sigma.sum())


def rankme(z: np.ndarray, epsilon: float = 1e-7) -> float:
    sigma = np.linalg.svd(z, compute_uv=False)  # min(N, K) values
    return entropy_rank(sigma / sigma.sum() + epsilon)
