"""The bytes a model's merges read and write (ctxvar.stats.merge_io): each input counted as written once, as a
partial or, with ``shards`` in its metadata, a running merge; what each merge read added to the record of the
merges before it; and run.json's totals with the last merge's files."""

from __future__ import annotations

import os

import pyarrow as pa

from ctxvar.files.parquet import write_table
from ctxvar.stats.merge_io import NO_IO, io_record, run_io


def parquet(path, rows: int, **metadata) -> str:
    write_table(pa.table({"x": list(range(rows))}), path, metadata={"n_layers": 1, **metadata})
    return str(path)


def test_inputs_are_counted_as_partials_or_running_merges_and_reads_add_up(tmp_path):
    partials = [parquet(tmp_path / "2.parquet", 10, shard=2), parquet(tmp_path / "3.parquet", 500, shard=3)]
    through = parquet(tmp_path / "through-1.parquet", 40, shards=[0, 1])
    before = {**NO_IO, "partial_files": 2, "partial_bytes": 7000, "bytes_read": 6000, "files_opened": 2}
    record = io_record([through, *partials], bytes_read=1234, files_opened=3, before=before)
    sizes = [os.path.getsize(path) for path in partials]
    assert record == {
        "partial_files": 4,
        "partial_bytes": 7000 + sum(sizes),
        "running_merge_files": 1,
        "running_merge_bytes": os.path.getsize(through),
        "files_opened": 5,
        "bytes_read": 7234,
    }
    assert io_record(partials, 0, 0) == {**NO_IO, "partial_files": 2, "partial_bytes": sum(sizes)}


def test_run_json_adds_the_last_merges_files_to_what_was_written(tmp_path):
    merged = [parquet(tmp_path / "stats.parquet", 30), parquet(tmp_path / "tokens.parquet", 60)]
    record = {**NO_IO, "partial_bytes": 1000, "running_merge_bytes": 300, "bytes_read": 2000}
    io = run_io(record, merged)
    merged_bytes = sum(os.path.getsize(path) for path in merged)
    assert (io["merged_files"], io["merged_bytes"]) == (2, merged_bytes)
    assert io["bytes_written"] == 1300 + merged_bytes and io["bytes_read"] == 2000
