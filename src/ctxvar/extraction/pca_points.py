"""Fig. 1's points: the types chosen before extraction, their occurrences collected by the extraction's own pass,
and their projection once the merged sums give the components.

Before extraction, :func:`shard_type_counts` tokenizes a shard exactly as its extraction job will (the same
``tokens`` settings and the model's positions), so the counts summed over the shards are the merged n_t of
tokens.parquet. The extraction job of figures.pca.model collects, per shard, the hidden states at the chosen
layer of every occurrence of the chosen types (:class:`ctxvar.extraction.type_points.TypePoints`) into a points
file, one row per occurrence in the order the batches ran (empty for the other models' jobs):

    token   string                  the type's key
    batch   int32                   the extraction batch that held it
    x       fixed_size_binary(4·d)  the hidden state: d little-endian float32

:func:`merge_points` gathers the shards' files, which are temporary like the partial sums, into the model's
``pca/points.parquet`` (the same columns and ``shard``, int32), so that the figures can be drawn again without
another forward pass. :func:`projected_points` projects them on the components (float64), batch by batch as
the forward pass grouped them: each point's coordinates x·w₁, x·w₂ and its squared norm ‖x‖².

Importing the module imports no torch, which gathering the points (a job of its own) does not use.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ctxvar.errors import StatisticsError
from ctxvar.files.atomic import atomic_path, read_csv
from ctxvar.files.parquet import (
    ParquetInput,
    parquet_writer,
    read_table,
    tagged_schema,
    vector_column,
    vector_rows,
    write_table,
)
from ctxvar.models.batching import ShardBatches
from ctxvar.models.tokens import type_marker, type_table

if TYPE_CHECKING:
    import pandas as pd

    from ctxvar.extraction.settings import ExtractionSettings
    from ctxvar.extraction.type_points import TypePoints

log = logging.getLogger(__name__)

TYPES_COLUMNS = ["layer", "token", "n", "bin"]


def points_schema(d: int) -> pa.Schema:
    fields = [("token", pa.string()), ("batch", pa.int32()), ("x", pa.binary(4 * d))]
    return pa.schema([pa.field(name, kind, nullable=False) for name, kind in fields])


def shard_type_counts(shard_path, tokenizer, max_positions: int | None, settings: ExtractionSettings):
    """``(types, n)``: the shard's type keys (sorted) and their counts, as its extraction job tokenizes it."""
    from ctxvar.extraction.shard import fit_to_positions, read_shard

    encoded, _, _ = fit_to_positions(read_shard(shard_path, tokenizer)[0], max_positions, settings)
    types, type_index = type_table(tokenizer, encoded.ids, type_marker(tokenizer, settings.merge_markers))
    return types, np.bincount(type_index, minlength=len(types))


def read_types(types_path) -> pd.DataFrame:
    """types.csv (:func:`ctxvar.figures.pca_selection.select_pca_types`): layer, token, n, bin per chosen type."""
    return read_csv(types_path, keep_default_na=False, dtype={"token": str})


def type_points(job, padded: ShardBatches, types_path) -> TypePoints | None:
    """The collector of the types in ``types_path`` for ``job`` (a :class:`ctxvar.extraction.job.ShardRun`),
    None when none was chosen (a corpus too small for Fig. 1)."""
    from ctxvar.extraction.type_points import TypePoints

    chosen = read_types(types_path)
    if chosen.empty:
        return None
    layer = int(chosen["layer"].iloc[0])
    if not 0 <= layer < job.n_layers:
        raise StatisticsError(
            f"{types_path}: layer {layer} is not a hidden state of this model (0 … {job.n_layers - 1}); it was "
            "chosen for another model: delete it and rerun"
        )
    selected = np.isin(job.types, chosen["token"].to_numpy())
    points = TypePoints(layer, selected, padded, job.d, job.device)
    log.info("Fig. 1: %d occurrences of %d chosen types at layer %d", len(points.tokens), int(selected.sum()), layer)
    return points


def write_points(path, types: np.ndarray, points: TypePoints | None, metadata: dict) -> None:
    """The points file of one shard (empty when ``points`` is None)."""
    d = metadata["d"]
    if points is None:
        table = points_schema(d).empty_table()
        layer = None
    else:
        type_index, batch, rows = points.to_numpy()
        table = pa.table(
            [pa.array(types[type_index], pa.string()), pa.array(batch, pa.int32()), vector_column(rows, "<f4")],
            schema=points_schema(d),
        )
        layer = points.layer
    info = {"model_id": metadata["model_id"], "shard": metadata["shard"], "layer": layer, "d": d}
    write_table(table, path, metadata=info)


def merge_points(paths, merged_path) -> None:
    """The points files of a model's shards ``paths`` (in shard order) as one file, ``merged_path``: their rows in
    order with the column ``shard`` (the index in ``paths``), one row group per shard's row group; metadata
    ``model_id``, ``layer`` (None when no type was chosen), ``d`` and ``shards``. Files of other models or layers
    are a :class:`StatisticsError`."""
    inputs = [ParquetInput(path) for path in paths]
    first = inputs[0].metadata
    layers = {part.metadata["layer"] for part in inputs}  # None (no type chosen) is every shard's or none's
    for part in inputs:
        if (part.metadata["model_id"], part.metadata["d"]) != (first["model_id"], first["d"]) or len(layers) > 1:
            raise StatisticsError(
                f"{part.path}: Fig. 1's points of model {part.metadata['model_id']!r} at layer "
                f"{part.metadata['layer']} do not belong with {inputs[0].path}'s ({first['model_id']!r}, layers "
                f"{sorted(layers, key=str)}); delete the model's partials and rerun"
            )
    schema = points_schema(first["d"]).append(pa.field("shard", pa.int32(), nullable=False))
    info = {"model_id": first["model_id"], "layer": layers.pop(), "d": first["d"]}
    with (
        atomic_path(merged_path) as tmp,
        parquet_writer(tmp, tagged_schema(schema, {**info, "shards": len(paths)})) as out,
    ):
        for shard, part in enumerate(inputs):
            for group in range(part.num_row_groups):
                table = part.row_group(group)
                out.write_table(
                    table.append_column(schema.field("shard"), pa.array(np.full(len(table), shard, np.int32)))
                )


def projected_points(path, components: np.ndarray) -> pd.DataFrame:
    """token, pc1, pc2, sq_norm of every point in the merged points file ``path`` (:func:`merge_points`): x·w₁,
    x·w₂ with ``components`` (2, d) and ‖x‖², in float64, one product per extraction batch of each shard."""
    import pandas as pd
    import torch

    weights = torch.from_numpy(np.ascontiguousarray(components, dtype=np.float64))
    table = read_table(path)
    rows = torch.from_numpy(vector_rows(table.column("x"), "<f4").astype(np.float64))
    batch = np.stack([table.column("shard").to_numpy(), table.column("batch").to_numpy()])
    bounds = np.flatnonzero((np.diff(batch, axis=1) != 0).any(axis=0)) + 1
    parts = [
        (part @ weights.T, torch.einsum("kd,kd->k", part, part))
        for part in torch.tensor_split(rows, torch.from_numpy(bounds))
    ]
    coordinates = torch.cat([p[0] for p in parts]).numpy() if len(rows) else np.zeros((0, 2))
    sq_norm = torch.cat([p[1] for p in parts]).numpy() if len(rows) else np.zeros(0)
    return pd.DataFrame(
        {
            "token": table.column("token").to_pylist(),
            "pc1": coordinates[:, 0],
            "pc2": coordinates[:, 1],
            "sq_norm": sq_norm,
        }
    )
