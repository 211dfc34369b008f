"""Two runs' results compared array by array: bit for bit, or within a relative tolerance.

    python bench/compare_runs.py A/results/demo B/results/demo                 # every Parquet file, bit for bit
    python bench/compare_runs.py cpu/results/demo gpu/results/demo --rtol 1e-6 --files '*/tokens.parquet'

For every Parquet file that both folders hold (``--files``: only those matching one of these globs, relative to
the folder), each column is read as the flat sequence of its values, whatever the layout: a vector column of
layout 2 (``fixed_size_binary`` of little-endian numbers: float32 in a sample file, float64 elsewhere) and of
layout 1 (``fixed_size_list``) both give their numbers in row order. Layout 1's moments file held one row per
layer where layout 2 holds one per (layer, dimension): when a file's row counts differ, its per-layer columns
are compared once per layer.

Prints one line per differing array and a summary; the difference of an array is max |a − b| / max |a| (a from
the first folder). Exit status 1 when an array differs by more than ``--rtol`` (default 0: bit for bit), when the
files' columns differ, or when a selected file is in one folder only. Page checksums are verified as files are
read.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ctxvar.extraction.position_sample import SAMPLE_LAYOUT
from ctxvar.io import LAYOUT_KEY

VECTOR_DTYPES = {SAMPLE_LAYOUT: "<f4"}  # the numbers in a layout's fixed_size_binary vectors; "<f8" for the others


def flat_values(column: pa.ChunkedArray, vector_dtype: str = "<f8") -> np.ndarray:
    """A column's values in row order; a vector column's numbers, row after row."""
    column = column.combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        return column.flatten().to_numpy(zero_copy_only=False)
    if pa.types.is_fixed_size_binary(column.type):
        width = column.type.byte_width
        values = np.frombuffer(column.buffers()[1], np.uint8, count=len(column) * width, offset=column.offset * width)
        return values.view(vector_dtype)
    return column.to_numpy(zero_copy_only=False)


def read_columns(path: Path) -> tuple[dict[str, np.ndarray], int]:
    table = pq.ParquetFile(path, page_checksum_verification=True).read()
    layout = (table.schema.metadata or {}).get(LAYOUT_KEY, b"").decode()
    vector_dtype = VECTOR_DTYPES.get(layout, "<f8")
    return {name: flat_values(table.column(name), vector_dtype) for name in table.column_names}, table.num_rows


def once_per_layer(values: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """The values on each layer's first row (rows sorted by layer)."""
    return values[np.r_[True, layers[1:] != layers[:-1]]]


def difference(a: np.ndarray, b: np.ndarray) -> float:
    """0 for equal arrays (NaN where NaN, bit for bit for floats); max |a − b| / max |a| for numbers; inf otherwise."""
    if a.shape != b.shape:
        return np.inf
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        if a.dtype == b.dtype and np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")):
            return 0.0
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            return np.inf
        finite = ~np.isnan(a)
        scale = np.max(np.abs(a[finite]), initial=0.0) or 1.0
        return float(np.max(np.abs(a[finite] - b[finite]), initial=0.0) / scale) or np.finfo(np.float64).tiny
    return 0.0 if np.array_equal(a, b) else np.inf


def compare_file(first: Path, second: Path) -> dict[str, float]:
    """Each column's difference (see :func:`difference`); columns of one file only are inf."""
    a, rows_a = read_columns(first)
    b, rows_b = read_columns(second)
    regrouped = rows_a != rows_b and "layer" in a and "layer" in b
    differences = {}
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            differences[name] = np.inf
            continue
        x, y = a[name], b[name]
        if regrouped and x.dtype.kind != "f":
            x = once_per_layer(x, a["layer"]) if rows_a > rows_b else x
            y = once_per_layer(y, b["layer"]) if rows_b > rows_a else y
        differences[name] = difference(x, y)
    return differences


def parquet_files(folder: Path, patterns: list[str] | None) -> set[Path]:
    files = {path.relative_to(folder) for path in folder.rglob("*.parquet")}
    if patterns:
        files = {path for path in files if any(fnmatch.fnmatch(path.as_posix(), pattern) for pattern in patterns)}
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--rtol", type=float, default=0.0, help="largest difference allowed (default 0: bitwise)")
    parser.add_argument("--files", nargs="+", help="globs of the files to compare, relative to each folder")
    args = parser.parse_args(argv)
    first, second = parquet_files(args.first, args.files), parquet_files(args.second, args.files)
    failed = False
    for path in sorted(first ^ second):
        print(f"only in {args.first if path in first else args.second}: {path}")
        failed = True
    arrays = equal = 0
    for path in sorted(first & second):
        for name, found in compare_file(args.first / path, args.second / path).items():
            arrays += 1
            equal += found == 0
            if found > args.rtol:
                failed = True
            if found:
                print(f"{path} {name}: differs by {found:.3g}{'' if found <= args.rtol else ' (over --rtol)'}")
    print(f"{len(first & second)} files, {arrays} arrays: {equal} bit for bit equal; {'FAILED' if failed else 'OK'}")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
