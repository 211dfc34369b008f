"""Per-layer metrics of the merged position sample (geometry.twonn): its points, cut into the sample batches.

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
(Arora et al. 2016; Biś et al. 2021), uncentred and centred (``_centred``: W − mean row):

    partition_isotropy    I(W) = min_c Z(c) / max_c Z(c), Z(c) = Σ_x exp(cᵀx), c = ±eigenvectors of WᵀW
    log_partition_isotropy   log I(W), in log space (:mod:`ctxvar.stats.partition_isotropy`)
    partition_isotropy_eigh_signs   the same over one sign per eigenvector, the one torch.linalg.eigh returns,
                          as Machina & Mercer's (2024) code computes it; and its log
"""

from __future__ import annotations

import logging

import numpy as np

from ctxvar.stats.partition_isotropy import partition_isotropies
from ctxvar.stats.sample_file import points, read_sample_layer
from ctxvar.stats.twonn import (
    distinct_points,
    facco_twonn,
    gaussian_twonn,
    mean_centred_norm,
    razzhigaev_twonn,
    two_nearest,
)

log = logging.getLogger(__name__)

MIN_TWONN_POINTS = 3
BATCH_METRICS = ("anisotropy_batch", "twonn_batch", "twonn_razzhigaev")


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
    f"{log}partition_isotropy{centring}{signs}"
    for centring in ("", "_centred")
    for signs in ("", "_eigh_signs")
    for log in ("", "log_")
]


def partition_metrics(x: np.ndarray) -> dict:
    """I(W) and log I(W) of the sampled points ``x`` (k, d), uncentred and centred, over both signs of each
    eigenvector and over the one torch.linalg.eigh returns (module docstring); NaN for a layer without sampled
    points."""
    if len(x) == 0:
        return dict.fromkeys(PARTITION_COLUMNS, np.nan)
    row = {}
    for centre, centring in ((False, ""), (True, "_centred")):
        for value, signs in zip(partition_isotropies(x, centre=centre), ("", "_eigh_signs")):
            row[f"partition_isotropy{centring}{signs}"] = value["isotropy"]
            row[f"log_partition_isotropy{centring}{signs}"] = value["log_isotropy"]
    return row


def sample_metrics(
    sample_path, layer: int, seed: int, batch_size: int | None = None, batches: int = 1, width: int | None = None
) -> dict:
    """TwoNN over the sample batches and I(W) of the first batch's points, of the layer's sampled points.

    ``batch_size``: k, the points of a batch (None: the whole sample is one batch); ``width``: the layer's own
    width, where its points are held with zeros after it (:func:`ctxvar.stats.sums.layer_width`): the Gaussian
    reference and I(W)'s eigenvectors are those of its own dimensions."""
    sample = points(read_sample_layer(sample_path, layer))
    sample = sample[:, :width] if width is not None else sample
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
