"""The xxh3-128 digest of an Arrow column's values (:func:`value_digest`), which :mod:`ctxvar.files.parquet` stores in
every Parquet file's footer and checks on every read: the same whatever the column's chunks, slices or Parquet
encoding."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash

VALUE_DIGEST_KIND = "xxh3_128 1"  # value_digest's definition, version 1


def value_digest(column: pa.Array | pa.ChunkedArray) -> str:
    """The xxh3-128 digest (hex) of a column's values, the same whatever its chunks, slices or Parquet encoding:

        xxh3_128(xxh3_128(V₀) ‖ xxh3_128(L₀) ‖ xxh3_128(P₀) ‖ xxh3_128(V₁) ‖ …)

    over the column's non-null values in row order. V₀: their bytes (a fixed-width type: each value's bytes as
    Arrow holds them, little-endian; a boolean: one byte, 0 or 1; a string or binary: the values' bytes end to
    end); L₀: each string, binary or variable-size list value's length as int64; P₀: the row index of each null
    as int64. A list's items are a column of their own at the next nesting depth (V₁, L₁, P₁, …). A dictionary
    column is digested as its decoded values. A column in no chunks is digested as one empty chunk, as Parquet
    reads it back."""
    digest = _ValueDigest()
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks or [pa.nulls(0, column.type)]:
        digest.add(chunk)
    return digest.hexdigest()


_OFFSET_TYPES = {pa.string(): "<i4", pa.binary(): "<i4", pa.large_string(): "<i8", pa.large_binary(): "<i8"}


class _ValueDigest:
    """The running hashes V, L, P of :func:`value_digest` at each nesting depth, fed chunk by chunk."""

    def __init__(self):
        self.levels: list[tuple] = []  # per depth: (V, L, P) hashes
        self.rows: list[int] = []  # per depth: values seen so far

    def hexdigest(self) -> str:
        return xxhash.xxh3_128(b"".join(part.digest() for level in self.levels for part in level)).hexdigest()

    def add(self, chunk: pa.Array, depth: int = 0) -> None:
        if depth == len(self.levels):
            self.levels.append((xxhash.xxh3_128(), xxhash.xxh3_128(), xxhash.xxh3_128()))
            self.rows.append(0)
        if pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_decode()
        start, self.rows[depth] = self.rows[depth], self.rows[depth] + len(chunk)
        if chunk.null_count:
            rows = start + np.flatnonzero(chunk.is_null().to_numpy(zero_copy_only=False))
            self.levels[depth][2].update(rows.astype("<i8"))
            chunk = chunk.drop_null()
        if len(chunk):
            self._add_values(chunk, depth)

    def _add_values(self, chunk: pa.Array, depth: int) -> None:
        """A chunk without nulls."""
        kind, (values, lengths, _) = chunk.type, self.levels[depth]
        if pa.types.is_boolean(kind):
            values.update(chunk.to_numpy(zero_copy_only=False).view(np.uint8))
        elif kind in _OFFSET_TYPES:
            offset_type = np.dtype(_OFFSET_TYPES[kind])
            _, offset_buffer, data = chunk.buffers()
            offsets = np.frombuffer(offset_buffer, offset_type, len(chunk) + 1, chunk.offset * offset_type.itemsize)
            lengths.update(np.diff(offsets).astype("<i8"))
            if data is not None and offsets[-1] > offsets[0]:
                values.update(memoryview(data)[offsets[0] : offsets[-1]])
        elif _fixed_width(kind):
            width = kind.byte_width
            values.update(memoryview(chunk.buffers()[1])[chunk.offset * width : (chunk.offset + len(chunk)) * width])
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
            if not pa.types.is_fixed_size_list(kind):
                lengths.update(chunk.value_lengths().to_numpy().astype("<i8"))
            self.add(chunk.flatten(), depth + 1)
        elif not pa.types.is_null(kind):
            raise TypeError(f"no value digest for a column of type {kind}")


def _fixed_width(kind: pa.DataType) -> bool:
    try:
        return kind.bit_width % 8 == 0 and kind.num_buffers == 2
    except ValueError:
        return False
