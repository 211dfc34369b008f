"""Unit tier: the value digests of Parquet files written through ctxvar.files.parquet (one per column chunk, in the
footer, checked on every read), which replace Parquet's page CRC-32: round trip, damage to values, to a page
header's encoding and to the digests, the digest's independence of chunking, and files written with page CRCs only."""

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ctxvar.files.atomic
import ctxvar.files.parquet
from ctxvar.errors import IntegrityError
from ctxvar.files.parquet import (
    INTEGRITY_KEY,
    VALUE_DIGESTS_KEY,
    VALUES_KEY,
    VECTOR_WRITE_OPTIONS,
    ParquetInput,
    _with_value_digests,
    read_table,
    tagged_schema,
    write_table,
)
from ctxvar.files.value_digest import value_digest
from ctxvar.stats import sample_file
from ctxvar.stats.sums import (
    LayerSums,
    LayerWriter,
    MomentsFile,
    SumsFile,
    moments_schema,
    moments_table,
    sums_schema,
    write_sums,
)

from support.byte_flips import read_despite_a_flip, reseal
from support.declared_sums import COSINE, random_layers, sum_names

REMEDY = "delete it and re-run (Snakemake rebuilds it)"
N_LAYERS, D = 3, 4
METADATA = {"n_layers": N_LAYERS, "shard": 0}
UNIT_SUMS = sum_names(COSINE)  # the sums of a run with geometry.cosine


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and message.endswith(REMEDY), message
    return message


def sums_layers(n_types: int = 50, seed: int = 0) -> list[LayerSums]:
    """Sums of a run with geometry.cosine: every per-type sum it keeps (:data:`UNIT_SUMS`)."""
    return random_layers(N_LAYERS, n_types, D, COSINE, seed)


@pytest.fixture
def sums_path(tmp_path) -> Path:
    path = tmp_path / "partial.parquet"
    write_sums(path, sums_layers(), D, METADATA)
    return path


def column_chunk(path: Path, row_group: int, column: str) -> pq.ColumnChunkMetaData:
    group = pq.ParquetFile(path).metadata.row_group(row_group)
    return next(group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == column)


