"""Per-layer isotropy, cosine and intrinsic-dimension metrics, exact over every embedding.

From N, Σx and Σxxᵀ of a layer (all tokens), the covariance is
C = Σxxᵀ/N − μμᵀ with μ = Σx/N (1/N normalisation), eigenvalues λ₁ ≥ … ≥ λ_d:

    anisotropy            λ₁ / tr C                          (Razzhigaev et al. 2024)
    explained_i           λ_i / tr C, i = 1 … spectrum_k     (top-k explained variance)
    participation_ratio   PR = (tr C)² / tr(C²)               (Gao et al. 2017)
    isoscore              (PR − 1) / (d − 1)                  (Rudman et al. 2022, closed form)

Effective ranks (:func:`rank_metrics`), exp of the entropy of a normalised spectrum:

    effective_rank              p_i = σ_i / Σσ, σ_i = √(N λ_i) the singular values of the
                                centred N × d data matrix             (Roy & Vetterli 2007)
    effective_rank_covariance   p_i = λ_i / tr C, C's eigenvalues themselves
    rankme                      p_k = s_k / Σs + ε (ε = 1e-7), s_k the singular values of the
                                uncentred embedding matrix, √ of the eigenvalues of Σxxᵀ,
                                k ≤ min(N, d)                          (Garrido et al. 2023)

From u = x/‖x‖, over all N tokens of the layer and per type t:

    mean_cosine           (‖Σu‖² − N) / (N (N − 1))           mean cos over all distinct pairs
    self-similarity S_t   (‖Σu_t‖² − n_t) / (n_t (n_t − 1))    mean cos over distinct pairs of t
                                                              (Ethayarajh 2019's definition)
    self_similarity       unweighted mean of S_t over the frequency-filtered types
    self_similarity_adjusted   self_similarity − mean_cosine

These are not Ethayarajh's (2019) measures, whose tokens, words and baseline follow other rules: his, by his
rules, are :mod:`ctxvar.stats.ethayarajh`.

The sample's metrics (TwoNN, the per-batch metrics, the partition-function isotropy):
:mod:`ctxvar.stats.sample_metrics`.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ctxvar.errors import StatisticsError
from ctxvar.stats.declarations import finalize_layer, layer_columns
from ctxvar.stats.ethayarajh import ETHAYARAJH_COLUMNS, ethayarajh_metrics
from ctxvar.stats.finalize import self_similarity
from ctxvar.stats.layers import frequency_filter
from ctxvar.stats.provenance import SUMS_COLUMN
from ctxvar.stats.sample_metrics import BATCH_METRICS, PARTITION_COLUMNS, sample_metrics
from ctxvar.stats.sums import MomentsFile, SumsFile, layer_width
from ctxvar.stats.word_files import SentencesFile, WordsFile

log = logging.getLogger(__name__)


class ZeroSpreadError(StatisticsError):
    """A layer's covariance has zero trace: its embeddings are all identical."""


def covariance(n: int, sum_: np.ndarray, sum_outer: np.ndarray) -> np.ndarray:
    """C = Σxxᵀ/N − μμᵀ, symmetrised."""
    mean = sum_ / n
    c = sum_outer / n - np.outer(mean, mean)
    return (c + c.T) / 2


def spectrum_metrics(c: np.ndarray, spectrum_k: int) -> dict:
    """Anisotropy, top-k explained variance, participation ratio and IsoScore of C."""
    d = len(c)
    eigenvalues = np.clip(np.linalg.eigvalsh(c)[::-1], 0.0, None)  # rounding can give tiny negatives
    trace = eigenvalues.sum()
    if trace <= 0:
        raise ZeroSpreadError(
            "covariance has zero trace (every embedding identical); the isotropy metrics are undefined"
        )
    p = eigenvalues / trace
    pr = trace**2 / float(eigenvalues @ eigenvalues)
    row = {
        "anisotropy": float(p[0]),
        "participation_ratio": float(pr),
        "isoscore": float((pr - 1) / (d - 1)) if d > 1 else np.nan,
    }
    for i in range(spectrum_k):
        row[f"explained_{i + 1}"] = float(p[i]) if i < d else np.nan
    return row


