"""Two runs' results compared array by array: bit for bit, or within a relative tolerance.

    python -m bench compare_runs A/results/demo B/results/demo                 # every Parquet file, bit for bit
    python -m bench compare_runs cpu/results/demo gpu/results/demo --rtol 1e-6 --files '*/tokens.parquet'

For every Parquet file that both folders hold (``--files``: only those matching one of these globs, relative to
the folder), each column is read as the flat sequence of its values, whatever the layout: a vector column of
layout 2 (``fixed_size_binary`` of little-endian numbers: float32 in a sample file, float64 elsewhere) and of
layout 1 (``fixed_size_list``) both give their numbers in row order, and compare when their number types and
widths agree. Any other column compares only with a column of its own Arrow type, nulls where nulls are. Layout
1's moments file held one row per layer where layout 2 holds one per (layer, dimension): there, a column that is
one value per layer in the longer file is compared once per layer.

The difference of two float arrays is 0 when they are equal bit for bit, else max |a − b| / max |a| over their
finite values (a from the first folder; max |a| taken as 1 when it is 0), and infinite when their NaNs and
infinities are not in the same places with the same signs. Other arrays differ by 0 or infinitely. Prints one
line per differing array and a summary; exit status 1 when an array differs by more than ``--rtol`` (default
0: bit for bit), when a selected file is in one folder only or cannot be read, or when no file was compared.
Page checksums are verified as files are read.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ctxvar.errors import first_line
from ctxvar.files.parquet import LAYOUT_KEY, vector_rows
from ctxvar.stats.sample_file import SAMPLE_LAYOUT
from ctxvar.stats.sums import MOMENTS_LAYOUT

from harness import Options

OPTIONS = Options()  # none of the options the benchmarks share: two folders to compare

VECTOR_DTYPES = {SAMPLE_LAYOUT: "<f4"}  # the numbers in a layout's fixed_size_binary vectors; "<f8" for the others
MOMENTS_COLUMNS = {"layer", "n", "sum", "sum_outer"}  # layout 1's and layout 2's moments files


class Column:
    """A column as compared: ``kind`` (its type, vectors as their number type and width), values in row order
    (vectors' and lists' numbers row after row), its null mask and its rows' lengths (lists of any length, such
    as a shard's token ids; None for other columns)."""

    def __init__(self, column: pa.ChunkedArray, vector_dtype: str):
        column = column.combine_chunks()
        self.nulls = column.is_null().to_numpy(zero_copy_only=False)
        self.lengths = None
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            self.values = column.flatten().to_numpy(zero_copy_only=False)
            self.lengths = column.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
            self.kind = f"list of {self.values.dtype.str}"
        elif pa.types.is_fixed_size_list(column.type):
            self.values = column.flatten().to_numpy(zero_copy_only=False)
            self.kind = f"vector of {self.values.dtype.str}[{column.type.list_size}]"
        elif pa.types.is_fixed_size_binary(column.type):
            width, itemsize = column.type.byte_width, np.dtype(vector_dtype).itemsize
            if width % itemsize:
                raise ValueError(f"a fixed_size_binary({width}) column holds no whole {vector_dtype} numbers")
            self.values = vector_rows(column, vector_dtype).ravel()
            self.kind = f"vector of {vector_dtype}[{width // itemsize}]"
        else:
            self.values, self.kind = column.to_numpy(zero_copy_only=False), str(column.type)


def read_columns(path: Path) -> tuple[dict[str, Column], int, str]:
    """The file's columns, its rows and its layout name ("" for none)."""
    table = pq.ParquetFile(path, page_checksum_verification=True).read()
    layout = (table.schema.metadata or {}).get(LAYOUT_KEY, b"").decode()
    vector_dtype = VECTOR_DTYPES.get(layout, "<f8")
    return {name: Column(table.column(name), vector_dtype) for name in table.column_names}, table.num_rows, layout


