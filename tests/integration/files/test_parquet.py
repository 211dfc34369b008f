"""The checks of the Parquet files ctxvar writes (ctxvar.files.parquet), on a real extraction's sums,
moments and sample files: a flipped byte in a vector column fails the read of that layer alone, in one line, and a
footer whose column name is no UTF-8 is one line too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxvar.errors import IntegrityError
from ctxvar.stats.sums import SumsFile

from support.byte_flips import data_region, flip
from support.declared_sums import READERS
from support.messages import one_line
from support.pipeline_runs import geometry_partial_files


@pytest.fixture(scope="module")
def geometry_partial(tmp_path_factory, tiny_models, corpus_texts):
    """A partial with every sums file: sums with Σ x/‖x‖, moments, sample."""
    return geometry_partial_files(tmp_path_factory.mktemp("geometry-partial"), tiny_models["bert"], corpus_texts[:60])


def column_chunk_middle(path: Path, row_group: int, column: str) -> int:
    """The offset of a byte in the middle of a column chunk's pages."""
    group = pq.ParquetFile(path).metadata.row_group(row_group)
    chunk = next(group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == column)
    return chunk.data_page_offset + chunk.total_compressed_size // 2


@pytest.mark.parametrize(
    "kind, column", [("sums", "sum"), ("sums", "sum_unit"), ("moments", "sum_outer"), ("sample", "x")]
)
def test_a_flipped_byte_in_a_vector_column_is_refused_with_one_line(tmp_path, geometry_partial, kind, column):
    damaged = tmp_path / geometry_partial[kind].name
    shutil.copy(geometry_partial[kind], damaged)
    flip(damaged, column_chunk_middle(damaged, 1, column))
    reader = READERS[kind](damaged)
    reader.layer(0)  # the other layers' pages are intact
    with pytest.raises(IntegrityError) as error:
        reader.layer(1)
    assert one_line(error).startswith(f"{damaged} (") and "layer 1): cannot be read" in str(error.value)
    assert str(error.value).endswith("delete it and re-run (Snakemake rebuilds it)")


def test_a_column_name_in_the_footer_that_is_no_utf8_is_refused_with_one_line(tmp_path, geometry_partial):
    """Arrow raises UnicodeDecodeError, not one of its own errors, for the footer's first mention of a column."""
    damaged = tmp_path / "s.parquet"
    shutil.copy(geometry_partial["sums"], damaged)
    data = bytearray(damaged.read_bytes())
    data[data.index(b"sum_sq", data_region(damaged)[1])] = 0xFF  # the footer's first mention
    damaged.write_bytes(bytes(data))
    with pytest.raises(IntegrityError) as error:
        SumsFile(damaged)
    assert one_line(error).startswith(f"{damaged}: not a readable Parquet file")
