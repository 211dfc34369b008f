"""A model's input and output embedding matrices: I(W), mean cosine and the 2-D SVD projection of each.

The matrices are the weights as the model holds them (every row, padding rows included): those that
transformers' ``get_input_embeddings`` and ``get_output_embeddings`` give of the model with its language-modelling
head (:func:`ctxvar.models.loading.load_with_head`), read alone from its weight files where their names
resolve (:mod:`ctxvar.models.embedding_weights`: the safetensors, or pickled ``pytorch_model.bin``, files holding
them, nothing else), else from the whole model loaded so; the same values either way. A matrix of another row
count than config.json builds (a head padded past the vocabulary) is measured as the files hold it, read alone:
the whole model cannot hold it, and refuses it. A model whose output matrix is the input matrix (tied weights: the
same storage, or equal values) has one matrix, ``tied``; a model whose files hold no head (config.json's
``architectures`` names none) has only ``input``. Each matrix is measured uncentred and centred (W − mean row), in
float64 (:mod:`ctxvar.stats.partition_isotropy`).

embedding_matrices.csv, one row per (matrix, centred):

    matrix         input, output, or tied (one matrix serving as both)
    tied           whether the model's output matrix is its input matrix
    rows, dim      n and d of W (n: every row the files hold)
    centred        whether the row mean was subtracted
    isotropy       I(W) = min Z(c) / max Z(c) over ±the eigenvectors of WᵀW
    log_isotropy   log I(W) (I(W) underflows to 0 below e^−745)
    isotropy_eigh_signs   the same over one sign per eigenvector, the one torch.linalg.eigh returns on the CPU
                   in float64, as the study's code takes them: comparable with its published values, but
                   dependent on the LAPACK build torch uses (≥ isotropy)
    log_isotropy_eigh_signs   its log (in log space, as log_isotropy)
    mean_cosine    mean cosine over all distinct pairs of nonzero rows, from Σu
    zero_rows      rows of norm 0, left out of the mean cosine

embedding_projection.parquet: per matrix and centring, every row's two coordinates on the matrix's first two
right singular vectors (columns matrix, centred, row, x, y; float32 coordinates). Its metadata holds the model id
(``model``) and what was read (``weights``: ``read``, ``tensors`` or ``model``; the ``files`` read with their
sizes; for tensors read alone each tensor's file, dtype, shape and SHA-256, and ``built_shape`` where config.json
builds another; the ``weights_sha256`` of the tensors
or of the whole files, :class:`ctxvar.models.hashing.WeightsDigest`; ``config_sha256``; a Hub id's ``commit``).
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pandas as pd
import pyarrow as pa

from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import write_table
from ctxvar.stats.partition_isotropy import mean_cosine_of_rows, partition_isotropies, svd_projection

log = logging.getLogger(__name__)

MATRIX_COLUMNS = [
    "matrix",
    "tied",
    "rows",
    "dim",
    "centred",
    "isotropy",
    "log_isotropy",
    "isotropy_eigh_signs",
    "log_isotropy_eigh_signs",
    "mean_cosine",
    "zero_rows",
]


def parameter_names(model, tensor) -> set[str]:
    """Every name under which ``model`` holds the parameter ``tensor`` (tied weights have several)."""
    return {name for name, parameter in model.named_parameters(remove_duplicate=False) if parameter is tensor}


def float64_array(tensor) -> np.ndarray:
    """A torch tensor as a float64 numpy array on the host."""
    import torch

    return tensor.detach().to("cpu", torch.float64).numpy()


def embedding_matrices(model, missing_keys=()) -> dict[str, np.ndarray]:
    """``{"input": W_in, "output": W_out}`` as float64 arrays, or ``{"tied": W}`` when the output matrix is the
    input matrix (same storage or equal values), or ``{"input": W_in}`` when there is no output matrix or
    its weights are among ``missing_keys`` (initialised at random by the loader, not the model's)."""
    import torch

    inp = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    out = getattr(head, "weight", None)
    if out is None:
        return {"input": float64_array(inp)}
    if out.data_ptr() == inp.data_ptr() or (out.shape == inp.shape and torch.equal(out, inp)):
        return {"tied": float64_array(inp)}
    if parameter_names(model, out) & set(missing_keys):
        log.warning("the output embedding matrix is not in the model's files (it would be random); left out")
        return {"input": float64_array(inp)}
    return {"input": float64_array(inp), "output": float64_array(out)}


def matrix_rows(name: str, w: np.ndarray, tied: bool) -> list[dict]:
    """The two rows of embedding_matrices.csv for one matrix: uncentred, then centred."""
    rows = []
    for centre in (False, True):
        cosine, zero_rows = mean_cosine_of_rows(w - w.mean(axis=0) if centre else w)
        both_signs, eigh_signs = partition_isotropies(w, centre=centre)
        rows.append(
            {
                "matrix": name,
                "tied": tied,
                "rows": w.shape[0],
                "dim": w.shape[1],
                "centred": centre,
                **both_signs,
                **{f"{key}_eigh_signs": value for key, value in eigh_signs.items()},
                "mean_cosine": cosine,
                "zero_rows": zero_rows,
            }
        )
    return rows


def matrix_table(matrices: dict[str, np.ndarray]) -> pd.DataFrame:
    """embedding_matrices.csv for the matrices of :func:`embedding_matrices` (module docstring)."""
    tied = "tied" in matrices
    rows = [row for name, w in matrices.items() for row in matrix_rows(name, w, tied)]
    return pd.DataFrame(rows, columns=MATRIX_COLUMNS)


def projection_table(matrices: dict[str, np.ndarray]) -> pa.Table:
    """embedding_projection.parquet: every row of each matrix, uncentred and centred, on its top two right
    singular vectors (:func:`ctxvar.stats.partition_isotropy.svd_projection`)."""
    parts = []
    for name, w in matrices.items():
        for centre in (False, True):
            xy = svd_projection(w, centre=centre).astype(np.float32)
            parts.append(
                pa.table(
                    {
                        "matrix": pa.array([name] * len(w), pa.string()),
                        "centred": pa.array(np.full(len(w), centre)),
                        "row": pa.array(np.arange(len(w), dtype=np.int64)),
                        "x": pa.array(xy[:, 0]),
                        "y": pa.array(xy[:, 1]),
                    }
                )
            )
    return pa.concat_tables(parts)


def embedding_matrix_statistics(entry: dict, source: str, dtype: str, csv_path, projection_path) -> None:
    """Read the embedding matrices of the model of ``entry`` from ``source`` (in ``dtype``, on the CPU) and write
    embedding_matrices.csv and embedding_projection.parquet (module docstring), the latter with what was read
    (key ``weights``)."""
    matrices, weights = read_matrices(entry, source, dtype)
    table = matrix_table(matrices)
    log.info("model %r: %s", entry["id"], table.to_string(index=False))
    write_csv(table, csv_path)
    write_table(projection_table(matrices), projection_path, {"model": entry["id"], "weights": weights})


def read_matrices(entry: dict, source: str, dtype: str) -> tuple[dict[str, np.ndarray], dict]:
    """``(matrices, what was read)``: the matrices alone from the files holding them where they can be
    (:func:`ctxvar.models.embedding_weights.read_embedding_weights`), else from the whole model loaded with its head
    (:func:`whole_model_matrices`)."""
    from ctxvar.models.embedding_weights import Unresolved, read_embedding_weights

    try:
        read = read_embedding_weights(entry, source, dtype)
    except Unresolved as reason:
        return whole_model_matrices(entry, source, dtype, alone=str(reason))
    return {name: float64_array(w) for name, w in read.matrices.items()}, read.record


def whole_model_matrices(
    entry: dict, source: str, dtype: str, alone: str | None = None
) -> tuple[dict[str, np.ndarray], dict]:
    """``(matrices, what was read)`` of the model loaded whole with its head: its weight files (a folder's checked
    against its ``SHA256SUMS`` first) and the SHA-256 of every tensor in them
    (:func:`ctxvar.models.hashing.weights_sha256`). ``alone``: why the matrices could not be read alone (named
    where that stops the job)."""
    from ctxvar.config.entries import built_in_run
    from ctxvar.files.atomic import verify_manifest
    from ctxvar.models import hashing
    from ctxvar.models.loading import load_with_head

    if os.path.isdir(source):
        verify_manifest(source, built_in_run(entry))
    model, info = load_with_head(entry, source, dtype, alone)
    matrices = embedding_matrices(model, info.get("missing_keys") or ())
    files = hashing.weight_files(entry, source, model)
    record = {
        "read": "model",
        "files": {os.path.basename(path): os.path.getsize(path) for path in files.paths},
        "weights_sha256": hashing.weights_sha256(files),
        "config_sha256": hashing.model_config_sha256(model.config),
    }
    del model
    return matrices, record