RANKME_EPSILON = 1e-7  # Garrido et al. 2023's ε for float32 embeddings, added to every p_k


def spectral_entropy_rank(p: np.ndarray) -> float:
    """exp(−Σ p_i log p_i), with 0 log 0 = 0."""
    p = p[p > 0]
    return float(np.exp(-np.sum(p * np.log(p))))


def sorted_eigenvalues(symmetric: np.ndarray) -> np.ndarray:
    """Eigenvalues of a positive semi-definite matrix, largest first, clipped at 0 (rounding gives tiny negatives)."""
    return np.clip(np.linalg.eigvalsh((symmetric + symmetric.T) / 2)[::-1], 0.0, None)


def rank_metrics(n: int, sum_: np.ndarray, sum_outer: np.ndarray) -> dict:
    """The three effective ranks of one layer from N, Σx and Σxxᵀ (see the module docstring).

    Centred: the scatter matrix Σxxᵀ − N μμᵀ = N·C has eigenvalues N λ_i, so the data
    matrix's singular values are √(N λ_i) and p_i ∝ √λ_i (Roy & Vetterli) or ∝ λ_i
    (the covariance's spectrum). Uncentred (RankMe): the singular values of the N × d
    embedding matrix are √ of the eigenvalues of Σxxᵀ; there are min(N, d) of them.

    Precision: Σxxᵀ comes from an fp32 Gram product (:class:`ctxvar.extraction.accumulator.SecondMoments`),
    whose rounding moves an eigenvalue by about ε₃₂ λ₁. The √ turns that into about √(ε₃₂ λ₁) for an
    eigenvalue that is truly 0 (every LayerNorm output has one: its centred rows lie in a hyperplane), so
    the singular-value ranks match float64 to about 10⁻⁵ relative, not the 10⁻⁷ of the eigenvalue ones.
    """
    lam = sorted_eigenvalues(covariance(n, sum_, sum_outer))
    if lam.sum() <= 0:
        raise ZeroSpreadError(
            "covariance has zero trace (every embedding identical); the effective ranks are undefined"
        )
    sigma = np.sqrt(lam)
    s = np.sqrt(sorted_eigenvalues(sum_outer))[: min(n, len(sum_))]
    return {
        "effective_rank": spectral_entropy_rank(sigma / sigma.sum()),
        "effective_rank_covariance": spectral_entropy_rank(lam / lam.sum()),
        "rankme": spectral_entropy_rank(s / s.sum() + RANKME_EPSILON),
    }


def covariance_metrics(n: int, sum_: np.ndarray, sum_outer: np.ndarray, spectrum_k: int, layer: int) -> dict:
    """:func:`spectrum_metrics` and :func:`rank_metrics` of one layer; all NaN, with a warning naming the layer,
    where its embeddings are all identical (zero trace: a LayerNorm of zero gain), as they are undefined there."""
    try:
        return {**spectrum_metrics(covariance(n, sum_, sum_outer), spectrum_k), **rank_metrics(n, sum_, sum_outer)}
    except ZeroSpreadError:
        log.warning("layer %d: every embedding is identical (zero covariance); its isotropy metrics are NaN", layer)
        spectrum = ["anisotropy", *(f"explained_{k}" for k in range(1, spectrum_k + 1))]
        ranks = ["effective_rank", "effective_rank_covariance", "rankme"]
        return dict.fromkeys([*spectrum, "participation_ratio", "isoscore", *ranks], np.nan)


def mean_cosine(n: int, sum_unit: np.ndarray) -> float:
    """Mean cosine similarity over the n(n − 1) ordered pairs of distinct tokens, from Σu."""
    return float((sum_unit @ sum_unit - n) / (n * (n - 1))) if n > 1 else np.nan


