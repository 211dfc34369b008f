"""The sufficient-statistics files: sums per (layer, token type), and per layer.

Sums file: one Parquet file, one row group per layer (row group i holds layer
i), rows sorted by token. Columns:

    layer     int16                          hidden-state index, 0 = embedding output
    token     string                         the token type's key
    n         int64                          occurrences n_t
    sum_sq    float64                        Σ‖x‖²
    sum       fixed_size_list<float64>[d]    Σx
    sum_unit  fixed_size_list<float64>[d]    Σ x/‖x‖   (only with geometry.cosine)

Moments file (geometry.covariance), one row per layer, row group i = layer i:

    layer      int16                            hidden-state index
    n          int64                            tokens N
    sum        fixed_size_list<float64>[d]      Σx over all tokens
    sum_outer  fixed_size_list<float64>[d·d]    Σxxᵀ, row-major

Partials (one per model × shard) and the merged files share these layouts, so
merging is adding files. The JSON metadata describes the model and the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pyarrow as pa

from ctxvar.errors import StatisticsError
from ctxvar.io import ParquetInput, atomic_path, parquet_writer, tagged_schema


def sums_schema(d: int, metadata: dict, unit: bool = False) -> pa.Schema:
    fields = [
        ("layer", pa.int16()),
        ("token", pa.string()),
        ("n", pa.int64()),
        ("sum_sq", pa.float64()),
        ("sum", pa.list_(pa.float64(), d)),
    ]
    return tagged_schema(pa.schema(fields + ([("sum_unit", pa.list_(pa.float64(), d))] if unit else [])), metadata)


def moments_schema(d: int, metadata: dict) -> pa.Schema:
    return tagged_schema(
        pa.schema(
            [
                ("layer", pa.int16()),
                ("n", pa.int64()),
                ("sum", pa.list_(pa.float64(), d)),
                ("sum_outer", pa.list_(pa.float64(), d * d)),
            ]
        ),
        metadata,
    )


def moments_table(layer: int, n: int, sum_: np.ndarray, sum_outer: np.ndarray, schema: pa.Schema) -> pa.Table:
    d = len(sum_)
    return pa.table(
        [
            pa.array([layer], pa.int16()),
            pa.array([n], pa.int64()),
            pa.FixedSizeListArray.from_arrays(pa.array(sum_, pa.float64()), d),
            pa.FixedSizeListArray.from_arrays(pa.array(sum_outer.reshape(-1), pa.float64()), d * d),
        ],
        schema=schema,
    )


def read_layer(path, layer: int, what: str) -> pa.Table:
    """Row group ``layer`` of a per-layer file (``what`` names it in the error), verified."""
    return ParquetInput(path).row_group(layer, what=f"{what}, layer")


def read_moments(path, layer: int) -> tuple[int, np.ndarray, np.ndarray]:
    """``(N, Σx (d,), Σxxᵀ (d, d))`` of one layer of a moments file."""
    table = read_layer(path, layer, "moments")
    d = table.schema.field("sum").type.list_size
    return (
        int(table.column("n")[0].as_py()),
        _matrix(table.column("sum"), d)[0],
        _matrix(table.column("sum_outer"), d * d).reshape(d, d),
    )


@dataclass
class LayerSums:
    """One layer's sums for ``types`` (sorted, distinct)."""

    layer: int
    types: np.ndarray  # (U,) str
    count: np.ndarray  # (U,) int64
    sum: np.ndarray  # (U, d) float64
    sum_sq: np.ndarray  # (U,) float64
    sum_unit: np.ndarray | None = None  # (U, d) float64, Σ x/‖x‖ (geometry.cosine)

    def to_table(self, schema: pa.Schema) -> pa.Table:
        d = self.sum.shape[1]
        columns = [
            pa.array(np.full(len(self.types), self.layer, dtype=np.int16)),
            pa.array(self.types, type=pa.string()),
            pa.array(self.count, type=pa.int64()),
            pa.array(self.sum_sq, type=pa.float64()),
            pa.FixedSizeListArray.from_arrays(pa.array(self.sum.reshape(-1), type=pa.float64()), d),
        ]
        if "sum_unit" in schema.names:
            columns.append(pa.FixedSizeListArray.from_arrays(pa.array(self.sum_unit.reshape(-1), type=pa.float64()), d))
        return pa.table(columns, schema=schema)

    def additive(self) -> tuple[np.ndarray, ...]:
        """The sums that add across shards, in a fixed order."""
        return (self.count, self.sum, self.sum_sq) + ((self.sum_unit,) if self.sum_unit is not None else ())


class LayerWriter:
    """Write one table per layer, in layer order, one row group each, atomically.

    >>> with LayerWriter(path, schema) as writer:
    ...     for table in tables: writer.write(table)
    """

    def __init__(self, path, schema: pa.Schema):
        self._atomic = atomic_path(path)
        self.schema = schema
        self._next_layer = 0

    def __enter__(self):
        self._tmp = self._atomic.__enter__()
        # no dictionary encoding: distinct floats make Arrow build, then drop, a dictionary per page (≈ 8× the time)
        self._writer = parquet_writer(self._tmp, self.schema, use_dictionary=False)
        return self

    def write(self, table: pa.Table) -> None:
        assert table.num_rows == 0 or table.column("layer")[0].as_py() == self._next_layer
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._next_layer += 1

    def __exit__(self, *exc):
        self._writer.close()
        return self._atomic.__exit__(*exc)


def write_sums(path, layers: Iterable[LayerSums], d: int, metadata: dict, unit: bool = False) -> None:
    """Write a sums file from layers given in order 0, 1, …"""
    schema = sums_schema(d, metadata, unit)
    with LayerWriter(path, schema) as writer:
        for layer in layers:
            writer.write(layer.to_table(schema))


class SumsFile:
    """Read access to a sums file, one layer at a time."""

    def __init__(self, path):
        self.path = str(path)
        self._file = ParquetInput(self.path)
        self.metadata = self._file.metadata
        self.n_layers = self._file.num_row_groups
        if self.metadata.get("n_layers") != self.n_layers:
            raise StatisticsError(
                f"{self.path}: holds {self.n_layers} layers but its metadata says {self.metadata.get('n_layers')}; "
                "delete it and re-run"
            )
        self.d = self._file.schema.field("sum").type.list_size
        self.has_unit = "sum_unit" in self._file.schema.names

    def layer(self, layer: int, columns: list[str] | None = None) -> LayerSums:
        """Row group ``layer``; columns not asked for are None."""
        table = self._file.row_group(layer, columns, what="layer")
        names = set(table.column_names)
        return LayerSums(
            layer=layer,
            types=table.column("token").to_numpy(zero_copy_only=False) if "token" in names else None,
            count=table.column("n").to_numpy() if "n" in names else None,
            sum=_matrix(table.column("sum"), self.d) if "sum" in names else None,
            sum_sq=table.column("sum_sq").to_numpy() if "sum_sq" in names else None,
            sum_unit=_matrix(table.column("sum_unit"), self.d) if "sum_unit" in names else None,
        )

    def types(self) -> np.ndarray:
        """The token types (every layer holds the same ones)."""
        return self.layer(0, columns=["token"]).types


def _matrix(column: pa.ChunkedArray, d: int) -> np.ndarray:
    values = column.combine_chunks().flatten()
    return values.to_numpy(zero_copy_only=False).reshape(-1, d)
