"""Damage a file one byte at a time, for the tests that flip every byte of a file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


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
