"""The position sample's file (see :mod:`ctxvar.extraction.position_sample` for the sample) and its exact merge.

The sample file (layout :data:`SAMPLE_LAYOUT`) has one row group per layer (group i =
layer i), rows sorted by key, no nulls:

    layer        int16                     hidden-state index
    key          uint64                    the position's hash
    sentence_id  int64                     corpus sentence (results/corpus/sentences.parquet)
    window       int32                     piece of a split long sentence, else 0
    position     int32                     token index in the model's input, [bos] = 0
    token        string                    the token type's key
    x            fixed_size_binary(4·d)    the hidden state: d little-endian float32

Written and read like the sums (see :mod:`ctxvar.stats.sums`). The shards' samples merge into the bottom k of
their union, which is the bottom k of the whole corpus.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ctxvar.files.parquet import tagged_schema, vector_column, vector_rows
from ctxvar.stats.sums import LayerFile

SAMPLE_LAYOUT = "ctxvar sample 2"


def bottom_k(keys: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` smallest keys (all if fewer), in increasing key order."""
    if len(keys) > k:
        keep = np.argpartition(keys, k - 1)[:k]
        return keep[np.argsort(keys[keep], kind="stable")]
    return np.argsort(keys, kind="stable")


def sample_schema(d: int, metadata: dict) -> pa.Schema:
    fields = [
        ("layer", pa.int16()),
        ("key", pa.uint64()),
        ("sentence_id", pa.int64()),
        ("window", pa.int32()),
        ("position", pa.int32()),
        ("token", pa.string()),
        ("x", pa.binary(4 * d)),
    ]
    return tagged_schema(
        pa.schema([pa.field(name, kind, nullable=False) for name, kind in fields]), metadata, SAMPLE_LAYOUT
    )


def sample_table(layer: int, where: dict[str, np.ndarray], points: np.ndarray, schema: pa.Schema) -> pa.Table:
    """One layer's rows; ``where`` holds key, sentence_id, window, position, token per point (k,), ``points`` (k, d)."""
    columns = [pa.array(np.full(len(points), layer, np.int16))]
    columns += [
        pa.array(where[name], type=schema.field(name).type)
        for name in ("key", "sentence_id", "window", "position", "token")
    ]
    columns.append(vector_column(points, "<f4"))
    return pa.table(columns, schema=schema)


class SampleFile(LayerFile):
    """A sample file, one layer (a table of its points) at a time; its merge keeps the bottom k of the union."""

    LAYOUT = SAMPLE_LAYOUT
    ROW_GROUP = "sample, layer"

    @classmethod
    def merged_schema(cls, first: "SampleFile", metadata: dict) -> pa.Schema:
        return tagged_schema(first.schema.remove_metadata(), metadata, SAMPLE_LAYOUT)

    @classmethod
    def merged_table(cls, layer: int, parts: list[pa.Table], schema: pa.Schema, metadata: dict) -> pa.Table:
        """The bottom m of the shards' samples: m = the metadata's geometry.sample_size, the job's B · k points
        (geometry.batches × geometry.sample_size)."""
        merged = merge_sample_layer(parts, metadata["geometry"]["sample_size"])
        return merged.replace_schema_metadata(schema.metadata)


def read_sample_layer(path, layer: int) -> pa.Table:
    """Layer ``layer`` of the sample file ``path``, verified (:class:`SampleFile`)."""
    return SampleFile(path).layer(layer)


def points(table: pa.Table) -> np.ndarray:
    """The (k, d) float32 hidden states of a sample table."""
    return vector_rows(table.column("x"), "<f4")


def merge_sample_layer(tables: list[pa.Table], k: int) -> pa.Table:
    """The ``k`` rows with the smallest keys among the shards' samples of one layer, by key."""
    table = pa.concat_tables(tables)
    keys = table.column("key").to_numpy()
    return table.take(pa.array(bottom_k(keys, k)))
