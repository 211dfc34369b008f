"""Checksummed Parquet files: writers that store every column's value digests in the footer, and readers that
verify every byte they read.

Every column chunk's values carry an xxh3-128 digest (:mod:`ctxvar.files.value_digest`: the
decoded values, whatever their pages, encodings or chunks), written by :class:`ParquetOutput`
into the footer's key-value metadata (:data:`VALUE_DIGESTS_KEY`) when the file is closed, and
checked for every column of every row group :class:`ParquetInput` reads. Every byte of the file
is covered as well (:mod:`ctxvar.files.byte_digest`): each column chunk's bytes, page headers included,
have an xxh3-128 digest, checked as Arrow reads them (from the same read, not a second one), and
the first 4 bytes, the whole footer and the last 8 a SHA-256, checked when the file is opened. A
changed byte anywhere reads as a mismatch, or as a file Arrow cannot decode. Parquet's own page
CRC-32 is not written: it does not cover page headers, and the digests cost less
(docs/performance.md). The footer also carries the SHA-256 of the file's ctxvar metadata, of its
column names and types, of its layout name, if any (:data:`LAYOUT_KEY`), and of the kinds of
digest it carries (:data:`VALUES_KEY`, :data:`BYTES_KEY`): a footer without its digests is
refused. Files whose columns have a fixed layout (sums, moments, samples) name it; a reader
refuses any other layout. Files written with value digests but before byte digests (no
:data:`BYTES_KEY`) are read with their value digests checked; files written before value digests
(a CRC-32 on every page and no :data:`VALUES_KEY`) with their page CRCs verified as they are read.

A file that fails a check raises :class:`~ctxvar.errors.IntegrityError`, one line naming the file and the remedy.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import io
import json
import os
import stat
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ctxvar.errors import IntegrityError, first_line
from ctxvar.files import byte_digest
from ctxvar.files.atomic import REMEDY, atomic_path
from ctxvar.files.value_digest import VALUE_DIGEST_KIND, value_digest

METADATA_KEY = b"ctxvar"
INTEGRITY_KEY = b"ctxvar.sha256"  # SHA-256 of METADATA_KEY's JSON, the columns' names and types, LAYOUT_KEY,
# VALUES_KEY, BYTES_KEY
LAYOUT_KEY = b"ctxvar.layout"  # the name and version of a file's column layout, e.g. "ctxvar sums 2"
VALUES_KEY = b"ctxvar.values"  # the kind of VALUE_DIGESTS_KEY the file carries: VALUE_DIGEST_KIND
VALUE_DIGESTS_KEY = b"ctxvar.values.xxh3_128"  # JSON [[hex digest per column] per row group], added on closing
BYTES_KEY = b"ctxvar.bytes"  # the kind of byte digests the file carries: byte_digest.BYTE_DIGEST_KIND

PARQUET_WRITE_OPTIONS = {"write_page_checksum": False}  # the value digests cover the pages, headers included
ROW_GROUP_ROWS = 1 << 20  # write_table's rows per row group (Arrow's default)
# Files of float vectors (sums, moments, samples): plain pages, no dictionary, no compression (snappy saved 11 %
# of a bert-base partial's bytes and halved the write speed), no min/max statistics (which cost more than
# writing the values), and 64 rows per write batch: the writer checks the page size only between batches, so its
# default of 1,024 rows built 6-32 MB pages of vectors in freshly grown buffers (writes were 10-25 % slower).
VECTOR_WRITE_OPTIONS = {
    "use_dictionary": False,
    "write_statistics": False,
    "compression": "none",
    "write_batch_size": 64,
}


def tagged_schema(schema: pa.Schema, metadata: dict | None = None, layout: str | None = None) -> pa.Schema:
    """``schema`` carrying ``metadata`` (JSON), the ``layout`` name if given, and the footer checksum that
    :class:`ParquetInput` verifies (:class:`ParquetOutput` adds the kind of value digest to both)."""
    text = json.dumps(metadata or {}, sort_keys=True)
    tags = {METADATA_KEY: text, INTEGRITY_KEY: _footer_digest(schema, text.encode(), layout)}
    return schema.with_metadata({**tags, **({LAYOUT_KEY: layout} if layout is not None else {})})


def _with_value_digests(schema: pa.Schema) -> pa.Schema:
    """A :func:`tagged_schema` that also says the file carries value and byte digests, its footer checksum covering
    that."""
    raw = schema.metadata or {}
    if METADATA_KEY not in raw:
        raise ValueError("a ctxvar Parquet file needs a schema from tagged_schema")
    layout = raw[LAYOUT_KEY].decode() if LAYOUT_KEY in raw else None
    kinds = {VALUES_KEY: VALUE_DIGEST_KIND, BYTES_KEY: byte_digest.BYTE_DIGEST_KIND}
    digest = _footer_digest(schema.remove_metadata(), raw[METADATA_KEY], layout, *kinds.values())
    return schema.with_metadata({**raw, **kinds, INTEGRITY_KEY: digest})


def _footer_digest(
    schema: pa.Schema,
    metadata_json: bytes,
    layout: str | None = None,
    values: str | None = None,
    byte_digests: str | None = None,
) -> str:
    """SHA-256 of the metadata JSON, the columns' names and types, the layout and the kinds of value and byte
    digest (the last three when given: without ``byte_digests``, the digest of files written before byte
    digests; without ``values`` either, of files written before value digests)."""
    columns = json.dumps([[field.name, _type_name(field.type)] for field in schema])
    named = b"" if layout is None else b"\0" + layout.encode()
    digested = b"" if values is None else b"\0values\0" + values.encode()
    digested += b"" if byte_digests is None else b"\0bytes\0" + byte_digests.encode()
    return hashlib.sha256(metadata_json + b"\0" + columns.encode() + named + digested).hexdigest()


def _type_name(kind: pa.DataType) -> str:
    """A type as text, without list items' field names (Parquet renames 'item' to 'element')."""
    if pa.types.is_fixed_size_list(kind):
        return f"fixed_size_list<{_type_name(kind.value_type)}>[{kind.list_size}]"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"list<{_type_name(kind.value_type)}>"
    return str(kind)


