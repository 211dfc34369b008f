"""The digests of a Parquet file's bytes that :mod:`ctxvar.parquet_files` stores in its footer, so that every byte of
the file is covered by a checksum ctxvar checks:

- each column chunk's bytes (its pages, their headers included): xxh3-128, key :data:`CHUNK_DIGESTS_KEY`;
- the rest, the file's first 4 bytes (``PAR1``), its whole footer (Parquet's Thrift ``FileMetaData``, with
  the value of :data:`FILE_DIGEST_KEY` as 64 zeros) and its last 8 (the footer's length and ``PAR1``):
  SHA-256, key :data:`FILE_DIGEST_KEY`.

The column chunks, in file order, must tile the bytes between the first 4 and the footer, so no byte lies
outside both (a file with a page index or a bloom filter is not of this kind). Both digests are known only once
the footer is written: the writer closes the file with placeholders of their exact length, then writes them in
place (:func:`seal`); the footer's length does not change."""

from __future__ import annotations

import hashlib
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

BYTE_DIGEST_KIND = "xxh3_128 chunks, sha256 footer 1"  # the definition above, version 1
CHUNK_DIGESTS_KEY = b"ctxvar.bytes.xxh3_128"  # JSON [[hex digest per leaf column] per row group]
FILE_DIGEST_KEY = b"ctxvar.bytes.sha256"
HEAD, TAIL = 4, 8  # "PAR1"; the footer's length and "PAR1"
_CHUNK_PLACEHOLDER = "0" * 32
_FILE_PLACEHOLDER = b"0" * 64
_BLOCK = 8 << 20  # bytes hashed at a time when a chunk is read for its digest alone


def placeholders(row_groups: int, leaves: int) -> dict[bytes, str]:
    """The footer entries :func:`seal` fills in, of the length of what it writes there."""
    chunks = json.dumps([[_CHUNK_PLACEHOLDER] * leaves for _ in range(row_groups)])
    return {CHUNK_DIGESTS_KEY: chunks, FILE_DIGEST_KEY: _FILE_PLACEHOLDER.decode()}


def leaf_count(kind: pa.DataType) -> int:
    """The number of Parquet leaf columns (column chunks per row group) an Arrow field of type ``kind`` makes, for
    the types :func:`ctxvar.value_digest.value_digest` digests (no structs or maps)."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return leaf_count(kind.value_type)
    return 1


def chunk_ranges(metadata: pq.FileMetaData) -> list[list[tuple[int, int]]]:
    """(offset, length) of each column chunk's bytes, per row group, per leaf column."""
    ranges = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        ranges.append([])
        for leaf in range(row_group.num_columns):
            chunk = row_group.column(leaf)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            ranges[-1].append((start, chunk.total_compressed_size))
    return ranges


def tiles(ranges: list[list[tuple[int, int]]], footer_start: int) -> bool:
    """Whether the column chunks, in file order, cover the bytes [HEAD, footer_start) once each, without gaps (the
    chunks of an empty row group hold no bytes: Arrow writes them at offset 0, length 0)."""
    end = HEAD
    for start, length in sorted(chunk for group in ranges for chunk in group if chunk != (0, 0)):
        if start != end or length <= 0:
            return False
        end = start + length
    return end == footer_start


def range_digest(handle, offset: int, length: int) -> tuple[str, int]:
    """The xxh3-128 (hex) of ``length`` bytes of an open file from ``offset``, read in blocks, and the bytes read."""
    digest, done = xxhash.xxh3_128(), 0
    while done < length:
        block = os.pread(handle.fileno(), min(_BLOCK, length - done), offset + done)
        if not block:
            break
        digest.update(block)
        done += len(block)
    return digest.hexdigest(), done


def bytes_digest(data) -> str:
    return xxhash.xxh3_128_hexdigest(data)


def file_digest(head: bytes, footer: bytes, tail: bytes, value: bytes) -> str | None:
    """The SHA-256 (hex) of ``head``, ``footer`` with its :data:`FILE_DIGEST_KEY` entry's ``value`` as zeros,
    and ``tail``; None if that entry is not in ``footer`` exactly once."""
    entry = _thrift_entry(FILE_DIGEST_KEY, value)
    if len(value) != len(_FILE_PLACEHOLDER) or footer.count(entry) != 1:
        return None
    zeroed = footer.replace(entry, _thrift_entry(FILE_DIGEST_KEY, _FILE_PLACEHOLDER))
    return hashlib.sha256(head + zeroed + tail).hexdigest()


def seal(path, metadata: pq.FileMetaData) -> None:
    """Fill in the placeholders of a Parquet file just closed with :func:`placeholders` in its footer: each column
    chunk's digest, then the file digest. Raises RuntimeError if the chunks do not tile the file."""
    with open(path, "r+b") as handle:
        size = os.fstat(handle.fileno()).st_size
        tail = os.pread(handle.fileno(), TAIL, size - TAIL)
        footer_start = size - TAIL - int.from_bytes(tail[:4], "little")
        ranges = chunk_ranges(metadata)
        if not tiles(ranges, footer_start):
            raise RuntimeError(f"{path}: its column chunks do not cover its bytes before the footer")
        digests = json.dumps([[range_digest(handle, *chunk)[0] for chunk in group] for group in ranges])
        leaves = len(ranges[0]) if ranges else 0
        empty = placeholders(len(ranges), leaves)[CHUNK_DIGESTS_KEY]
        footer = os.pread(handle.fileno(), size - TAIL - footer_start, footer_start)
        footer = _replace_once(footer, _thrift_entry(CHUNK_DIGESTS_KEY, empty.encode()), digests.encode(), path)
        head = os.pread(handle.fileno(), HEAD, 0)
        digest = file_digest(head, footer, tail, _FILE_PLACEHOLDER)
        footer = _replace_once(footer, _thrift_entry(FILE_DIGEST_KEY, _FILE_PLACEHOLDER), digest.encode(), path)
        os.pwrite(handle.fileno(), footer, footer_start)


def _thrift_entry(key: bytes, value: bytes) -> bytes:
    """A key-value pair of the footer as Thrift's compact protocol writes it: field 1 (a binary: header 0x18),
    its varint length, the key; field 2 the same for the value."""
    return b"\x18" + _varint(len(key)) + key + b"\x18" + _varint(len(value)) + value


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _replace_once(footer: bytes, entry: bytes, value: bytes, path) -> bytes:
    """``footer`` with the value of key-value ``entry`` replaced by ``value``, of the same length."""
    if footer.count(entry) != 1:
        raise RuntimeError(f"{path}: the footer holds its placeholder {footer.count(entry)} times, not once")
    key_part = len(entry) - len(value)
    return footer.replace(entry, entry[:key_part] + value)
