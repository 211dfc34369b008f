"""Disk: the bytes a run's sums will take, checked against the free space before extraction runs.

Sizes are upper bounds, uncompressed, with every partial of the run on disk at
once (with ``keep_partials: false`` each model's partials go once merged, so the
real peak is lower). For a shard of N tokens and a model with L hidden states of
width d and a vocabulary of V entries, the shard holds U ≤ min(V, N) types and

    partial sums      U · L · (8 · (d + 2) + 24)     (+ U · L · 8d with geometry.cosine)
    moments           L · 8 · (d² + d + 2)           (geometry.covariance)
    sample            L · min(k, N) · (4d + 48)      (geometry.twonn)

The merged files are the same with N the whole corpus, plus tokens.parquet
(U · L · 64 bytes).
"""

from __future__ import annotations

import os
import shutil

from .config import models_by_id
from .errors import DiskSpaceError
from .resources import ModelShape, model_shape, shard_tokens

ROW_OVERHEAD = 24  # token string, layer and n per row, roughly
TOKEN_TABLE_ROW = 64  # tokens.parquet: layer, token, n, Q, M, V, self-similarity


def sums_bytes(tokens: int, shape: ModelShape, geometry: dict) -> int:
    """Upper bound of one sums file set (sums, moments, sample) over ``tokens`` tokens."""
    types = min(shape.vocab_size, tokens)
    total = types * shape.n_layers * (8 * (shape.d + 2) + ROW_OVERHEAD)
    if geometry["cosine"]:
        total += types * shape.n_layers * 8 * shape.d
    if geometry["covariance"]:
        total += shape.n_layers * 8 * (shape.d**2 + shape.d + 2)
    if geometry["twonn"]:
        total += shape.n_layers * min(geometry["sample_size"], tokens) * (4 * shape.d + 48)
    return total


def planned_bytes(config: dict, run_folder) -> int | None:
    """Bytes still to be written by the run's extraction and merge jobs: partials not yet on disk, merged files
    of models not yet merged. None while the corpus shards do not exist (nothing to estimate from yet)."""
    shards = [os.path.join(run_folder, "corpus", "shards", f"{i}.parquet") for i in range(config["shards"])]
    if not all(map(os.path.exists, shards)):
        return None
    tokens = [shard_tokens(path) for path in shards]
    total = 0
    for mid, entry in models_by_id(config).items():
        if os.path.exists(os.path.join(run_folder, mid, "stats.parquet")):
            continue
        shape = model_shape(entry, os.path.join(run_folder, "models", mid) if entry.get("init") in ("random", "gaussian")
                            else entry["name"])
        for shard, count in enumerate(tokens):
            if not os.path.exists(os.path.join(run_folder, "partials", mid, f"{shard}.parquet")):
                total += sums_bytes(count, shape, config["geometry"])
        total += sums_bytes(sum(tokens), shape, config["geometry"])
        total += min(shape.vocab_size, sum(tokens)) * shape.n_layers * TOKEN_TABLE_ROW
    return total


def check_free_space(config: dict, run_folder) -> None:
    """Raise :class:`DiskSpaceError` if the run's remaining sums do not fit in the free space of ``run_folder``'s disk."""
    needed = planned_bytes(config, run_folder)
    if needed is None:
        return
    folder = os.path.abspath(run_folder)
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise DiskSpaceError(
            f"disk: this run still needs up to {needed / 1e9:.2f} GB for partial and merged sums, but {folder} has "
            f"{free / 1e9:.2f} GB free; free space, run on a larger disk (snakemake --directory DIR), set "
            "geometry.cosine: false (halves the sums), use fewer shards (each repeats the types), or split the models "
            "across runs"
        )