def vector_column(rows: np.ndarray, dtype: str = "<f8") -> pa.FixedSizeBinaryArray:
    """(N, w) numbers as a ``fixed_size_binary(w · itemsize)`` column: each row's values, little-endian, in one
    value. No copy for a C-contiguous array of ``dtype``."""
    rows = np.ascontiguousarray(rows, dtype=dtype)
    width = rows.shape[1] * rows.itemsize
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), rows.shape[0], [None, pa.py_buffer(rows)])


def vector_rows(column: pa.ChunkedArray | pa.Array, dtype: str = "<f8") -> np.ndarray:
    """The (N, w) read-only array of a column written by :func:`vector_column`, without a copy for one chunk."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    itemsize = np.dtype(dtype).itemsize
    width = column.type.byte_width // itemsize
    parts = [
        np.frombuffer(
            chunk.buffers()[1], dtype, count=len(chunk) * width, offset=chunk.offset * chunk.type.byte_width
        ).reshape(-1, width)
        for chunk in chunks
        if len(chunk)
    ]
    if not parts:
        return np.empty((0, width), dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _start_digest_thread() -> None:
    """A fresh executor for the value digests: a child forked from a process that used one inherits its idle
    state but not its thread, and would wait forever on its first digest."""
    global _DIGEST_THREAD
    _DIGEST_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxvar-digest")


_start_digest_thread()
os.register_at_fork(after_in_child=_start_digest_thread)


class ParquetOutput:
    """A Parquet file being written: each :meth:`write_table` is one row group, whose columns' :func:`value_digest`
    are stored in the footer (:data:`VALUE_DIGESTS_KEY`) on :meth:`close`, and then the digests of the file's bytes
    (:func:`ctxvar.files.byte_digest.seal`), its whole blocks hashed on another thread as they are written; no page CRC
    (:data:`PARQUET_WRITE_OPTIONS`). ``schema`` should come from :func:`tagged_schema`; ``options`` go to
    ``pyarrow.parquet.ParquetWriter``."""

    def __init__(self, path, schema: pa.Schema, **options):
        self.path = path
        self.schema = _with_value_digests(schema)
        if os.path.exists(path) and os.path.getsize(path):
            os.truncate(path, 0)
        # Appending to the empty file, not opening it with O_TRUNC: ext4 writes a file truncated on opening out to
        # disk when it is closed (its auto_da_alloc), and the close waited for the disk.
        self._sink = pa.OSFile(str(path), mode="a")
        try:
            self._blocks = byte_digest.BlockDigests(path)
        except BaseException:
            self._sink.close()
            raise
        try:
            self._writer = pq.ParquetWriter(self._sink, self.schema, **{**PARQUET_WRITE_OPTIONS, **options})
        except BaseException:  # e.g. an option Arrow refuses: no thread left hashing, no file left open
            self._sink.close()
            self._blocks.stop()
            raise
        self._digests: list[list[str]] = []
        self._rows: list[int] = []

    def write_table(self, table: pa.Table) -> None:
        """``table`` as the file's next row group; its value digests are computed on another thread while Arrow
        writes it (both release the GIL), and its whole blocks' digests on a third as they are written."""
        digests = _DIGEST_THREAD.submit(lambda: [value_digest(column) for column in table.columns])
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._digests.append(digests.result())
        self._rows.append(table.num_rows)

    def close(self) -> None:
        if self._writer.is_open:
            leaves = sum(byte_digest.leaf_count(field.type) for field in self.schema)
            self._writer.add_key_value_metadata(
                {VALUE_DIGESTS_KEY: json.dumps(self._digests), **byte_digest.placeholders(len(self._rows), leaves)}
            )
            blocks = self._finish()
            written = self._writer.writer.metadata
            rows = [written.row_group(i).num_rows for i in range(written.num_row_groups)]
            if rows != self._rows:
                raise RuntimeError(f"{self.path}: wrote row groups of {rows} rows for tables of {self._rows}")
            byte_digest.seal(self.path, written, blocks)

    def _finish(self) -> dict[int, bytes]:
        """Close the writer and the file, stop the block hashing and give its digests."""
        try:
            self._writer.close()
        finally:
            self._sink.close()
            blocks = self._blocks.stop()
        return blocks

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        elif self._writer.is_open:  # the file is abandoned: no digests, no check
            self._finish()
        return False