def flip(path: Path, position: int, bits: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= bits
    path.write_bytes(bytes(data))


# --- a page header in Thrift's compact protocol: just enough to find a data page's encoding -------------------

I32, STRUCT = 5, 12
PLAIN, BYTE_STREAM_SPLIT = 0, 9


def varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def data_page_header(data: bytes, page: int) -> tuple[list[int], int]:
    """The PageHeader fields before its DataPageHeader (field 5), and the offset of that one's ``encoding`` varint
    (its field 2), of the page header at ``page``. Only the fields ctxvar's writer puts there are understood."""
    at, field, fields = page, 0, []
    while True:
        header = data[at]
        at, field, kind = at + 1, field + (header >> 4), header & 0x0F
        assert header >> 4 and kind in (I32, STRUCT), f"unexpected page header byte {header:#x}"
        if kind == I32:
            _, at = varint(data, at)
            fields.append(field)
        elif field == 5:  # data_page_header: num_values (field 1), encoding (field 2)
            assert data[at] >> 4 == 1 and data[at] & 0x0F == I32
            _, at = varint(data, at + 1)
            assert data[at] >> 4 == 1 and data[at] & 0x0F == I32
            return fields, at + 1
        else:
            raise AssertionError(f"page header field {field} is a struct, not a data page header")


def patch_encoding(path: Path, row_group: int, column: str) -> None:
    """Rewrite the first data page header of a column chunk: PLAIN → BYTE_STREAM_SPLIT (zigzag varints, one byte
    each, so nothing else moves)."""
    data = bytearray(path.read_bytes())
    _, at = data_page_header(bytes(data), column_chunk(path, row_group, column).data_page_offset)
    assert data[at] == PLAIN << 1, "the page is not PLAIN"
    data[at] = BYTE_STREAM_SPLIT << 1
    path.write_bytes(bytes(data))


# --- round trip ----------------------------------------------------------------------------------------------


def test_sums_round_trip_with_one_digest_per_column_and_layer_and_no_page_crc(sums_path):
    layers = sums_layers()
    sums = SumsFile(sums_path)
    for layer, written in enumerate(layers):
        got = sums.layer(layer)
        assert all(np.array_equal(a, b) for a, b in zip(got.additive(), written.additive()))
        assert list(got.types) == list(written.types)
    footer = pq.ParquetFile(sums_path).metadata
    digests = json.loads(footer.metadata[VALUE_DIGESTS_KEY])
    assert len(digests) == N_LAYERS and all(len(group) == 3 + len(UNIT_SUMS) for group in digests)  # layer token n
    assert digests[1][4] == value_digest(ctxvar.files.parquet.vector_column(layers[1].sum))
    assert footer.metadata[VALUES_KEY] == b"xxh3_128 1"
    crc = 4  # PageHeader's field 4
    with_crc = sums_path.with_name("crc.parquet")
    write_page_crc_only(with_crc, layers)
    for path, fields in ((sums_path, [1, 2, 3]), (with_crc, [1, 2, 3, crc])):
        first_page = column_chunk(path, 1, "sum").data_page_offset
        assert data_page_header(path.read_bytes(), first_page)[0] == fields


def test_every_file_through_ctxvar_io_carries_value_digests(tmp_path):
    """write_table (any table, nulls and nested values included, in row groups of ROW_GROUP_ROWS) and LayerWriter
    (sums, moments, sample, tokens: one row group per layer) write digests that their readers check."""
    table = pa.table(
        {
            "i": pa.array([1, None, 3, 4, 5], pa.int64()),
            "s": pa.array(["a", None, "", "dd", "é"], pa.string()),
            "b": pa.array([True, False, None, True, True]),
            "f": pa.array([0.5, 1.5, np.inf, -0.0, 2.0], pa.float32()),
            "l": pa.array([[1.0], None, [], [2.0, None], [3.0]], pa.list_(pa.float64())),
        }
    )
    path = tmp_path / "t.parquet"
    write_table(table, path, metadata={"k": 1})
    assert read_table(path).cast(table.schema).equals(table)  # Parquet names a list's items "element"
    assert ParquetInput(path).metadata == {"k": 1}
    moments = tmp_path / "m.parquet"
    schema = moments_schema(D, METADATA)
    with LayerWriter(moments, schema) as writer:
        for layer in range(N_LAYERS):
            writer.write(moments_table(layer, 9, np.arange(D) + layer, np.eye(D) * layer, schema))
    assert np.array_equal(MomentsFile(moments).layer(2)[2], np.eye(D) * 2)
    sample = tmp_path / "x.parquet"
    schema = sample_file.sample_schema(D, METADATA)
    where = {"key": np.arange(3, dtype=np.uint64), "sentence_id": np.arange(3), "window": np.zeros(3, np.int32)}
    where |= {"position": np.arange(3, dtype=np.int32), "token": np.array(list("abc"), object)}
    with LayerWriter(sample, schema) as writer:
        for layer in range(N_LAYERS):
            writer.write(sample_file.sample_table(layer, where, np.ones((3, D), np.float32) * layer, schema))
    for written in (path, moments, sample):
        footer = pq.ParquetFile(written).metadata
        digests = json.loads(footer.metadata[VALUE_DIGESTS_KEY])
        assert len(digests) == footer.num_row_groups and all(len(g) == footer.num_columns for g in digests)


def test_write_table_digests_each_row_group_of_a_long_table(tmp_path, monkeypatch):
    monkeypatch.setattr(ctxvar.files.parquet, "ROW_GROUP_ROWS", 7)
    table = pa.table({"x": np.arange(30, dtype=np.int64), "s": [f"w{i}" for i in range(30)]})
    path = tmp_path / "t.parquet"
    write_table(table, path)
    source = ParquetInput(path)
    assert source.num_row_groups == 5 and [source.row_group_rows(i) for i in range(5)] == [7, 7, 7, 7, 2]
    assert source.read().equals(table) and source.row_group(4).equals(table.slice(28))
    write_table(table.slice(0, 0), path)  # an empty table: one empty row group, digested
    assert ParquetInput(path).read().num_rows == 0


# --- damage ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("column", ["sum", "sum_unit", "sum_sq", "n", "token"])
def test_a_flipped_byte_in_a_value_is_refused_naming_the_file_and_layer(tmp_path, sums_path, column):
    chunk = column_chunk(sums_path, 1, column)
    flip(sums_path, chunk.data_page_offset + chunk.total_compressed_size - 2)  # a value's byte near the end
    sums = SumsFile(sums_path)
    sums.layer(0), sums.layer(2)  # the other layers are intact
    with pytest.raises(IntegrityError) as error:
        sums.layer(1)
    assert one_line(error).startswith(f"{sums_path} (layer 1): cannot be read (")
    assert f"column {column!r} does not match its value digest" in str(error.value)


def test_a_page_header_encoding_changed_to_byte_stream_split_is_refused(sums_path):
    """Parquet's page CRC covers a page's data, not its header: Arrow reads the patched page as other numbers."""
    patch_encoding(sums_path, 1, "sum_sq")
    silently = pq.ParquetFile(sums_path).read_row_group(1, columns=["sum_sq"]).column(0).to_numpy()
    assert not np.array_equal(silently, sums_layers()[1].sum_sq)  # what a reader without value digests gets
    sums = SumsFile(sums_path)
    sums.layer(0)
    with pytest.raises(IntegrityError) as error:
        sums.layer(1)
    assert one_line(error).startswith(f"{sums_path} (layer 1): cannot be read (column 'sum_sq' does not match")


def test_the_same_patch_goes_unseen_by_page_crcs(tmp_path):
    """Why page CRCs were not enough: a file written with them (and no value digests) reads the patched page."""
    path = tmp_path / "crc.parquet"
    write_page_crc_only(path, sums_layers())
    patch_encoding(path, 1, "sum_sq")
    assert not np.array_equal(SumsFile(path).layer(1).sum_sq, sums_layers()[1].sum_sq)


def footer_span(path: Path) -> tuple[int, int]:
    size = path.stat().st_size
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little")
    return size - 8 - footer, size - 8


def test_a_changed_digest_is_refused_when_its_column_is_read(sums_path):
    """The footer's digest finds the edit on opening; with that digest written anew, the value digest finds it."""
    data = bytearray(sums_path.read_bytes())
    start, end = footer_span(sums_path)
    digests = json.loads(pq.ParquetFile(sums_path).metadata.metadata[VALUE_DIGESTS_KEY])
    at = data.index(digests[2][3].encode(), start, end)
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    sums_path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError) as error:
        SumsFile(sums_path)
    assert one_line(error) == f"{sums_path}: footer checksum mismatch (the file is corrupt); {REMEDY}"
    reseal(sums_path)
    sums = SumsFile(sums_path)
    sums.layer(1), sums.layer(2, columns=["sum"])
    with pytest.raises(IntegrityError) as error:
        sums.layer(2)
    assert "(layer 2): cannot be read (column 'sum_sq' does not match its value digest" in one_line(error)


