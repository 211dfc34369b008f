"""A uniform sample of token positions that merges exactly across shards: the bottom k of a hash.

Every token position gets a 64-bit key, SplitMix64 of (seed, sentence id, window,
position), which depends on nothing but the position itself. A shard keeps the
k positions with the smallest keys; the k smallest over the union of the
shards' samples are then the k smallest of the whole corpus, whatever the
sharding. The same positions are kept in every layer.

With geometry.batches B, k is B times geometry.sample_size: batch b is the positions
ranked b·k′ … (b + 1)·k′ − 1 by key (k′ = geometry.sample_size), so batch 0 is the
one-batch sample and every batch is as exact and shard-invariant as the whole.

The sample file (layout :data:`SAMPLE_LAYOUT`) has one row group per layer (group i =
layer i), rows sorted by key, no nulls:

    layer        int16                     hidden-state index
    key          uint64                    the position's hash
    sentence_id  int64                     corpus sentence (results/corpus/sentences.parquet)
    window       int32                     piece of a split long sentence, else 0
    position     int32                     token index in the model's input, [bos] = 0
    token        string                    the token type's key
    x            fixed_size_binary(4·d)    the hidden state: d little-endian float32

Written and read like the sums (see :mod:`ctxvar.stats.sums`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ctxvar.io import ParquetInput, tagged_schema, vector_column, vector_rows
from ctxvar.stats.sums import LayerWriter, read_layer

SAMPLE_LAYOUT = "ctxvar sample 2"
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser (Steele et al. 2014), elementwise on uint64 (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64) + GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def sequence_windows(source_row: np.ndarray) -> np.ndarray:
    """For sequences listed with their source sentence row (pieces of one sentence adjacent, in order),
    the ordinal of each piece within its sentence: 0 for unsplit sentences."""
    source_row = np.asarray(source_row)
    starts = np.r_[True, source_row[1:] != source_row[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(len(source_row)), 0))
    return np.arange(len(source_row)) - first


def token_keys(sentence_id: np.ndarray, window: np.ndarray, offsets: np.ndarray, seed: int) -> np.ndarray:
    """(tokens,) uint64 keys for sequences delimited by ``offsets`` with per-sequence ``sentence_id`` and ``window``."""
    lengths = np.diff(offsets)
    position = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    sentence = splitmix64(
        splitmix64(np.uint64(seed) ^ np.asarray(sentence_id, dtype=np.uint64)) ^ np.asarray(window, dtype=np.uint64)
    )
    return splitmix64(np.repeat(sentence, lengths) ^ position.astype(np.uint64))


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


class SampleFile:
    """Read access to a sample file, one layer at a time."""

    def __init__(self, path):
        self.path = str(path)
        self._file = ParquetInput(self.path, SAMPLE_LAYOUT)
        self.metadata = self._file.metadata
        self.schema = self._file.schema
        self.size = self._file.size

    def layer(self, layer: int) -> pa.Table:
        return self._file.row_group(layer, what="sample, layer")


def read_sample_layer(path, layer: int) -> pa.Table:
    return read_layer(path, layer, "sample", SAMPLE_LAYOUT)


def points(table: pa.Table) -> np.ndarray:
    """The (k, d) float32 hidden states of a sample table."""
    return vector_rows(table.column("x"), "<f4")


def merge_sample_layer(tables: list[pa.Table], k: int) -> pa.Table:
    """The ``k`` rows with the smallest keys among the shards' samples of one layer, by key."""
    table = pa.concat_tables(tables)
    keys = table.column("key").to_numpy()
    return table.take(pa.array(bottom_k(keys, k)))


def merge_samples(samples: list[SampleFile], out_path, n_layers: int, k: int, metadata: dict) -> None:
    """Write the bottom-k sample of the union of the shards' samples (opened, in shard order), layer by layer."""
    schema = tagged_schema(samples[0].schema.remove_metadata(), metadata, SAMPLE_LAYOUT)
    with LayerWriter(out_path, schema) as writer:
        for layer in range(n_layers):
            merged = merge_sample_layer([sample.layer(layer) for sample in samples], k)
            writer.write(merged.replace_schema_metadata(schema.metadata))
