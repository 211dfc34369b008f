"""A Parquet file of no rows reads back: a table of no rows can hold its columns in no chunks at all (as
``Table.filter`` leaves them), which Parquet reads back as one empty chunk, and the two had different value
digests. A shard that got no sentence (fewer sentences than shards) stopped its extraction job with "does not
match its value digest: the file is corrupt", which re-running could not cure."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ctxvar.files.parquet import read_table, write_table
from ctxvar.files.value_digest import value_digest

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
