"""Damage a file one byte at a time, for the tests that flip every byte of a file; seal an edited Parquet footer
anew; make Arrow read a file's column chunks in parts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from ctxvar.files import byte_digest
from ctxvar.files.parquet import _CountedFile


def each_byte_flipped(path: Path, bits: int = 0x10) -> Iterator[int]:
    """Each position of ``path`` in turn, with the byte there XOR ``bits`` while the caller reads the file, and
    restored before the next. The file is changed in place, one byte at a time, never truncated: ext4 writes a
    file that was truncated and rewritten out to disk on close, milliseconds for each of thousands of positions."""
    with open(path, "r+b", buffering=0) as handle:
        for position in range(path.stat().st_size):
            handle.seek(position)
            original = handle.read(1)
            handle.seek(position)
            handle.write(bytes([original[0] ^ bits]))
            try:
                yield position
            finally:
                handle.seek(position)
                handle.write(original)


def read_despite_a_flip(path: Path, read, error: type[Exception]) -> list[int]:
    """The positions of ``path`` at which ``read(path)`` gave no ``error`` with that byte flipped: the bytes no
    checksum covers."""
    unnoticed = []
    for position in each_byte_flipped(path):
        try:
            read(path)
        except error:
            continue
        unnoticed.append(position)
    return unnoticed


def reseal(path: Path) -> None:
    """Write a Parquet file's file digest (ctxvar.files.byte_digest) anew after its footer was edited, as someone
    who knows the format would: what is left to find the edit is the check behind it."""
    data = bytearray(path.read_bytes())
    footer_start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    old = pq.ParquetFile(path).metadata.metadata[byte_digest.FILE_DIGEST_KEY]
    footer = bytes(data[footer_start:-8])
    new = byte_digest.file_digest(bytes(data[:4]), footer, bytes(data[-8:]), old).encode()
    data[footer_start:-8] = footer.replace(old, new)
    path.write_bytes(bytes(data))


def reads_in_halves(monkeypatch) -> None:
    """Every read of 64 bytes or more through a ParquetInput's file comes in two halves, as Arrow reads a column
    chunk in parts: the reader can no longer digest a chunk from the read that brought it."""
    read = _CountedFile.read

    def in_halves(self, size=-1):
        if size < 64:
            return read(self, size)
        return read(self, size // 2) + read(self, size - size // 2)

    monkeypatch.setattr(_CountedFile, "read", in_halves)


def flip(path: Path, position: int) -> None:
    """Flip the lowest bit of the byte at ``position`` of ``path``, for good."""
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


def data_region(path: Path) -> tuple[int, int]:
    """[start, end) of a Parquet file's pages: after the 4 magic bytes, before the footer."""
    size = path.stat().st_size
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little")
    return 4, size - 8 - footer
