"""Unit tier: ctxvar.files.parquet and ctxvar.files.byte_digest under a hostile machine and hostile data: a writer that
fails to open leaves no thread or descriptor behind; a file system that cannot map the file being written, a short
write of the footer, a disk error in ctxvar's own reads, a FIFO in a file's place, a process forked after a write,
an idle open writer, blocks smaller than a page, and a corpus word that spells a footer entry each give a whole
checked file or one line, never a hang or a traceback. A Parquet file of no rows reads back: a table of no rows can
hold its columns in no chunks at all (as ``Table.filter`` leaves them), which Parquet reads back as one empty
chunk, and both have one value digest. A flipped byte anywhere in a file, a truncated, empty or foreign file, and a
sums, moments or sample file in an older ctxvar's layout are each refused in one line that says to re-run."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxvar.errors import IntegrityError
from ctxvar.files import byte_digest
from ctxvar.files.parquet import ParquetInput, ParquetOutput, read_metadata, read_table, tagged_schema, write_table
from ctxvar.files.value_digest import value_digest
from ctxvar.stats.sample_file import SAMPLE_LAYOUT
from ctxvar.stats.sums import MOMENTS_LAYOUT, SUMS_LAYOUT

from support.byte_flips import data_region, each_byte_flipped, flip, reads_in_halves
from support.declared_sums import LAYOUT_1, READERS
from support.messages import one_line


def table(rows: int = 300_000) -> pa.Table:
    return pa.table({"x": np.arange(rows, dtype="f8"), "token": [f"t{i % 97}" for i in range(rows)]})


def descriptors_under(folder) -> list[str]:
    """The files under ``folder`` that this process holds open. Counting every descriptor would also count those
    that the garbage collector or another thread closes meanwhile."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since it was listed
            continue
        if target.startswith(str(folder)):
            held.append(target)
    return held


def block_threads() -> int:
    return sum(thread.name == "ctxvar-blocks" and thread.is_alive() for thread in threading.enumerate())


@pytest.mark.parametrize("options", [{"compression": "no such codec"}, {"version": "9.9"}])
def test_a_writer_that_cannot_open_leaves_no_thread_and_no_descriptor(tmp_path, options):
    source = table(10)
    threads = block_threads()
    for _ in range(3):
        with pytest.raises((ValueError, pa.ArrowException)):
            ParquetOutput(tmp_path / "file.parquet", tagged_schema(source.schema), **options)
    assert (block_threads(), descriptors_under(tmp_path)) == (threads, [])


def test_a_file_that_cannot_be_mapped_while_written_is_still_whole_and_says_nothing(tmp_path, monkeypatch, capfd):
    """The chunks are then digested from the file when it is closed, to the same bytes as where it is mapped."""
    source = table()
    write_table(source, tmp_path / "mapped.parquet")

    def unmappable(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(byte_digest.mmap, "mmap", unmappable)
    write_table(source, tmp_path / "file.parquet")
    assert read_table(tmp_path / "file.parquet").equals(source)
    assert (tmp_path / "file.parquet").read_bytes() == (tmp_path / "mapped.parquet").read_bytes()
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


def failing_preads(monkeypatch) -> None:
    """Every os.pread fails as a disk that cannot read a sector does."""

    def unreadable(fd, length, offset):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "pread", unreadable)


def test_a_disk_error_in_ctxvars_own_reads_is_one_line(tmp_path, monkeypatch):
    """The first 4 bytes (read on opening) and a chunk Arrow read in parts (read again for its digest) fail as a
    read of Arrow's own does: an IntegrityError of one line naming the file, not an OSError's traceback."""
    path = tmp_path / "file.parquet"
    write_table(table(), path)
    with monkeypatch.context() as patched:
        failing_preads(patched)
        with pytest.raises(IntegrityError) as error:
            ParquetInput(path)
    assert str(error.value).startswith(f"{path}: cannot be read (") and "Input/output error" in str(error.value)
    source = ParquetInput(path)
    reads_in_halves(monkeypatch)
    failing_preads(monkeypatch)
    with pytest.raises(IntegrityError) as error:
        source.row_group(0)
    assert str(error.value).startswith(f"{path} (row group 0): cannot be read (") and "\n" not in str(error.value)


