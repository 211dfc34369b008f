"""Unit tier: ctxvar.parquet_files and ctxvar.byte_digest under a hostile machine: a writer that fails to open
leaves no thread or descriptor behind, a file system that cannot map the file being written still gives a whole,
checked file without a traceback, and a process forked after a write can write Parquet files itself."""

import os
import signal
import threading

import numpy as np
import pyarrow as pa
import pytest

from ctxvar import byte_digest
from ctxvar.parquet_files import ParquetOutput, read_table, tagged_schema, write_table


def table(rows: int = 300_000) -> pa.Table:
    return pa.table({"x": np.arange(rows, dtype="f8"), "token": [f"t{i % 97}" for i in range(rows)]})


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def block_threads() -> int:
    return sum(thread.name == "ctxvar-blocks" and thread.is_alive() for thread in threading.enumerate())


@pytest.mark.parametrize("options", [{"compression": "no such codec"}, {"version": "9.9"}])
def test_a_writer_that_cannot_open_leaves_no_thread_and_no_descriptor(tmp_path, options):
    source = table(10)
    threads, descriptors = block_threads(), open_descriptors()
    for _ in range(3):
        with pytest.raises((ValueError, pa.ArrowException)):
            ParquetOutput(tmp_path / "file.parquet", tagged_schema(source.schema), **options)
    assert (block_threads(), open_descriptors()) == (threads, descriptors)


def test_a_file_that_cannot_be_mapped_while_written_is_still_whole_and_says_nothing(tmp_path, monkeypatch, capfd):
    def unmappable(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(byte_digest.mmap, "mmap", unmappable)
    source = table()
    write_table(source, tmp_path / "file.parquet")
    assert read_table(tmp_path / "file.parquet").equals(source)
    assert "Traceback" not in capfd.readouterr().err


def test_a_process_forked_after_a_write_writes_parquet_files(tmp_path):
    source = table(1000)
    write_table(source, tmp_path / "before.parquet")  # the value digests' thread is running
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's own exit status is the result
        signal.alarm(30)
        try:
            write_table(source, tmp_path / "child.parquet")
            os._exit(0 if read_table(tmp_path / "child.parquet").equals(source) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child's write did not finish"
