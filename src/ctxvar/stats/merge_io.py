"""The bytes a model's merges read and write: the I/O record ``run.json`` reports, and the free space a merge needs.

A merge (:func:`ctxvar.stats.merge.merge_job`) reads each input file once (its
footer, then every row group) and writes each output once. It measures the bytes
it reads and adds them, with the sizes of its inputs, to the record of the merges
before it (:func:`io_record`); the model's last merge puts the total in
``run.json`` (:func:`run_io`). Before it writes, it checks that its outputs fit
in the free space (:func:`merge_output_bytes`).
"""

from __future__ import annotations

import os

from ctxvar.files.parquet import ParquetInput, read_metadata
from ctxvar.stats import declarations
from ctxvar.stats.declarations import token_row_bytes

NO_IO = {
    "partial_files": 0,
    "partial_bytes": 0,
    "running_merge_files": 0,
    "running_merge_bytes": 0,
    "files_opened": 0,
    "bytes_read": 0,
}


def io_record(inputs, bytes_read: int, files_opened: int, before: dict | None = None) -> dict:
    """The I/O of a model's merges so far: ``before`` (the record of the merge whose output is among ``inputs``,
    if any) plus this merge's. Each input was written once, by an extraction job (a partial) or by the merge
    before (a running merge, whose metadata lists ``shards``): its size is counted as written. ``bytes_read`` and
    ``files_opened`` are what this merge read, measured (:data:`ctxvar.files.parquet.PARQUET_READS`)."""
    record = {**NO_IO, **(before or {})}
    for path in map(str, inputs):
        kind = "running_merge" if "shards" in read_metadata(path) else "partial"
        record[f"{kind}_files"] += 1
        record[f"{kind}_bytes"] += os.path.getsize(path)
    record["bytes_read"] += bytes_read
    record["files_opened"] += files_opened
    return record


def run_io(record: dict, outputs) -> dict:
    """The model's I/O for ``run.json``: ``record`` (see :func:`io_record`), plus the files of its last merge
    (``outputs``), and ``bytes_written`` = partials + running merges + merged files."""
    merged = [os.path.getsize(path) for path in map(str, outputs)]
    total = record["partial_bytes"] + record["running_merge_bytes"] + sum(merged)
    return {**record, "merged_files": len(merged), "merged_bytes": sum(merged), "bytes_written": total}


MERGED_KINDS = {"stats": "partials", **{kind: kind for kind in ("moments", "sample", "words", "sentences")}}  # ← inputs


def merge_output_bytes(inputs: dict, outputs: dict) -> int:
    """Upper bound of the bytes :func:`merge_job` writes, from its inputs (the files are not compressed): each
    merged file is no larger than the files it adds (its rows are the union of theirs, or as many as one of them),
    and ``tokens.parquet`` holds at most a row per row of the sums added, of at most
    :func:`ctxvar.stats.declarations.token_row_bytes` of every declared sum (as the start-up estimate counts it)."""
    sizes = {kind: sum(map(os.path.getsize, inputs[name])) for kind, name in MERGED_KINDS.items() if kind in outputs}
    total = sum(sizes.values())
    if outputs.get("tokens") is not None:
        total += token_row_bytes(declarations.TYPE_SUMS) * sum(
            ParquetInput(path).num_rows for path in inputs["partials"]
        )  # footers, verified
    return total
