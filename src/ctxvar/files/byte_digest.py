"""The digests of a Parquet file's bytes that :mod:`ctxvar.files.parquet` stores in its footer, so that every byte of
the file is covered by a checksum ctxvar checks:

- each column chunk's bytes (its pages, their headers included), key :data:`CHUNK_DIGESTS_KEY`: the xxh3-128 of
  the xxh3-128 digests (16 bytes each, end to end) of its pieces, the chunk cut at every multiple of
  :data:`BLOCK` bytes of the file (:func:`pieces`). The writer hashes the file's whole blocks as they are
  written, on a thread of its own (:class:`BlockDigests`), and reads back only each chunk's partial blocks at its
  ends; a reader digests a chunk from the bytes Arrow read to decode it.
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
import mmap
import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

BYTE_DIGEST_KIND = "xxh3_128 chunks, sha256 footer 1"  # the definition above, version 1
CHUNK_DIGESTS_KEY = b"ctxvar.bytes.xxh3_128"  # JSON [[hex digest per leaf column] per row group]
FILE_DIGEST_KEY = b"ctxvar.bytes.sha256"
HEAD, TAIL = 4, 8  # "PAR1"; the footer's length and "PAR1"
_CHUNK_PLACEHOLDER = "0" * 32
_FILE_PLACEHOLDER = b"0" * 64
BLOCK = 256 << 10  # a chunk's digest is over its pieces between multiples of BLOCK bytes of the file
_POLL_S = 0.002  # how often BlockDigests looks for newly written blocks while the file grows
_IDLE_POLL_S = 0.05  # the longest it waits, doubling from _POLL_S, while the file does not grow
_MAP_BLOCKS = 256  # blocks BlockDigests maps at a time (64 MiB): hashed in the page cache, not copied out


def placeholders(row_groups: int, leaves: int) -> dict[bytes, str]:
    """The footer entries :func:`seal` fills in, of the length of what it writes there."""
    chunks = json.dumps([[_CHUNK_PLACEHOLDER] * leaves for _ in range(row_groups)])
    return {CHUNK_DIGESTS_KEY: chunks, FILE_DIGEST_KEY: _FILE_PLACEHOLDER.decode()}


def leaf_count(kind: pa.DataType) -> int:
    """The number of Parquet leaf columns (column chunks per row group) an Arrow field of type ``kind`` makes, for
    the types :func:`ctxvar.files.value_digest.value_digest` digests (no structs or maps)."""
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


def pieces(offset: int, length: int) -> list[tuple[int, int]]:
    """(offset, length) of the pieces of the bytes [offset, offset + length): cut at every multiple of BLOCK."""
    cuts = [offset, *range((offset // BLOCK + 1) * BLOCK, offset + length, BLOCK), offset + length]
    return [(start, end - start) for start, end in zip(cuts, cuts[1:])]


def _chunk_digest(piece_digests) -> str:
    """The chunk digest (hex): the xxh3-128 of its pieces' xxh3-128 digests, end to end."""
    return xxhash.xxh3_128_hexdigest(b"".join(piece_digests))


def data_digest(offset: int, data) -> str:
    """The chunk digest (hex) of ``data``, the bytes of the file from ``offset``."""
    view = memoryview(data)
    return _chunk_digest(
        xxhash.xxh3_128_digest(view[start - offset : start - offset + size])
        for start, size in pieces(offset, len(view))
    )


