"""The sufficient-statistics files: sums per (layer, token type), and per layer.

Sums file (layout :data:`SUMS_LAYOUT`): one Parquet file, one row group per layer
(row group i holds layer i), rows sorted by token. No column holds nulls. Columns:

    layer     int16                     hidden-state index, 0 = embedding output
    token     string                    the token type's key
    n         int64                     occurrences n_t

then one column per sum of :data:`ctxvar.stats.declarations.TYPE_SUMS` that the run's ``geometry`` keeps, in
declaration order: float64, or fixed_size_binary(8·d) for a d-vector (d little-endian float64):
``sum_sq`` (Σ‖x‖²), ``sum`` (Σx) and, with geometry.cosine, ``sum_unit`` (Σ x/‖x‖). A reader takes them by
name; a file lacking a sum every run keeps, or holding a column no declaration names, is refused.

Moments file (layout :data:`MOMENTS_LAYOUT`; geometry.covariance, or a declared per-layer sum kept): row
group i = layer i, with d rows, row j for dimension j:

    layer      int16                     hidden-state index
    n          int64                     tokens N (the same on every row)
    sum        float64                   (Σx)_j over all tokens
    sum_outer  fixed_size_binary(8·d)    row j of Σxxᵀ: d little-endian float64 (geometry.covariance)

then one float64 column per declared per-layer sum kept (:data:`ctxvar.stats.declarations.LAYER_SUMS`):
a d-vector's component j on row j, a number the same on every row.

A vector is one fixed-size binary value rather than a list of d numbers: Parquet
stores a list with a repetition and a definition level per number, which its
reader decodes one number at a time (a bert-base partial read back 5× slower).
Pages are plain, uncompressed, without dictionary or statistics; the footer holds
the value digest of every column of every layer, checked as it is read (see
:mod:`ctxvar.files.parquet`). The footer names the layout: a reader refuses a file of any other
(an older ctxvar's sums among them) with a line that says to re-run.

Partials (one per model × shard) and the merged files share these layouts, so
merging is adding files. The JSON metadata describes the model and the run.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pyarrow as pa

from ctxvar.errors import StatisticsError
from ctxvar.files.atomic import atomic_path
from ctxvar.files.parquet import (
    VECTOR_WRITE_OPTIONS,
    ParquetInput,
    parquet_writer,
    tagged_schema,
    vector_column,
    vector_rows,
)
from ctxvar.stats import declarations
from ctxvar.stats.declarations import declared

SUMS_LAYOUT = "ctxvar sums 2"
MOMENTS_LAYOUT = "ctxvar moments 2"


KEY_COLUMNS = ("layer", "token", "n")  # every sums file's first columns; the declared sums follow


def layer_width(metadata: dict, layer: int) -> int:
    """The width of hidden state ``layer`` of the sums file with ``metadata``: ``d``, but for the last of a model
    whose tail projects it to fewer coordinates (``last_width``: OPT-350m's 512 of 1024), whose vectors are held
    at d with zeros after its own width (:func:`ctxvar.extraction.accumulator.full_width`)."""
    if layer == metadata["n_layers"] - 1 and metadata.get("last_width"):
        return int(metadata["last_width"])
    return int(metadata["d"])


def sums_schema(d: int, metadata: dict, sums: Iterable[str] = ("sum_sq", "sum")) -> pa.Schema:
    """The schema of a sums file holding the declared sums named ``sums`` (written in declaration order)."""
    kept = set(sums)
    fields = [
        pa.field("layer", pa.int16(), nullable=False),
        pa.field("token", pa.string(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),
        *(
            pa.field(item.name, pa.binary(8 * d) if item.vector else pa.float64(), nullable=False)
            for item in declarations.TYPE_SUMS
            if item.name in kept
        ),
    ]
    return tagged_schema(pa.schema(fields), metadata, SUMS_LAYOUT)


def moments_schema(d: int, metadata: dict, outer: bool = True, layer_sums: Iterable[str] = ()) -> pa.Schema:
    """The moments file's schema: N, Σx, Σxxᵀ (with ``outer``, geometry.covariance) and the declared per-layer
    sums named ``layer_sums`` (:data:`ctxvar.stats.declarations.LAYER_SUMS`, in declaration order)."""
    kept = set(layer_sums)
    fields = [
        pa.field("layer", pa.int16(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),
        pa.field("sum", pa.float64(), nullable=False),
        *([pa.field("sum_outer", pa.binary(8 * d), nullable=False)] if outer else []),
        *(pa.field(item.name, pa.float64(), nullable=False) for item in declarations.LAYER_SUMS if item.name in kept),
    ]
    return tagged_schema(pa.schema(fields), metadata, MOMENTS_LAYOUT)


def moments_table(
    layer: int, n: int, sum_: np.ndarray, sum_outer: np.ndarray | None, schema: pa.Schema, layer_sums=None
) -> pa.Table:
    """One layer's d rows: N, (Σx)_j, row j of Σxxᵀ (d, d) if the schema holds it, and the per-layer sums
    ``layer_sums`` (name → (d,) or a number) the schema names."""
    d = len(sum_)
    columns = [
        pa.array(np.full(d, layer, np.int16)),
        pa.array(np.full(d, n, np.int64)),
        pa.array(np.asarray(sum_, np.float64)),
    ]
    if "sum_outer" in schema.names:
        columns.append(vector_column(sum_outer.reshape(d, d)))
    for name in schema.names[len(columns) :]:
        columns.append(pa.array(np.broadcast_to(np.asarray(layer_sums[name], np.float64), d)))
    return pa.table(columns, schema=schema)


class LayerFile:
    """The reader of every per-layer file kind: sums, moments, the position sample, words and sentences. A kind
    names its layout (``LAYOUT``), what its errors call a row group (``ROW_GROUP``), the columns it must hold
    (:meth:`check_columns`) and what one layer's table reads as (:meth:`from_table`); opening checks the file's
    layout and its value digests as it reads (:class:`ctxvar.files.parquet.ParquetInput`).

    A kind whose files add across shards the same way in every layer also says what of one layer it adds
    (:meth:`part`), which columns the files to add must share (:meth:`held`), and the schema and the table of
    their sum (:meth:`merged_schema`, :meth:`merged_table`, one layer's parts in shard order):
    :func:`ctxvar.stats.merge.merge_layer_files` merges any such kind (the sums files have a merge of their own,
    :func:`ctxvar.stats.merge.merge_partials`)."""

    LAYOUT: str = ""
    ROW_GROUP: str = "layer"

    def __init__(self, path):
        self.path = str(path)
        self._file = ParquetInput(self.path, self.LAYOUT)
        self.metadata = self._file.metadata
        self.schema = self._file.schema
        self.size = self._file.size
        self.n_layers = self._file.num_row_groups
        self.check_columns(self.schema.names)

    def check_columns(self, names: list[str]) -> None:
        """Raise :class:`StatisticsError` unless ``names`` are the columns of this kind (the layout checks them
        where a kind has nothing more to check)."""

    def table(self, layer: int, columns: list[str] | None = None) -> pa.Table:
        """Row group ``layer`` (only ``columns``, if given), verified."""
        return self._file.row_group(layer, columns, what=self.ROW_GROUP)

    def layer(self, layer: int):
        """What layer ``layer`` reads as (:meth:`from_table`)."""
        return self.from_table(layer, self.table(layer))

    def from_table(self, layer: int, table: pa.Table):
        return table

    def held(self) -> tuple[str, ...]:
        """The columns that files to add together must share."""
        return tuple(self.schema.names)

    def part(self, layer: int):
        """Layer ``layer`` as :meth:`merged_table` adds it (:meth:`layer` unless a kind says otherwise)."""
        return self.layer(layer)

    @classmethod
    def merged_schema(cls, first: "LayerFile", metadata: dict) -> pa.Schema:
        """The merged file's schema, from the first part and the merged ``metadata``."""
        raise NotImplementedError

    @classmethod
    def merged_table(cls, layer: int, parts: list, schema: pa.Schema, metadata: dict) -> pa.Table:
        """Layer ``layer`` of the merged file: ``parts`` (:meth:`part` of each file, in shard order) added."""
        raise NotImplementedError


class MomentsFile(LayerFile):
    """A moments file; :meth:`layer_sums` reads one layer."""

    LAYOUT = MOMENTS_LAYOUT
    ROW_GROUP = "moments, layer"

    def check_columns(self, names: list[str]) -> None:
        self.has_outer = "sum_outer" in names
        self.layer_sum_names = tuple(names[4 if self.has_outer else 3 :])  # the declared per-layer sums it holds
        self.sum_names = ("sum", *(("sum_outer",) if self.has_outer else ()), *self.layer_sum_names)
        known = {item.name for item in declarations.LAYER_SUMS}
        if names[:3] != ["layer", "n", "sum"] or not set(self.layer_sum_names) <= known:
            raise StatisticsError(
                f"{self.path}: holds columns {names}, not a moments file of this ctxvar's declared sums; delete it "
                "and re-run"
            )

    def layer(self, layer: int) -> tuple[int, np.ndarray, np.ndarray | None]:
        """``(N, Σx (d,), Σxxᵀ (d, d) or None without it)`` of one layer."""
        n, sum_, outer, _ = self.layer_sums(layer)
        return n, sum_, outer

    def layer_sums(self, layer: int) -> tuple[int, np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
        """``(N, Σx, Σxxᵀ or None, the declared per-layer sums by name: (d,) or a float)`` of one layer."""
        table = self.table(layer)
        sum_ = table.column("sum").to_numpy()
        outer = vector_rows(table.column("sum_outer")) if self.has_outer else None
        if len(table) == 0 or (outer is not None and outer.shape[0] != outer.shape[1]):
            raise StatisticsError(f"{self.path}: layer {layer} holds {len(table)} rows for d = {len(sum_)}")
        values = {}
        for name in self.layer_sum_names:
            column = table.column(name).to_numpy()
            values[name] = column if declarations.declared_layer(name).vector else float(column[0])
        return int(table.column("n")[0].as_py()), sum_, outer, values

    def held(self) -> tuple[str, ...]:
        return self.sum_names

    def part(self, layer: int) -> tuple[int, np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
        return self.layer_sums(layer)

    @classmethod
    def merged_schema(cls, first: "MomentsFile", metadata: dict) -> pa.Schema:
        return moments_schema(metadata["d"], metadata, first.has_outer, first.layer_sum_names)

    @classmethod
    def merged_table(cls, layer: int, parts: list, schema: pa.Schema, metadata: dict) -> pa.Table:
        """N, Σx, Σxxᵀ and the per-layer sums of ``parts`` (:meth:`layer_sums`), added in shard order."""
        n, sum_, outer = 0, 0.0, 0.0 if parts[0][2] is not None else None
        values = dict.fromkeys(parts[0][3], 0.0)
        for part in parts:
            n, sum_ = n + part[0], sum_ + part[1]
            outer = outer + part[2] if outer is not None else None
            values = {name: total + part[3][name] for name, total in values.items()}
        return moments_table(layer, n, sum_, outer, schema, values)


@dataclass
class LayerSums:
    """One layer's n_t and declared sums (by name, in declaration order) for ``types`` (sorted, distinct).
    A sum reads as an attribute too (``layer_sums.sum_sq``); one not held reads as None."""

    layer: int
    types: np.ndarray  # (U,) str
    count: np.ndarray  # (U,) int64
    sums: dict[str, np.ndarray]  # name → (U,) or (U, d) float64

    @classmethod
    def of(cls, layer: int, types: np.ndarray, count: np.ndarray, **sums: np.ndarray) -> "LayerSums":
        """The layer's sums given by name (``sum=…, sum_sq=…``), kept in declaration order; None values left out.
        A name no declaration has raises TypeError, as an unknown keyword does."""
        unknown = sorted(set(sums) - {item.name for item in declarations.TYPE_SUMS})
        if unknown:
            raise TypeError(f"LayerSums.of: no declared sum is named {', '.join(unknown)}")
        return cls(
            layer,
            types,
            count,
            {item.name: sums[item.name] for item in declarations.TYPE_SUMS if sums.get(item.name) is not None},
        )

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "sums":
            raise AttributeError(name)
        try:
            declared(name)
        except KeyError:
            raise AttributeError(name) from None
        return self.sums.get(name)

    def to_table(self, schema: pa.Schema) -> pa.Table:
        """The layer's rows; the vectors' memory is shared with the table, not copied."""
        columns = [
            pa.array(np.full(len(self.types), self.layer, dtype=np.int16)),
            pa.array(self.types, type=pa.string()),
            pa.array(self.count, type=pa.int64()),
            *(
                vector_column(self.sums[name]) if declared(name).vector else pa.array(self.sums[name], pa.float64())
                for name in schema.names[len(KEY_COLUMNS) :]
            ),
        ]
        return pa.table(columns, schema=schema)

    def additive(self) -> tuple[np.ndarray, ...]:
        """n and the sums, every one of which adds across shards, in a fixed order."""
        return (self.count, *self.sums.values())


class LayerWriter:
    """Write one table per layer, in layer order, one row group each with its value digests
    (:class:`ctxvar.files.parquet.ParquetOutput`), atomically, with the options of
    :data:`ctxvar.files.parquet.VECTOR_WRITE_OPTIONS`.
    ``bytes_written``: the file's size once complete.

    >>> with LayerWriter(path, schema) as writer:
    ...     for table in tables: writer.write(table)
    """

    def __init__(self, path, schema: pa.Schema):
        self.path = path
        self._atomic = atomic_path(path)
        self.schema = schema
        self._next_layer = 0
        self.bytes_written = 0

    def __enter__(self):
        self._tmp = self._atomic.__enter__()
        try:
            self._writer = parquet_writer(self._tmp, self.schema, **VECTOR_WRITE_OPTIONS)
        except BaseException as error:  # the temporary file goes with the failed writer
            self._atomic.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def write(self, table: pa.Table) -> None:
        assert table.num_rows == 0 or table.column("layer")[0].as_py() == self._next_layer
        self._writer.write_table(table)
        self._next_layer += 1

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                self._writer.close()
            else:
                self._writer.__exit__(*exc)
        except BaseException as error:  # the temporary file goes, not onto the path
            self._atomic.__exit__(type(error), error, error.__traceback__)
            raise
        suppress = self._atomic.__exit__(*exc)
        if exc[0] is None:
            self.bytes_written = os.path.getsize(self.path)
        return suppress


def write_sums(path, layers: Iterable[LayerSums], d: int, metadata: dict) -> None:
    """Write a sums file from layers given in order 0, 1, …, each holding the same sums."""
    layers = iter(layers)
    first = next(layers)
    schema = sums_schema(d, metadata, first.sums)
    with LayerWriter(path, schema) as writer:
        for layer in itertools.chain([first], layers):
            writer.write(layer.to_table(schema))


class SumsFile(LayerFile):
    """A sums file, one layer at a time. Every layer must hold the types of layer 0."""

    LAYOUT = SUMS_LAYOUT

    def __init__(self, path):
        super().__init__(path)
        self._tokens: pa.ChunkedArray | None = None  # layer 0's, as read
        self._types: np.ndarray | None = None  # the same as numpy strings, converted once

    def check_columns(self, names: list[str]) -> None:
        if self.metadata.get("n_layers") != self.n_layers:
            raise StatisticsError(
                f"{self.path}: holds {self.n_layers} layers but its metadata says {self.metadata.get('n_layers')}; "
                "delete it and re-run"
            )
        held = set(names[len(KEY_COLUMNS) :])
        self.sum_names = tuple(item.name for item in declarations.TYPE_SUMS if item.name in held)  # declaration order
        always = {item.name for item in declarations.TYPE_SUMS if item.switch is None}
        width = self.schema.field("sum").type if "sum" in held else None
        self.d = width.byte_width // 8 if isinstance(width, pa.FixedSizeBinaryType) else 0
        expected = sums_schema(self.d, {}, self.sum_names)
        if (
            list(names[: len(KEY_COLUMNS)]) != list(KEY_COLUMNS)
            or held != set(self.sum_names) | always
            or any(self.schema.field(name).type != expected.field(name).type for name in self.sum_names)
        ):
            raise StatisticsError(
                f"{self.path}: holds columns {names}, not a sums file of this ctxvar's declared sums; delete it and "
                "re-run"
            )
        self.has_unit = "sum_unit" in self.sum_names

    def held(self) -> tuple[str, ...]:
        return self.sum_names

    def layer(self, layer: int, columns: list[str] | None = None) -> LayerSums:
        """Row group ``layer``; columns not asked for are None."""
        table = self.table(layer, columns)
        names = set(table.column_names)
        return LayerSums(
            layer=layer,
            types=self._layer_types(layer, table.column("token")) if "token" in names else None,
            count=table.column("n").to_numpy() if "n" in names else None,
            sums={
                name: vector_rows(table.column(name)) if declared(name).vector else table.column(name).to_numpy()
                for name in self.sum_names
                if name in names
            },
        )

    def _layer_types(self, layer: int, tokens: pa.ChunkedArray) -> np.ndarray:
        """The types of a layer as numpy strings; converted from Arrow once per file, not once per layer."""
        if self._tokens is None:
            self._tokens = tokens
            self._types = tokens.to_numpy(zero_copy_only=False)
        elif not tokens.equals(self._tokens):
            raise StatisticsError(
                f"{self.path}: layer {layer} holds other token types than layer 0; delete it and re-run"
            )
        return self._types

    def types(self) -> np.ndarray:
        """The token types (every layer holds the same ones); layer 0's token column is read once."""
        if self._types is None:
            self.layer(0, columns=["token"])
        return self._types