def test_a_path_that_is_no_regular_file_is_refused_at_once(tmp_path):
    """A FIFO in a file's place is refused on opening, as /dev/zero and a folder are, instead of waiting forever for
    a writer to open its other end."""
    os.mkfifo(tmp_path / "fifo.parquet")

    def waited(*args):
        raise AssertionError("ParquetInput waited on the FIFO")

    previous = signal.signal(signal.SIGALRM, waited)
    signal.alarm(5)
    try:
        for path in [tmp_path / "fifo.parquet", "/dev/zero", tmp_path]:
            with pytest.raises(IntegrityError) as error:
                ParquetInput(path)
            assert str(error.value).startswith(f"{path}: not a readable Parquet file (")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_an_open_writer_that_writes_nothing_stops_polling_its_file(tmp_path, monkeypatch):
    """A writer held open while its next table is computed (an extraction holds up to five for its whole run) looks
    at its file less and less often while the file does not grow: at most every 50 ms, not every 2 ms."""
    polls = []
    fstat = os.fstat

    def counted(fd):
        if threading.current_thread().name == "ctxvar-blocks":
            polls.append(fd)
        return fstat(fd)

    monkeypatch.setattr(os, "fstat", counted)
    source = table(10)
    writer = ParquetOutput(tmp_path / "file.parquet", tagged_schema(source.schema))
    try:
        threading.Event().wait(0.5)
        assert len(polls) < 40, f"{len(polls)} looks at an idle file in 0.5 s"
        writer.write_table(source)
    finally:
        writer.close()
    assert read_table(tmp_path / "file.parquet").equals(source)