def parquet_writer(path, schema: pa.Schema, **options) -> ParquetOutput:
    """A :class:`ParquetOutput`: one row group per table written, value digests in the footer."""
    return ParquetOutput(path, schema, **options)


def write_table(table: pa.Table, path, metadata: dict | None = None, **options) -> None:
    """Write a Parquet file atomically, in row groups of :data:`ROW_GROUP_ROWS` rows with their value digests, and
    ``metadata`` stored as JSON in its schema."""
    schema = tagged_schema(table.schema.remove_metadata(), metadata)
    with atomic_path(path) as tmp, ParquetOutput(tmp, schema, **options) as writer:
        for start in range(0, max(1, table.num_rows), ROW_GROUP_ROWS):
            writer.write_table(table.slice(start, ROW_GROUP_ROWS))


class ReadCounter:
    """Bytes and file openings of the Parquet files this process has read through :class:`ParquetInput`:
    every byte Arrow asked the operating system for, the footer included."""

    def __init__(self):
        self.bytes = 0
        self.files = 0
        self._lock = threading.Lock()  # Arrow's reader threads read columns in parallel

    def add(self, nbytes: int, files: int = 0) -> None:
        with self._lock:
            self.bytes += nbytes
            self.files += files


PARQUET_READS = ReadCounter()
# Arrow reads up to 64 KiB of a Parquet file's end on opening, to find its footer, and ctxvar its first 4 bytes
FOOTER_READ_BYTES = (64 << 10) + byte_digest.HEAD


def _open_without_waiting(path, flags: int) -> int:
    """``os.open`` that returns at once for a FIFO (which :class:`_CountedFile` then refuses) instead of waiting
    for a writer; the file is made blocking again once found regular."""
    return os.open(path, flags | os.O_NONBLOCK)


class _CountedFile(io.FileIO):
    """A regular file (anything else raises OSError) whose reads add to :data:`PARQUET_READS`. A read of exactly
    one of the ``watched`` byte ranges (offset, length) records the xxh3-128 of what it read there; ``end`` keeps
    the offset and bytes of the last read that reached the file's end."""

    def __init__(self, path, mode: str = "r"):
        super().__init__(path, mode, opener=_open_without_waiting)
        status = os.fstat(self.fileno())
        if not stat.S_ISREG(status.st_mode):
            self.close()
            raise OSError(f"not a regular file: {path}")
        os.set_blocking(self.fileno(), True)
        self.size = status.st_size
        self.watched: dict[tuple[int, int], str | None] = {}
        self.end: tuple[int, bytes] | None = None

    def read(self, size: int = -1) -> bytes:
        offset = self.tell()
        data = super().read(size)
        self._seen(offset, data)
        return data

    def readinto(self, buffer) -> int:
        offset = self.tell()
        count = super().readinto(buffer) or 0
        self._seen(offset, memoryview(buffer)[:count])
        return count

    def _seen(self, offset: int, data) -> None:
        PARQUET_READS.add(len(data))
        if (offset, len(data)) in self.watched:
            self.watched[offset, len(data)] = byte_digest.data_digest(offset, data)
        if offset + len(data) == self.size:
            self.end = (offset, bytes(data))