def test_damaged_digests_are_refused_on_opening(sums_path):
    data = bytearray(sums_path.read_bytes())
    start, end = footer_span(sums_path)
    at = data.index(b"[[", start, end)  # the digests' JSON
    data[at] = ord("{")
    sums_path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError) as error:
        SumsFile(sums_path)
    assert one_line(error) == f"{sums_path}: its footer's value digests are damaged (the file is corrupt); {REMEDY}"


def test_a_footer_without_its_digests_is_refused(tmp_path):
    """A file that says it carries value digests (its footer checksum covering that) but lacks them."""
    path = tmp_path / "no-digests.parquet"
    schema = _with_value_digests(sums_schema(D, METADATA, UNIT_SUMS))
    with pq.ParquetWriter(path, schema, **VECTOR_WRITE_OPTIONS) as writer:
        for layer in sums_layers():
            writer.write_table(layer.to_table(schema), row_group_size=50)
    with pytest.raises(IntegrityError) as error:
        SumsFile(path)
    assert one_line(error) == f"{path}: its footer lacks its value digests (the file is corrupt); {REMEDY}"


def test_removing_the_mark_of_value_digests_breaks_the_footer_checksum(tmp_path):
    """Without the mark a file would read as one written before value digests; the footer checksum covers it."""
    path = tmp_path / "unmarked.parquet"
    marked = _with_value_digests(sums_schema(D, METADATA, UNIT_SUMS))
    unmarked = marked.with_metadata({k: v for k, v in marked.metadata.items() if k != VALUES_KEY})
    assert unmarked.metadata[INTEGRITY_KEY] == marked.metadata[INTEGRITY_KEY]
    with pq.ParquetWriter(path, unmarked, **VECTOR_WRITE_OPTIONS) as writer:
        for layer in sums_layers():
            writer.write_table(layer.to_table(unmarked), row_group_size=50)
    with pytest.raises(IntegrityError) as error:
        SumsFile(path)
    assert one_line(error) == f"{path}: footer checksum mismatch (the file is corrupt); {REMEDY}"


def test_every_byte_of_a_sums_file_is_covered(tmp_path):
    """Flipping any single byte of a small sums file fails the read: each byte is under a digest ctxvar checks."""
    path = tmp_path / "s.parquet"
    layers = [
        LayerSums(i, layer.types[:3], layer.count[:3], {name: values[:3] for name, values in layer.sums.items()})
        for i, layer in enumerate(sums_layers())
    ][:2]
    write_sums(path, layers, D, {**METADATA, "n_layers": 2})

    def read_both_layers(path):
        sums = SumsFile(path)
        return [sums.layer(i) for i in range(2)]

    assert read_despite_a_flip(path, read_both_layers, IntegrityError) == []


# --- the digest's definition ----------------------------------------------------------------------------------