def geometry_columns(spectrum_k: int) -> list[str]:
    return [
        "layer",
        "depth",
        "final_norm",
        "n",
        "anisotropy",
        *[f"explained_{i + 1}" for i in range(spectrum_k)],
        "participation_ratio",
        "isoscore",
        "effective_rank",
        "effective_rank_covariance",
        "rankme",
        "mean_cosine",
        "n_types",
        "self_similarity",
        "self_similarity_adjusted",
        "twonn_points",
        "twonn",
        "twonn_gaussian",
        "sample_batches",
        *[f"{metric}_{moment}" for metric in BATCH_METRICS for moment in ("mean", "std")],
        *PARTITION_COLUMNS,
        *ETHAYARAJH_COLUMNS,
        *(column.name for column in layer_columns()),
        SUMS_COLUMN,
    ]


def cosine_metrics(sums, min_log10_n: float, max_log10_n: float) -> dict:
    """Mean cosine over all tokens; self-similarity over the filtered types (n_t ≥ 2 by the filter's lower bound)."""
    n = int(sums.count.sum())
    keep = frequency_filter(sums.count, min_log10_n, max_log10_n) & (sums.count > 1)
    cos = mean_cosine(n, sums.sum_unit.sum(axis=0))
    self_sim = float(np.mean(self_similarity(sums.count[keep], sums.sum_unit[keep]))) if keep.any() else np.nan
    return {
        "mean_cosine": cos,
        "n_types": int(keep.sum()),
        "self_similarity": self_sim,
        "self_similarity_adjusted": self_sim - cos,
    }


def own_width(layer_sums: tuple, width: int) -> tuple:
    """A moments file's ``(N, Σx, Σxxᵀ, per-layer sums)`` of a layer, cut to the layer's own ``width`` (its
    coordinates beyond it are zeros): the spectrum's metrics count its own dimensions."""
    n, sum_, outer, values = layer_sums
    values = {name: value[:width] if isinstance(value, np.ndarray) else value for name, value in values.items()}
    return n, sum_[:width], None if outer is None else outer[:width, :width], values


def geometry_table(
    stats_path,
    moments_path,
    sample_path,
    spectrum_k: int,
    seed: int,
    min_log10_n: float,
    max_log10_n: float,
    batch_size: int | None = None,
    batches: int = 1,
    words_path=None,
    sentences_path=None,
) -> pd.DataFrame:
    """geometry.csv: one row per layer; the metrics of sums not accumulated are NaN; the last column names the
    sums (:mod:`ctxvar.stats.provenance`).

    ``moments_path`` / ``sample_path`` / ``words_path`` and ``sentences_path`` may be None
    (geometry.covariance / twonn / ethayarajh off); the sample is cut into ``batches`` batches of ``batch_size``
    points (geometry.batches, geometry.sample_size; None: one batch).
    """
    stats = SumsFile(stats_path)
    moments = MomentsFile(moments_path) if moments_path is not None else None
    words = WordsFile(words_path) if words_path is not None else None
    sentences = SentencesFile(sentences_path) if sentences_path is not None else None
    final_norm = stats.metadata.get("final_norm", False)
    rows = []
    for layer in range(stats.n_layers):
        sums = stats.layer(layer, columns=["n"] + (["sum_unit"] if stats.has_unit else []))
        row = {
            "layer": layer,
            "depth": layer / max(stats.n_layers - 1, 1),
            "final_norm": bool(final_norm and layer == stats.n_layers - 1),
            "n": int(sums.count.sum()),
        }
        if moments is not None:
            n, sum_, outer, layer_values = own_width(moments.layer_sums(layer), layer_width(stats.metadata, layer))
            if outer is not None:
                row.update(covariance_metrics(n, sum_, outer, spectrum_k, layer))
            row.update(finalize_layer(n, layer_values))
        if stats.has_unit:
            row.update(cosine_metrics(sums, min_log10_n, max_log10_n))
        if sample_path is not None:
            row.update(
                sample_metrics(sample_path, layer, seed, batch_size, batches, layer_width(stats.metadata, layer))
            )
        if words is not None and sentences is not None:
            row.update(
                ethayarajh_metrics(words.layer(layer), sentences.layer(layer), stats.metadata.get("type_marker"))
            )
        rows.append(row)
    table = pd.DataFrame(rows, columns=geometry_columns(spectrum_k))
    return table.assign(**{SUMS_COLUMN: stats.metadata.get(SUMS_COLUMN, "")})
