"""Unit tier: the digests of a Parquet file's bytes (ctxvar.files.byte_digest), which put every byte of a file written
through ctxvar.files.parquet under a checksum ctxvar checks: the end of the footer, a footer Arrow reads in two
parts, column chunks Arrow reads in parts, files written before byte digests, and writer options that would leave
bytes outside the column chunks."""

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ctxvar.files.parquet
from ctxvar.errors import IntegrityError
from ctxvar.files import byte_digest
from ctxvar.files.parquet import (
    BYTES_KEY,
    INTEGRITY_KEY,
    PARQUET_READS,
    VALUE_DIGESTS_KEY,
    VALUES_KEY,
    VECTOR_WRITE_OPTIONS,
    ParquetInput,
    ParquetOutput,
    _footer_digest,
    read_table,
    tagged_schema,
    write_table,
)
from ctxvar.files.value_digest import VALUE_DIGEST_KIND, value_digest

from support.byte_flips import read_despite_a_flip, reads_in_halves, reseal

REMEDY = "delete it and re-run (Snakemake rebuilds it)"


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and message.endswith(REMEDY), message
    return message


def table(rows: int = 40) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "token": [f"t{i}" for i in range(rows)],
            "n": rng.integers(1, 9, rows),
            "q": pa.array([None if i % 7 == 0 else float(i) for i in range(rows)], pa.float64()),
            "positions": pa.array([list(range(i % 4)) for i in range(rows)], pa.list_(pa.int32())),
        }
    )


@pytest.fixture(params=[byte_digest.BLOCK, 64], ids=["256 KiB blocks", "64-byte blocks"])
def block(request, monkeypatch) -> int:
    """The block size of chunk digests: the default, and one small enough that these files' chunks span many whole
    blocks, hashed by the writer as it writes."""
    monkeypatch.setattr(byte_digest, "BLOCK", request.param)
    return request.param