COLUMNS = {
    "int16": pa.array(np.arange(-50, 50, dtype=np.int16)),
    "float64 with nulls": pa.array([None if i % 7 == 0 else i / 3 for i in range(100)], pa.float64()),
    "string with nulls": pa.array([None if i % 5 == 0 else "x" * (i % 4) + str(i) for i in range(100)]),
    "large_binary": pa.array([bytes([i]) * (i % 3) for i in range(100)], pa.large_binary()),
    "bool": pa.array([i % 3 == 0 if i % 11 else None for i in range(100)]),
    "fixed_size_binary": ctxvar.files.parquet.vector_column(np.arange(300, dtype=np.float64).reshape(100, 3)),
    "list": pa.array([[float(j) for j in range(i % 4)] if i % 9 else None for i in range(100)], pa.list_(pa.float64())),
    "dictionary": pa.array([f"w{i % 6}" for i in range(100)]).dictionary_encode(),
}


@pytest.mark.parametrize("name", COLUMNS)
def test_the_digest_is_the_same_whatever_the_chunking(name):
    column = COLUMNS[name]
    whole = value_digest(column)
    rng = np.random.default_rng(0)
    for _ in range(5):
        cuts = np.sort(rng.choice(np.arange(1, 100), 4, replace=False))
        pieces = [column.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, 100])]
        assert value_digest(pa.chunked_array(pieces, column.type)) == whole
    padded = pa.concat_arrays([column.slice(0, 10), column])  # a slice with an offset into a larger buffer
    assert value_digest(padded.slice(10)) == whole
    assert value_digest(pa.chunked_array([column.slice(0, 0), column], column.type)) == whole
    assert value_digest(column.slice(1)) != whole and value_digest(column.slice(0, 99)) != whole


def test_the_digest_tells_values_lengths_and_nulls_apart():
    digests = {
        value_digest(pa.array(["ab", "c"])),
        value_digest(pa.array(["a", "bc"])),
        value_digest(pa.array(["a", None, "bc"])),
        value_digest(pa.array([None, "a", "bc"])),
        value_digest(pa.array([1.0, 2.0])),
        value_digest(pa.array([2.0, 1.0])),
        value_digest(pa.array([[1.0], [2.0]])),
        value_digest(pa.array([[1.0, 2.0], []])),
    }
    assert len(digests) == 8


def test_a_whole_file_read_and_a_row_group_read_check_the_same_digests(tmp_path, monkeypatch):
    """read() checks each row group's slice of the whole table, whatever chunks Arrow returns."""
    monkeypatch.setattr(ctxvar.files.parquet, "ROW_GROUP_ROWS", 10)
    table = pa.table(COLUMNS)
    path = tmp_path / "t.parquet"
    write_table(table, path)
    source = ParquetInput(path)
    assert source.num_row_groups == 10
    assert source.read().equals(table.cast(source.schema))


# --- files written with page CRCs only -----------------------------------------------------------------------


def write_page_crc_only(path: Path, layers: list[LayerSums]) -> None:
    """A sums file as ctxvar wrote it before value digests: a CRC-32 on every page, no digests in the footer."""
    schema = sums_schema(D, METADATA, UNIT_SUMS)
    with pq.ParquetWriter(path, schema, write_page_checksum=True, **VECTOR_WRITE_OPTIONS) as writer:
        for layer in layers:
            writer.write_table(layer.to_table(schema), row_group_size=max(1, len(layer.types)))


def test_a_file_with_page_crcs_only_is_read_and_its_pages_verified(tmp_path):
    path = tmp_path / "crc.parquet"
    layers = sums_layers()
    write_page_crc_only(path, layers)
    assert VALUE_DIGESTS_KEY not in pq.ParquetFile(path).metadata.metadata
    sums = SumsFile(path)
    assert all(np.array_equal(a, b) for a, b in zip(sums.layer(2).additive(), layers[2].additive()))
    damaged = tmp_path / "damaged.parquet"
    shutil.copy(path, damaged)
    chunk = column_chunk(damaged, 1, "sum")
    flip(damaged, chunk.data_page_offset + chunk.total_compressed_size - 2)
    with pytest.raises(IntegrityError) as error:
        SumsFile(damaged).layer(1)
    assert one_line(error).startswith(f"{damaged} (layer 1): cannot be read (") and "checksum" in str(error.value)


def test_a_table_tagged_for_an_older_ctxvar_still_reads(tmp_path):
    """tagged_schema alone (no value digests) is what files before value digests carry."""
    path = tmp_path / "old.parquet"
    table = pa.table({"x": [1, 2, 3]})
    pq.write_table(
        table.replace_schema_metadata(tagged_schema(table.schema, {"k": 2}).metadata), path, write_page_checksum=True
    )
    assert read_table(path).equals(table) and ParquetInput(path).metadata == {"k": 2}
