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

From u = x/‖x‖ (Ethayarajh 2019), over all N tokens of the layer and per type t:

    mean_cosine           (‖Σu‖² − N) / (N (N − 1))           mean cos over all distinct pairs
    self-similarity S_t   (‖Σu_t‖² − n_t) / (n_t (n_t − 1))    mean cos over distinct pairs of t
    self_similarity       unweighted mean of S_t over the frequency-filtered types
    self_similarity_adjusted   self_similarity − mean_cosine

Ethayarajh's (2019) own measures, by his rules: :mod:`ctxvar.stats.ethayarajh`.

TwoNN (Facco et al. 2017) on the merged bottom-k sample after removing exact
duplicates, and on a standard Gaussian sample of the same n and d (the
estimator's bias in high dimension).

Over sample batches, as Razzhigaev et al. report (mean and standard deviation, ddof = 1, over the
geometry.batches blocks of k positions of the hash ranking; batch 0 is the sample above):

    anisotropy_batch      σ₁² / Σσ², σ the singular values of the centred batch
    twonn_batch           Facco et al.'s TwoNN on the batch's distinct points (batch 0: ``twonn``)
    twonn_razzhigaev      the TwoNN variant of their public code on the batch's points, duplicates kept
                          (:func:`ctxvar.stats.twonn.razzhigaev_twonn`)

On the points of the first sample batch (the sample above, as rows of W), the partition-function isotropy
(Arora et al. 2016; as Biś et al. 2021 and Machina & Mercer 2024 compute it), uncentred and centred:

    partition_isotropy    I(W) = min_c Z(c) / max_c Z(c), Z(c) = Σ_x exp(cᵀx), c = ±eigenvectors of WᵀW
    log_partition_isotropy   log I(W), in log space (:mod:`ctxvar.stats.partition_isotropy`)
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
from ctxvar.stats.partition_isotropy import partition_isotropy
from ctxvar.stats.provenance import SUMS_COLUMN
from ctxvar.stats.sample_file import points, read_sample_layer
from ctxvar.stats.sums import MomentsFile, SumsFile
from ctxvar.stats.twonn import (
    distinct_points,
    facco_twonn,
    gaussian_twonn,
    mean_centred_norm,
    razzhigaev_twonn,
    two_nearest,
)
from ctxvar.stats.word_files import SentencesFile, WordsFile

log = logging.getLogger(__name__)

MIN_TWONN_POINTS = 3
BATCH_METRICS = ("anisotropy_batch", "twonn_batch", "twonn_razzhigaev")


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


def sample_batches(points: np.ndarray, batch_size: int, batches: int) -> list[np.ndarray]:
    """Rows b·k … (b + 1)·k − 1 of the key-ordered sample ``points`` for b = 0 … batches − 1 (k = batch_size):
    batch 0 always, a later one only when it holds k points."""
    blocks = [points[b * batch_size : (b + 1) * batch_size] for b in range(batches)]
    return [block for b, block in enumerate(blocks) if b == 0 or len(block) == batch_size]


def batch_anisotropy(points: np.ndarray) -> float:
    """σ₁² / Σσ², σ the singular values of the centred ``points`` (n, d), float64; NaN for zero spread."""
    x = np.asarray(points, dtype=np.float64)
    if len(x) < 2:
        return np.nan
    x = x - x.mean(axis=0)
    gram = x.T @ x if x.shape[1] <= x.shape[0] else x @ x.T  # the smaller Gram matrix: eigenvalues σ²
    eigenvalues = np.linalg.eigvalsh(gram)
    total = float(np.trace(gram))
    return float(eigenvalues[-1] / total) if total > 0 else np.nan


def batch_twonn(points: np.ndarray) -> dict:
    """TwoNN of one batch: Facco et al.'s on its distinct points (``twonn_batch``, with ``twonn_points`` and
    the distinct points' ``distinct``) and Razzhigaev et al.'s code's on all of them (``twonn_razzhigaev``)."""
    distinct = distinct_points(points)
    row = {"twonn_points": len(distinct), "distinct": distinct, "twonn_batch": np.nan, "twonn_razzhigaev": np.nan}
    if len(distinct) >= MIN_TWONN_POINTS:
        r1, r2 = two_nearest(distinct)
        row["twonn_batch"] = facco_twonn(r1, r2)
        if len(distinct) < len(points):  # duplicates: their distances differ
            r1, r2 = two_nearest(points)
        row["twonn_razzhigaev"] = razzhigaev_twonn(r1, r2, mean_centred_norm(points))
    elif len(points) >= MIN_TWONN_POINTS:
        row["twonn_razzhigaev"] = razzhigaev_twonn(*two_nearest(points), mean_centred_norm(points))
    return row


def mean_and_std(values: list[float]) -> tuple[float, float]:
    """Mean and standard deviation (ddof = 1; NaN for one value) of per-batch values."""
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else np.nan


PARTITION_COLUMNS = [
    "partition_isotropy",
    "log_partition_isotropy",
    "partition_isotropy_centred",
    "log_partition_isotropy_centred",
]


def partition_metrics(x: np.ndarray) -> dict:
    """I(W) and log I(W) of the sampled points ``x`` (k, d), uncentred and centred (module docstring); NaN
    for a layer without sampled points."""
    if len(x) == 0:
        return dict.fromkeys(PARTITION_COLUMNS, np.nan)
    row = {}
    for centre, suffix in ((False, ""), (True, "_centred")):
        value = partition_isotropy(x, centre=centre)
        row[f"partition_isotropy{suffix}"] = value["isotropy"]
        row[f"log_partition_isotropy{suffix}"] = value["log_isotropy"]
    return row


def sample_metrics(sample_path, layer: int, seed: int, batch_size: int | None = None, batches: int = 1) -> dict:
    """TwoNN over the sample batches and I(W) of the first batch's points, of the layer's sampled points.

    ``batch_size``: k, the points of a batch (None: the whole sample is one batch)."""
    sample = points(read_sample_layer(sample_path, layer))
    blocks = sample_batches(sample, batch_size or max(len(sample), 1), batches)
    return {**twonn_metrics(blocks, layer, seed), **partition_metrics(blocks[0])}


def twonn_metrics(blocks: list[np.ndarray], layer: int, seed: int) -> dict:
    """TwoNN on the distinct points of the first sample batch, and on Gaussian points of the same n and d; mean
    and standard deviation over the sample batches ``blocks`` of :data:`BATCH_METRICS`."""
    per_batch = [{**batch_twonn(block), "anisotropy_batch": batch_anisotropy(block)} for block in blocks]
    first = per_batch[0]
    n, d = first["distinct"].shape
    if n < MIN_TWONN_POINTS:
        log.warning("layer %d: %d distinct sampled points; TwoNN needs %d", layer, n, MIN_TWONN_POINTS)
    row = {
        "twonn_points": n,
        "twonn": first["twonn_batch"],
        "twonn_gaussian": gaussian_twonn(n, d, seed + layer) if n >= MIN_TWONN_POINTS else np.nan,
        "sample_batches": len(blocks),
    }
    for metric in BATCH_METRICS:
        row[f"{metric}_mean"], row[f"{metric}_std"] = mean_and_std([batch[metric] for batch in per_batch])
    return row


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
            n, sum_, outer, layer_values = moments.layer_sums(layer)
            if outer is not None:
                row.update(covariance_metrics(n, sum_, outer, spectrum_k, layer))
            row.update(finalize_layer(n, layer_values))
        if stats.has_unit:
            row.update(cosine_metrics(sums, min_log10_n, max_log10_n))
        if sample_path is not None:
            row.update(sample_metrics(sample_path, layer, seed, batch_size, batches))
        if words is not None and sentences is not None:
            row.update(
                ethayarajh_metrics(words.layer(layer), sentences.layer(layer), stats.metadata.get("type_marker"))
            )
        rows.append(row)
    table = pd.DataFrame(rows, columns=geometry_columns(spectrum_k))
    return table.assign(**{SUMS_COLUMN: stats.metadata.get(SUMS_COLUMN, "")})
