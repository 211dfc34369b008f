"""embedding_matrices.csv's rows computed by brute force from a matrix, by the definitions: I(W) over ± the
eigenvectors of WᵀW (exp, then sum), Machina & Mercer's one-sign value (:mod:`support.machina_mercer_reference`),
and the mean cosine over every pair of nonzero rows; and the check of a written table against them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ctxvar.stats.embedding_matrices import MATRIX_COLUMNS

from support.machina_mercer_reference import machina_mercer_isotropy

RTOL = 1e-6


def study_partition_sums(w: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """Z(c) = Σ_rows exp(cᵀw) per column c of ``directions``, by the definition (exp, then sum)."""
    return torch.exp(w @ directions).sum(dim=0)


def study_eigenvectors(w: torch.Tensor) -> torch.Tensor:
    """The columns of torch.linalg.eigh(WᵀW), as the study's code takes them."""
    return torch.linalg.eigh(w.T @ w).eigenvectors


def study_isotropy(w: np.ndarray, centre: bool) -> float:
    """I(W) = min Z / max Z over the eigenvectors of WᵀW and their negatives, float64."""
    w = torch.from_numpy(np.asarray(w, dtype=np.float64))
    if centre:
        w = w - w.mean(dim=0, keepdim=True)
    c = study_eigenvectors(w)
    z = study_partition_sums(w, torch.cat([c, -c], dim=1))
    return float(z.min() / z.max())


def all_pairs_mean_cosine(w: np.ndarray) -> tuple[float, int]:
    """``(mean cosine over every pair of distinct nonzero rows, rows of norm 0)``, from the n × n cosines."""
    norms = np.linalg.norm(w, axis=1)
    unit = w[norms > 0] / norms[norms > 0, None]
    cosines, n = unit @ unit.T, len(unit)
    return float((cosines.sum() - np.trace(cosines)) / (n * (n - 1))), int((norms == 0).sum())


def reference_rows(name: str, w: np.ndarray, tied: bool) -> list[dict]:
    """The two rows (uncentred, centred) embedding_matrices.csv should hold for the matrix ``w``."""
    rows = []
    for centre in (False, True):
        value, zeros = all_pairs_mean_cosine(w - w.mean(0) if centre else w)
        rows.append({"matrix": name, "tied": tied, "rows": len(w), "dim": w.shape[1], "centred": centre})
        rows[-1]["isotropy"] = study_isotropy(w, centre)
        rows[-1]["isotropy_eigh_signs"] = machina_mercer_isotropy(w, centred=centre)
        rows[-1]["log_isotropy_eigh_signs"] = float(np.log(rows[-1]["isotropy_eigh_signs"]))
        rows[-1] |= {"mean_cosine": value, "zero_rows": zeros}
    return rows


def check_table(table: pd.DataFrame, expected: list[dict]) -> None:
    """``table`` (an embedding_matrices.csv) holds the rows ``expected``, in order, floats to :data:`RTOL`."""
    assert list(table.columns) == MATRIX_COLUMNS
    assert len(table) == len(expected)
    for (_, row), want in zip(table.iterrows(), expected):
        for key, value in want.items():
            assert row[key] == pytest.approx(value, rel=RTOL) if isinstance(value, float) else row[key] == value