def range_digest(fd: int, offset: int, length: int, blocks: dict[int, bytes] | None = None) -> tuple[str, int]:
    """The chunk digest (hex) of ``length`` bytes of the open file ``fd`` from ``offset``, and the bytes read for
    it: whole blocks' digests come from ``blocks`` (block index → digest) where it has them."""
    blocks, parts, done = blocks or {}, [], 0
    for start, size in pieces(offset, length):
        if size == BLOCK and start // BLOCK in blocks:
            parts.append(blocks[start // BLOCK])
            continue
        data = os.pread(fd, size, start)
        parts.append(xxhash.xxh3_128_digest(data))
        done += len(data)
    return _chunk_digest(parts), done


class BlockDigests:
    """The xxh3-128 digests of a file's whole blocks (``BLOCK`` bytes at multiples of ``BLOCK``; block index →
    digest), taken on a thread of its own while the file is written: every few milliseconds (up to every 50 while
    the file does not grow) it hashes the whole blocks below the file's size, read back from the page cache, until
    :meth:`stop`. A file that only grows by appended writes (Parquet's) has every byte below its size final."""

    def __init__(self, path):
        self._fd = os.open(path, os.O_RDONLY)
        self.digests: dict[int, bytes] = {}
        self._next = 0  # the first block not hashed yet
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="ctxvar-blocks", daemon=True)
        self._thread.start()

    def add_until(self, end: int) -> None:
        """Hash every whole block below ``end`` not hashed yet."""
        while (self._next + 1) * BLOCK <= end:
            count = min(end // BLOCK - self._next, _MAP_BLOCKS)
            start = self._next * BLOCK
            base = start - start % mmap.ALLOCATIONGRANULARITY  # a mapping starts at a multiple of the granularity
            with mmap.mmap(self._fd, start + count * BLOCK - base, offset=base, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    for block in range(count):
                        at = start - base + block * BLOCK
                        self.digests[self._next + block] = xxhash.xxh3_128_digest(view[at : at + BLOCK])
                finally:
                    view.release()
            self._next += count

    def _follow(self) -> None:
        """Hash blocks as the file grows, looking less and less often while it does not, until stopped; on a file
        it cannot map or read it stops early, leaving the blocks not hashed to :func:`seal`."""
        size, wait = 0, _POLL_S  # the file's size at the last look, and the wait before the next
        while True:
            stopping = self._stopping.is_set()
            try:
                now = os.fstat(self._fd).st_size
                self.add_until(now)
            except (OSError, ValueError):  # a file system that cannot map the file: seal reads those blocks
                return
            if stopping:
                return
            wait = _POLL_S if now > size else min(2 * wait, _IDLE_POLL_S)
            size = now
            self._stopping.wait(wait)

    def stop(self) -> dict[int, bytes]:
        """Hash what is left of the file's whole blocks, stop, and give the digests (those hashed: a block the
        thread could not read is left out, and :func:`seal` reads it)."""
        self._stopping.set()
        self._thread.join()
        os.close(self._fd)
        return self.digests


def file_digest(head: bytes, footer: bytes, tail: bytes, value: bytes) -> str | None:
    """The SHA-256 (hex) of ``head``, ``footer`` with its :data:`FILE_DIGEST_KEY` entry's ``value`` as zeros
    (the last entry of that key and value: see :func:`_replace_last`), and ``tail``; None if ``footer`` has no
    such entry."""
    if len(value) != len(_FILE_PLACEHOLDER) or _thrift_entry(FILE_DIGEST_KEY, value) not in footer:
        return None
    zeroed = _replace_last(footer, _thrift_entry(FILE_DIGEST_KEY, value), _FILE_PLACEHOLDER, "")
    return hashlib.sha256(head + zeroed + tail).hexdigest()


def seal(path, metadata: pq.FileMetaData, blocks: dict[int, bytes] | None = None) -> None:
    """Fill in the placeholders of a Parquet file just closed with :func:`placeholders` in its footer: each column
    chunk's digest (from the whole ``blocks`` hashed as it was written, reading the rest), then the file digest.
    Raises RuntimeError if the chunks do not tile the file, OSError if the footer is written only in part."""
    with open(path, "r+b") as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        tail = os.pread(fd, TAIL, size - TAIL)
        footer_start = size - TAIL - int.from_bytes(tail[:4], "little")
        ranges = chunk_ranges(metadata)
        if not tiles(ranges, footer_start):
            raise RuntimeError(f"{path}: its column chunks do not cover its bytes before the footer")
        digests = json.dumps([[range_digest(fd, *chunk, blocks)[0] for chunk in group] for group in ranges])
        leaves = len(ranges[0]) if ranges else 0
        empty = placeholders(len(ranges), leaves)[CHUNK_DIGESTS_KEY]
        footer = os.pread(fd, size - TAIL - footer_start, footer_start)
        footer = _replace_last(footer, _thrift_entry(CHUNK_DIGESTS_KEY, empty.encode()), digests.encode(), path)
        head = os.pread(fd, HEAD, 0)
        digest = file_digest(head, footer, tail, _FILE_PLACEHOLDER)
        footer = _replace_last(footer, _thrift_entry(FILE_DIGEST_KEY, _FILE_PLACEHOLDER), digest.encode(), path)
        if os.pwrite(fd, footer, footer_start) != len(footer):
            raise OSError(f"{path}: wrote only part of its footer's digests (is the disk full or failing?)")


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


def _replace_last(footer: bytes, entry: bytes, value: bytes, path) -> bytes:
    """``footer`` with the value of its last key-value ``entry`` replaced by ``value``, of the same length. Thrift
    writes a ``FileMetaData``'s fields in order: the key-value list (field 5) after the row groups (field 4), whose
    column statistics may hold any bytes of the data, and before only Arrow's own ``created_by`` and column
    orders; so the last entry is the footer's own."""
    at = footer.rfind(entry)
    if at < 0:
        raise RuntimeError(f"{path}: the footer lacks its placeholder")
    return footer[:at] + entry[: len(entry) - len(value)] + value + footer[at + len(entry) :]