def test_a_chunk_digest_is_the_same_from_a_read_the_file_and_the_blocks_hashed_while_writing(tmp_path, block):
    path = tmp_path / "bytes"
    data = np.random.default_rng(0).integers(0, 256, 5 * 64 + 17, np.uint8).tobytes()
    path.write_bytes(data)
    blocks = byte_digest.BlockDigests(path).stop()
    assert sorted(blocks) == list(range(len(data) // block))
    fd = path.open("rb")
    for offset, length in [(0, len(data)), (4, 100), (64, 128), (63, 2), (100, 0), (200, len(data) - 200)]:
        expected = byte_digest.data_digest(offset, data[offset : offset + length])
        read, count = byte_digest.range_digest(fd.fileno(), offset, length)
        assert read == expected and count == length
        from_blocks, count = byte_digest.range_digest(fd.fileno(), offset, length, blocks)
        whole = len([p for p in byte_digest.pieces(offset, length) if p[1] == block])
        assert from_blocks == expected and count == length - whole * block
    assert byte_digest.data_digest(0, data[:64]) != byte_digest.data_digest(0, data[:63])


def footer_start(path: Path) -> int:
    data = path.read_bytes()
    return len(data) - 8 - int.from_bytes(data[-8:-4], "little")


def test_the_end_of_the_footer_is_covered(tmp_path):
    """Zeroing the 4 bytes before the footer's length (the end of the Thrift FileMetaData, where a field header
    becomes a stop) leaves a file Arrow reads with the same values: the file digest finds it."""
    path = tmp_path / "t.parquet"
    write_table(table(), path, metadata={"k": 1})
    data = bytearray(path.read_bytes())
    data[-12:-8] = b"\0\0\0\0"
    path.write_bytes(bytes(data))
    assert pq.ParquetFile(path).read().equals(table())  # what Arrow alone makes of it
    with pytest.raises(IntegrityError) as error:
        read_table(path)
    assert one_line(error) == f"{path}: footer checksum mismatch (the file is corrupt); {REMEDY}"


def test_the_first_bytes_which_arrow_never_reads_are_covered(tmp_path):
    path = tmp_path / "t.parquet"
    write_table(table(), path)
    data = bytearray(path.read_bytes())
    data[:4] = b"PAR0"
    path.write_bytes(bytes(data))
    assert pq.ParquetFile(path).read().equals(table())
    with pytest.raises(IntegrityError, match="footer checksum mismatch"):
        ParquetInput(path)


def test_a_footer_larger_than_arrows_first_read_is_checked_whole(tmp_path, monkeypatch):
    """Arrow reads 64 KiB of a file's end, then the rest of a larger footer: the file digest covers all of it."""
    monkeypatch.setattr(ctxvar.files.parquet, "ROW_GROUP_ROWS", 1)
    path = tmp_path / "t.parquet"
    write_table(table(400), path)
    size = path.stat().st_size
    assert size - footer_start(path) > 64 << 10 and footer_start(path) < size - (64 << 10)
    before = PARQUET_READS.bytes
    assert read_table(path).equals(table(400))
    assert PARQUET_READS.bytes - before <= size + ctxvar.files.parquet.FOOTER_READ_BYTES + (size - footer_start(path))
    data = bytearray(path.read_bytes())
    at = footer_start(path) + 10  # before the last 64 KiB
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        ParquetInput(path)


def test_every_byte_of_a_file_of_many_row_groups_is_covered(tmp_path, monkeypatch, block):
    """Strings, nulls and lists (two leaf columns' worth of levels), in 3 row groups."""
    monkeypatch.setattr(ctxvar.files.parquet, "ROW_GROUP_ROWS", 4)
    path = tmp_path / "t.parquet"
    write_table(table(10), path)
    assert read_despite_a_flip(path, read_table, IntegrityError) == []


def changed_chunk_digest(path: Path, group: int, leaf: int) -> None:
    """Another chunk digest in the footer, the file digest written anew: only the chunk's check can find it."""
    digests = json.loads(pq.ParquetFile(path).metadata.metadata[byte_digest.CHUNK_DIGESTS_KEY])
    old = digests[group][leaf]
    new = ("1" if old[0] == "0" else "0") + old[1:]
    data = path.read_bytes()
    assert data.count(old.encode()) == 1
    path.write_bytes(data.replace(old.encode(), new.encode()))
    reseal(path)


@pytest.mark.parametrize("arrow_reads", ["whole chunks", "chunks in parts"])
def test_a_chunk_whose_bytes_do_not_match_their_digest_is_refused(tmp_path, monkeypatch, arrow_reads, block):
    """A chunk Arrow reads in one read is digested from that read; one read in parts is read again for its digest,
    the bytes counted."""
    monkeypatch.setattr(ctxvar.files.parquet, "ROW_GROUP_ROWS", 20)
    path = tmp_path / "t.parquet"
    write_table(table(), path)
    if arrow_reads == "chunks in parts":
        reads_in_halves(monkeypatch)
    source = ParquetInput(path)
    before = PARQUET_READS.bytes
    source.row_group(1)
    chunks = sum(length for length in (r[1] for r in byte_digest.chunk_ranges(pq.ParquetFile(path).metadata)[1]))
    assert PARQUET_READS.bytes - before == chunks * (2 if arrow_reads == "chunks in parts" else 1)
    changed_chunk_digest(path, 1, 0)  # "token"
    source = ParquetInput(path)
    source.row_group(0), source.row_group(1, ["n", "positions"])
    with pytest.raises(IntegrityError) as error:
        source.row_group(1)
    assert one_line(error) == (
        f"{path} (row group 1): cannot be read (column 'token' does not match its bytes' digest: the file is "
        f"corrupt); {REMEDY}"
    )
    with pytest.raises(IntegrityError, match=r"\(row group 1, column 'token' does not match its bytes' digest"):
        read_table(path)


def test_damaged_chunk_digests_and_chunks_that_do_not_tile_the_file_are_refused(tmp_path):
    path = tmp_path / "t.parquet"
    write_table(table(), path)
    data = path.read_bytes()
    start = footer_start(path)
    at = data.index(b'[["', data.index(byte_digest.CHUNK_DIGESTS_KEY, start))
    path.write_bytes(data[:at] + b"{" + data[at + 1 :])
    reseal(path)
    with pytest.raises(IntegrityError) as error:
        ParquetInput(path)
    assert one_line(error) == f"{path}: its footer's byte digests are damaged (the file is corrupt); {REMEDY}"
    assert not byte_digest.tiles([[(4, 10), (15, 5)]], 20)  # a gap
    assert not byte_digest.tiles([[(4, 10), (10, 10)]], 20)  # an overlap
    assert not byte_digest.tiles([[(4, 10)]], 20) and byte_digest.tiles([[(14, 6)], [(4, 10)]], 20)
    assert byte_digest.tiles([[(4, 16)], [(0, 0)]], 20) and not byte_digest.tiles([[(4, 16)], [(20, 0)]], 20)


def test_a_file_of_empty_row_groups_is_covered(tmp_path):
    """With the options of vector files (sums of a layer no type reached), Arrow writes no pages for an empty row
    group: its chunks are (0, 0), and the footer follows the first 4 bytes."""
    path = tmp_path / "t.parquet"
    with ParquetOutput(path, tagged_schema(table().schema, {"k": 1}), **VECTOR_WRITE_OPTIONS) as writer:
        writer.write_table(table().slice(0, 0))
        writer.write_table(table().slice(0, 0))
    source = ParquetInput(path)
    assert source.num_row_groups == 2 and source.read().num_rows == 0 and footer_start(path) == 4
    assert read_despite_a_flip(path, read_table, IntegrityError) == []


def write_before_byte_digests(path: Path, source: pa.Table) -> None:
    """A file as ctxvar wrote it with value digests and before byte digests: one row group, no BYTES_KEY."""
    tagged = tagged_schema(source.schema, {"k": 1})
    raw = tagged.metadata
    marked = {**raw, VALUES_KEY: VALUE_DIGEST_KIND}
    marked[INTEGRITY_KEY] = _footer_digest(source.schema, raw[b"ctxvar"], None, VALUE_DIGEST_KIND)
    with pq.ParquetWriter(
        path, tagged.with_metadata(marked), write_page_checksum=False, compression="none", use_dictionary=False
    ) as writer:
        writer.write_table(source, row_group_size=source.num_rows)
        writer.add_key_value_metadata({VALUE_DIGESTS_KEY: json.dumps([[value_digest(c) for c in source.columns]])})


def test_a_file_written_before_byte_digests_is_read_with_its_value_digests_checked(tmp_path):
    path = tmp_path / "before.parquet"
    write_before_byte_digests(path, table())
    source = ParquetInput(path)
    assert source.read().equals(table()) and source.metadata == {"k": 1}
    data = bytearray(path.read_bytes())
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(2)  # "q": float64, its last value's bytes
    data[chunk.data_page_offset + chunk.total_compressed_size - 3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="column 'q' does not match its value digest"):
        read_table(path)


def test_removing_the_mark_of_byte_digests_breaks_the_footer_checksum(tmp_path):
    """Without the mark a file would read as one written before byte digests; the footer checksum covers it."""
    path = tmp_path / "unmarked.parquet"
    with ParquetOutput(path, tagged_schema(table().schema, {"k": 1})) as writer:
        schema = writer.schema
    unmarked = schema.with_metadata({k: v for k, v in schema.metadata.items() if k != BYTES_KEY})
    with pq.ParquetWriter(path, unmarked, write_page_checksum=False) as writer:
        writer.write_table(table())
        writer.add_key_value_metadata({VALUE_DIGESTS_KEY: json.dumps([[value_digest(c) for c in table().columns]])})
    with pytest.raises(IntegrityError) as error:
        ParquetInput(path)
    assert one_line(error) == f"{path}: footer checksum mismatch (the file is corrupt); {REMEDY}"


@pytest.mark.parametrize("options", [{"write_page_index": True}, {"bloom_filter_options": {"token": {}}}])
def test_a_writer_that_would_leave_bytes_outside_the_chunks_fails_and_leaves_no_file(tmp_path, options):
    """A page index or a bloom filter lies between the chunks and the footer, under no digest."""
    path = tmp_path / "t.parquet"
    try:
        write_table(table(), path, **options)
    except TypeError:
        pytest.skip(f"this pyarrow has no {options}")
    except RuntimeError as error:
        assert "its column chunks do not cover its bytes before the footer" in str(error)
        assert not path.exists() and list(tmp_path.iterdir()) == []
    else:
        raise AssertionError(f"{options} wrote a file with bytes outside its chunks")


def test_reading_a_row_group_asks_for_the_same_columns_of_the_next_ahead(tmp_path, monkeypatch):
    monkeypatch.setattr(ctxvar.files.parquet, "ROW_GROUP_ROWS", 20)
    path = tmp_path / "t.parquet"
    write_table(table(), path)
    advised = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: advised.append((offset, length)))
    ranges = byte_digest.chunk_ranges(pq.ParquetFile(path).metadata)
    source = ParquetInput(path)
    source.row_group(0, ["n", "positions"])
    assert advised == [ranges[1][1], ranges[1][3]]
    advised.clear()
    source.row_group(1)
    assert advised == []  # the last row group