def difference(a: np.ndarray, b: np.ndarray) -> float:
    """See the module's docstring."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return np.inf
    if a.dtype.kind != "f":
        return 0.0 if np.array_equal(a, b) else np.inf
    if np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")):
        return 0.0
    finite = np.isfinite(a)
    if not np.array_equal(finite, np.isfinite(b)) or not np.array_equal(a[~finite], b[~finite], equal_nan=True):
        return np.inf
    scale = np.max(np.abs(a[finite]), initial=0.0) or 1.0
    return max(float(np.max(np.abs(a[finite] - b[finite]), initial=0.0) / scale), np.finfo(np.float64).tiny)


def once_per_layer(values: np.ndarray, layers: np.ndarray) -> np.ndarray | None:
    """The value of each layer (rows sorted by layer), or None when a layer's rows hold more than one."""
    first = np.r_[True, layers[1:] != layers[:-1]]
    starts = np.repeat(values[first], np.diff(np.r_[np.flatnonzero(first), len(values)]))
    return values[first] if np.array_equal(starts, values) else None


def compare_file(first: Path, second: Path) -> dict[str, float]:
    """Each column's difference; a column of one file only, of another kind or with other nulls differs
    infinitely."""
    a, rows_a, layout_a = read_columns(first)
    b, rows_b, layout_b = read_columns(second)
    moments = set(a) == set(b) == MOMENTS_COLUMNS and MOMENTS_LAYOUT in (layout_a, layout_b)
    differences = {}
    for name in sorted(set(a) | set(b)):
        differences[name] = np.inf  # unless compared below
        if name not in a or name not in b:
            continue
        x, y = a[name].values, b[name].values
        if rows_a != rows_b and moments:  # floats: the same numbers in other rows; integers: one per layer
            if x.dtype.kind in "iu":
                x = once_per_layer(x, a["layer"].values) if rows_a > rows_b else x
                y = once_per_layer(y, b["layer"].values) if rows_b > rows_a else y
                if x is None or y is None:
                    continue
        elif rows_a != rows_b or a[name].kind != b[name].kind or not np.array_equal(a[name].nulls, b[name].nulls):
            continue
        elif not np.array_equal(a[name].lengths, b[name].lengths):  # lists of other lengths (None == None: others)
            continue
        differences[name] = difference(x, y)
    return differences


def parquet_files(folder: Path, patterns: list[str] | None) -> set[Path]:
    files = {path.relative_to(folder) for path in folder.rglob("*.parquet") if path.is_file()}
    if patterns:
        files = {path for path in files if any(fnmatch.fnmatch(path.as_posix(), pattern) for pattern in patterns)}
    return files


def main(argv=None) -> int:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--rtol", type=float, default=0.0, help="largest difference allowed (default 0: bitwise)")
    parser.add_argument("--files", nargs="+", help="globs of the files to compare, relative to each folder")
    args = parser.parse_args(argv)
    for folder in (args.first, args.second):
        if not folder.is_dir():
            print(f"{folder}: no such folder")
            return 1
    first, second = parquet_files(args.first, args.files), parquet_files(args.second, args.files)
    failed = not first & second
    for path in sorted(first ^ second):
        print(f"only in {args.first if path in first else args.second}: {path}")
        failed = True
    arrays = equal = 0
    for path in sorted(first & second):
        try:
            differences = compare_file(args.first / path, args.second / path)
        except (OSError, ValueError, pa.ArrowException) as error:
            print(f"{path}: cannot be compared ({first_line(error)})")
            failed = True
            continue
        for name, found in differences.items():
            arrays += 1
            equal += found == 0
            over = not found <= args.rtol
            failed |= over
            if found:
                print(f"{path} {name}: differs by {found:.3g}{' (over --rtol)' if over else ''}")
    print(f"{len(first & second)} files, {arrays} arrays: {equal} bit for bit equal; {'FAILED' if failed else 'OK'}")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