class ParquetInput:
    """A Parquet file written by :func:`write_table` or :func:`parquet_writer`, verified as it is read.

    The footer checksum is checked on opening; the value digest of every column chunk
    as it is read (or, in a file written before value digests, each page's CRC); any
    failure is an :class:`IntegrityError` naming the file. With ``layout``, a file of
    any other layout (or of none: an older ctxvar's) is refused. No pre-buffering: it
    would keep each open file's last row group cached (memory O(shards) in a merge).
    Its reads are counted in :data:`PARQUET_READS`; ``size`` is the file's size.
    Columns are read on the calling thread: with Arrow's thread pool reading through a
    Python file, 3-10 % of processes aborted at exit ("terminate called without an
    active exception"): a job's exit status 134 after its work was done.
    """

    def __init__(self, path, layout: str | None = None):
        self.path = str(path)
        try:
            self._handle = _CountedFile(self.path, "r")
            self.size = self._handle.size
            PARQUET_READS.add(0, files=1)
            self._file = pq.ParquetFile(
                pa.PythonFile(self._handle, mode="r"), pre_buffer=False, page_checksum_verification=True
            )
        except (OSError, ValueError, pa.ArrowException) as error:  # a damaged footer can also raise UnicodeDecodeError
            raise IntegrityError(f"{self.path}: not a readable Parquet file ({first_line(error)}); {REMEDY}") from error
        self.schema = self._file.schema_arrow
        raw = self.schema.metadata or {}
        if INTEGRITY_KEY not in raw or METADATA_KEY not in raw:
            raise IntegrityError(
                f"{self.path}: carries no ctxvar checksum (written by another program or an older "
                f"ctxvar, or its footer is damaged); {REMEDY}"
            )
        self.layout = raw[LAYOUT_KEY].decode(errors="replace") if LAYOUT_KEY in raw else None
        values = raw[VALUES_KEY].decode(errors="replace") if VALUES_KEY in raw else None
        byte_digests = raw[BYTES_KEY].decode(errors="replace") if BYTES_KEY in raw else None
        if raw[INTEGRITY_KEY].decode(errors="replace") != _footer_digest(
            self.schema.remove_metadata(), raw[METADATA_KEY], self.layout, values, byte_digests
        ):
            raise self._corrupt("footer checksum mismatch")
        if layout is not None and self.layout != layout:
            found = (
                f"holds layout {self.layout!r}, not {layout!r} (another kind of file, or another ctxvar version)"
                if self.layout
                else f"is in an older layout of ctxvar (before {layout!r}), which this version does not read"
            )
            raise IntegrityError(f"{self.path}: {found}; {REMEDY}")
        self.metadata = json.loads(raw[METADATA_KEY])
        self.num_row_groups = self._file.num_row_groups
        self.num_rows = self._file.metadata.num_rows
        self._digests = None if values is None else self._value_digests(values)
        self._leaves = _leaf_indices(self.schema)
        self._chunks = None if byte_digests is None else self._chunk_digests(byte_digests)

    def _chunk_digests(self, kind: str) -> tuple[list[list[tuple[int, int]]], list[list[str]]]:
        """The column chunks' byte ranges and digests, per row group, per leaf column, once the file digest (first
        4 bytes, footer, last 8) is checked and the chunks are found to tile the rest."""
        self._check_kind("byte", kind, byte_digest.BYTE_DIGEST_KIND)
        entries = self._file.metadata.metadata or {}
        if byte_digest.FILE_DIGEST_KEY not in entries or byte_digest.CHUNK_DIGESTS_KEY not in entries:
            raise self._corrupt("its footer lacks its byte digests")
        footer_start, head, footer, tail = self._outside_chunks()
        if entries[byte_digest.FILE_DIGEST_KEY].decode(errors="replace") != byte_digest.file_digest(
            head, footer, tail, entries[byte_digest.FILE_DIGEST_KEY]
        ):
            raise self._corrupt("footer checksum mismatch")
        # Read only from a footer its digest vouches for: Arrow aborts the process on some damaged column metadata
        ranges = byte_digest.chunk_ranges(self._file.metadata)
        try:
            digests = json.loads(entries[byte_digest.CHUNK_DIGESTS_KEY])
        except ValueError:
            digests = None
        leaves = sum(len(indices) for indices in self._leaves.values())
        if _table_shape(digests) != [leaves] * self.num_row_groups or _table_shape(ranges) != _table_shape(digests):
            raise self._corrupt("its footer's byte digests are damaged")
        if not byte_digest.tiles(ranges, footer_start):
            raise self._corrupt("its column chunks do not cover its bytes before the footer")
        return ranges, digests

    def _outside_chunks(self) -> tuple[int, bytes, bytes, bytes]:
        """Where the footer starts, and the file's first 4 bytes, its footer and its last 8, taken from what Arrow
        read on opening where it read them."""
        start, data = self._handle.end or (self.size, b"")
        if len(data) < byte_digest.TAIL:
            start, data = self.size - byte_digest.TAIL, self._pread(byte_digest.TAIL, self.size - byte_digest.TAIL)
        footer_start = self.size - byte_digest.TAIL - int.from_bytes(data[-byte_digest.TAIL : -4], "little")
        if footer_start < byte_digest.HEAD:
            raise self._corrupt("footer checksum mismatch")
        if footer_start < start:  # Arrow read the footer in two parts
            start, data = footer_start, self._pread(self.size - footer_start, footer_start)
        head = data[: byte_digest.HEAD] if start == 0 else self._pread(byte_digest.HEAD, 0)
        return footer_start, head, data[footer_start - start : -byte_digest.TAIL], data[-byte_digest.TAIL :]

    def _pread(self, length: int, offset: int) -> bytes:
        data = self._checked(functools.partial(os.pread, self._handle.fileno(), length, offset), "")
        PARQUET_READS.add(len(data))
        return data

    def _value_digests(self, kind: str) -> list[list[str]]:
        """The footer's value digests: one per column (in schema order) per row group."""
        self._check_kind("value", kind, VALUE_DIGEST_KIND)
        text = (self._file.metadata.metadata or {}).get(VALUE_DIGESTS_KEY)
        if text is None:
            raise self._corrupt("its footer lacks its value digests")
        try:
            digests = json.loads(text)
        except ValueError:
            digests = None
        if _table_shape(digests) != [len(self.schema)] * self.num_row_groups:
            raise self._corrupt("its footer's value digests are damaged")
        return digests

    def read(self, columns: list[str] | None = None) -> pa.Table:
        read = lambda: self._file.read(columns=columns, use_threads=False)  # noqa: E731
        return self._read(read, range(self.num_row_groups), columns, "", name_groups=True)

    def row_group(self, index: int, columns: list[str] | None = None, what: str = "row group") -> pa.Table:
        read = lambda: self._file.read_row_group(index, columns=columns, use_threads=False)  # noqa: E731
        return self._read(read, [index], columns, f" ({what} {index})")

    def row_group_rows(self, index: int) -> int:
        return self._file.metadata.row_group(index).num_rows

    def _read(self, read, groups, columns: list[str] | None, where: str, name_groups: bool = False) -> pa.Table:
        """``read()`` (of ``columns`` in row groups ``groups``), then each column of each row group checked against
        its value digest, and the bytes of each column chunk read against theirs: digested as Arrow read them, or
        read again where Arrow read a chunk in parts. ``where`` and ``name_groups`` place a failure in its line."""
        chunks = self._chunks_of(groups, columns)
        self._prefetch(max(groups, default=-1) + 1, columns)
        self._handle.watched = {chunk: None for chunk, *_ in chunks}
        try:
            table = self._checked(read, where)
        finally:
            seen, self._handle.watched = self._handle.watched, {}
        start = 0
        for group in groups:
            rows = self.row_group_rows(group)
            self._verify(table.slice(start, rows), group, where, f"row group {group}, " if name_groups else "")
            start += rows
        for chunk, group, name, expected in chunks:
            digest = seen.get(chunk)
            if digest is None:
                digest, count = self._checked(
                    functools.partial(byte_digest.range_digest, self._handle.fileno(), *chunk), where
                )
                PARQUET_READS.add(count)
            if digest != expected:
                raise self._mismatch(where, f"row group {group}, " if name_groups else "", name, "its bytes' digest")
        return table

    def _prefetch(self, group: int, columns: list[str] | None) -> None:
        """Ask the operating system to read ``columns`` of row group ``group`` ahead while this one is decoded and
        checked: readers go through a file's row groups (layers) in order, and reading a file that is not in the
        page cache then overlaps the disk with the decoding. Only in a file with byte digests, whose chunk ranges
        come from a footer its digest vouches for."""
        if self._chunks is None or not (0 <= group < self.num_row_groups and hasattr(os, "posix_fadvise")):
            return
        ranges, _ = self._chunks
        for _, leaf in self._leaves_of(columns):
            offset, length = ranges[group][leaf]
            if length > 0:
                os.posix_fadvise(self._handle.fileno(), offset, length, os.POSIX_FADV_WILLNEED)

    def _chunks_of(self, groups, columns: list[str] | None) -> list[tuple[tuple[int, int], int, str, str]]:
        """(byte range, row group, column name, digest) of each column chunk of ``columns`` in ``groups``; none in
        a file written before byte digests."""
        if self._chunks is None:
            return []
        ranges, digests = self._chunks
        return [
            (ranges[group][leaf], group, name, digests[group][leaf])
            for group in groups
            for name, leaf in self._leaves_of(columns)
        ]

    def _leaves_of(self, columns: list[str] | None) -> list[tuple[str, int]]:
        """(column name, leaf column index) of each Parquet leaf of ``columns`` (all columns for None)."""
        names = self.schema.names if columns is None else columns
        return [(name, leaf) for name in names for leaf in self._leaves.get(name, ())]

    def _checked(self, read, where: str):
        """``read()``; a failure to read (Arrow's, or the operating system's) is an IntegrityError."""
        try:
            return read()
        except (OSError, ValueError, pa.ArrowException) as error:
            raise IntegrityError(f"{self.path}{where}: cannot be read ({first_line(error)}); {REMEDY}") from error

    def _verify(self, table: pa.Table, index: int, where: str, which: str = "") -> None:
        """Each column of ``table`` (row group ``index``, read) against its digest in the footer; ``where`` and
        ``which`` place it in the error line."""
        if self._digests is None:
            return  # written before value digests: its pages' CRCs were checked as they were read
        for name, column in zip(table.column_names, table.columns):
            if value_digest(column) != self._digests[index][self.schema.get_field_index(name)]:
                raise self._mismatch(where, which, name, "its value digest")

    def _check_kind(self, what: str, kind: str, expected: str) -> None:
        """Refuse ``what`` digests of a kind other than this version's ``expected``."""
        if kind != expected:
            raise IntegrityError(
                f"{self.path}: carries {what} digests of kind {kind!r}, not {expected!r} (written by another ctxvar "
                f"version); {REMEDY}"
            )

    def _corrupt(self, problem: str) -> IntegrityError:
        """The error of a file found corrupt by ``problem``."""
        return IntegrityError(f"{self.path}: {problem} (the file is corrupt); {REMEDY}")

    def _mismatch(self, where: str, which: str, name: str, digest: str) -> IntegrityError:
        """The error of a column that does not match ``digest``, placed in the file by ``where`` and ``which``."""
        return IntegrityError(
            f"{self.path}{where}: cannot be read ({which}column {name!r} does not match {digest}: the file is "
            f"corrupt); {REMEDY}"
        )


def _leaf_indices(schema: pa.Schema) -> dict[str, range]:
    """Each field's Parquet leaf columns, by index."""
    indices, start = {}, 0
    for field in schema:
        count = byte_digest.leaf_count(field.type)
        indices[field.name], start = range(start, start + count), start + count
    return indices


def _table_shape(rows) -> list[int] | None:
    """The lengths of a list of lists (None for anything else)."""
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return None
    return [len(row) for row in rows]


def read_table(path, columns: list[str] | None = None) -> pa.Table:
    """The whole Parquet file, verified (see :class:`ParquetInput`)."""
    return ParquetInput(path).read(columns)


def read_metadata(path) -> dict:
    """The JSON metadata stored by :func:`write_table` or :func:`tagged_schema`, verified."""
    return ParquetInput(path).metadata