def test_a_footer_written_only_in_part_fails_the_write_and_leaves_no_file(tmp_path, monkeypatch):
    """os.pwrite may write fewer bytes than asked (a full or failing disk, a network file system): the digests
    written into the closed file's footer must all be there, or the write fails instead of leaving a file that
    every later read refuses."""
    pwrite = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, offset: pwrite(fd, data[: len(data) // 2], offset))
    with pytest.raises(OSError, match="footer"):
        write_table(table(10), tmp_path / "file.parquet")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("key", [byte_digest.FILE_DIGEST_KEY, byte_digest.CHUNK_DIGESTS_KEY])
def test_a_value_that_spells_a_digests_footer_entry_is_written_and_read(tmp_path, key):
    """A string column's minimum and maximum sit in the footer as they are, ahead of its key-value list: a word of a
    corpus that spells a digest's placeholder entry (control characters and all) neither breaks the write nor is
    taken for the entry."""
    placeholder = byte_digest.placeholders(1, 1)[key].encode()
    entry = byte_digest._thrift_entry(key, placeholder).decode()
    source = pa.table({"token": ["a", entry, "z"]})
    write_table(source, tmp_path / "file.parquet")
    assert read_table(tmp_path / "file.parquet").equals(source)


def test_the_writer_hashes_every_whole_block_whatever_the_block_size(tmp_path, monkeypatch):
    """A mapping starts at a multiple of the page size: blocks smaller than a page (as the tests that cut chunks
    into many blocks use) are hashed through a mapping from the page below, not left to seal after the first."""
    monkeypatch.setattr(byte_digest, "BLOCK", 64)
    stop, hashed = byte_digest.BlockDigests.stop, []

    def stopped(self):
        hashed.append(stop(self))
        return hashed[-1]

    monkeypatch.setattr(byte_digest.BlockDigests, "stop", stopped)
    path = tmp_path / "file.parquet"
    source = pa.table({"x": np.arange(1000, dtype="f8")})
    with ParquetOutput(path, tagged_schema(source.schema)) as writer:
        for _ in range(20):
            writer.write_table(source)
    assert sorted(hashed[0]) == list(range(path.stat().st_size // 64))
    assert read_table(path).num_rows == 20_000


def test_a_layer_writer_whose_writer_fails_to_open_leaves_no_temporary_file(tmp_path, monkeypatch):
    from ctxvar.stats import sums

    def refused(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(sums, "parquet_writer", refused)
    schema = sums.sums_schema(4, {"n_layers": 1, "shard": 0}, ("sum_sq", "sum"))
    writer = sums.LayerWriter(tmp_path / "s.parquet", schema)  # kept alive: no garbage collection cleans up
    with pytest.raises(OSError, match="no space left"):
        writer.__enter__()
    assert list(tmp_path.iterdir()) == []


TYPES = [pa.int64(), pa.string(), pa.binary(16), pa.list_(pa.float32()), pa.bool_(), pa.list_(pa.int8(), 3)]


@pytest.mark.parametrize("kind", TYPES, ids=str)
def test_no_chunks_and_one_empty_chunk_have_one_digest(kind):
    assert value_digest(pa.chunked_array([], type=kind)) == value_digest(pa.chunked_array([pa.nulls(0, kind)]))


def test_a_filtered_table_of_no_rows_reads_back(tmp_path):
    table = pa.table({"sentence_id": pa.array([1, 2], pa.int64()), "text": ["a b", "c"]})
    empty = table.filter(pa.array(np.zeros(2, dtype=bool)))
    assert empty.num_rows == 0
    write_table(empty, tmp_path / "empty.parquet", metadata={"shard": 1})
    back = read_table(tmp_path / "empty.parquet")
    assert back.num_rows == 0 and back.schema.names == ["sentence_id", "text"]


def sample_table() -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "layer": pa.array(np.zeros(300, np.int16)),
            "token": [f"t{i}" for i in range(300)],
            "n": rng.integers(1, 9, 300),
            "x": rng.normal(size=300),
        }
    )


@pytest.mark.parametrize("where", [0.0, 0.1, 0.35, 0.5, 0.8, 0.999])
def test_a_flipped_byte_in_a_parquet_data_page_is_an_error_naming_the_file(tmp_path, where):
    path = tmp_path / "stats.parquet"
    write_table(sample_table(), path, metadata={"n_layers": 1})
    start, end = data_region(path)
    flip(path, start + int(where * (end - start - 1)))
    with pytest.raises(IntegrityError) as error:
        read_table(path)
    assert one_line(error).startswith(f"{path}: ") and "delete it and re-run" in str(error.value)


def test_every_byte_of_a_parquet_file_is_covered(tmp_path):
    """Flipping any single byte anywhere fails reading the table; reading the metadata alone (the footer), any byte
    outside the pages (the first 4, the footer, the last 8), and a flip in a page leaves the metadata as written."""
    path = tmp_path / "t.parquet"
    metadata = {"model_id": "m", "n_layers": 1}
    write_table(sample_table().slice(0, 20), path, metadata=metadata)
    pages = range(*data_region(path))
    read_silently = []
    for position in each_byte_flipped(path):
        try:
            read_table(path)
            read_silently.append(("table", position))
        except IntegrityError:
            pass
        try:
            assert read_metadata(path) == metadata and position in pages, position
        except IntegrityError:
            assert position not in pages, position
    assert read_silently == []


@pytest.mark.parametrize("damage", ["truncated", "empty", "foreign"])
def test_truncated_empty_and_foreign_parquet_files_are_refused(tmp_path, damage):
    path = tmp_path / "shard.parquet"
    if damage == "foreign":  # written by another program: no ctxvar checksum to trust
        pq.write_table(sample_table(), path)
    else:
        write_table(sample_table(), path)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if damage == "truncated" else b"")
    with pytest.raises(IntegrityError, match=f"{path.name}: .*delete it and re-run") as error:
        read_table(path)
    one_line(error)


@pytest.mark.parametrize("kind", LAYOUT_1)
def test_a_file_in_the_layout_before_is_refused_with_a_line_that_says_re_run(tmp_path, kind):
    """A sums, moments or sample file an older ctxvar wrote (checksums intact) is never read as numbers."""
    path = tmp_path / f"0.{kind}.parquet"
    write_table(pa.table(LAYOUT_1[kind]), path, metadata={"n_layers": 1, "shard": 0, "d": 2})
    with pytest.raises(IntegrityError) as error:
        READERS[kind](path)
    expected = {"sums": SUMS_LAYOUT, "moments": MOMENTS_LAYOUT, "sample": SAMPLE_LAYOUT}[kind]
    assert one_line(error) == (
        f"{path}: is in an older layout of ctxvar (before {expected!r}), which this version does not read; "
        "delete it and re-run (Snakemake rebuilds it)"
    )
