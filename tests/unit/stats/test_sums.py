"""A sums file's columns: the older ctxvar's layout (layer, token, n, then the declared sums) reads and merges;
the same sums in another column order merge to the same tables; a file lacking a sum every sums file holds, or
holding a column no declaration names or one of the wrong width, is refused with one line, not a KeyError. The
vectors of sums, moments and sample files are fixed-size binary values read back bit for bit, and processes that
read sums exit cleanly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.files.parquet import tagged_schema, vector_column
from ctxvar.stats import sample_file
from ctxvar.stats.declarations import declared, kept_layer_sums, kept_sums, token_columns
from ctxvar.stats.merge import merge_partials
from ctxvar.stats.sample_file import SampleFile
from ctxvar.stats.sample_file import points as points_of
from ctxvar.stats.sums import (
    SUMS_LAYOUT,
    LayerSums,
    LayerWriter,
    MomentsFile,
    SumsFile,
    moments_schema,
    moments_table,
    write_sums,
)

from support.declared_sums import COSINE, chunk_of, layer_sums_of, sum_names, type_sum

D = 4
COUNTS = np.array([2, 3])
METADATA = {
    "n_layers": 2,
    "shard": 0,
    "model_id": "m",
    "d": D,
    **dict.fromkeys(("n_tokens", "n_sentences", "n_sequences"), 5),
    **dict.fromkeys(("n_skipped_too_long", "n_split_too_long"), 0),
}


def column(name: str, width: int = D):
    """(field, values) of a consistent sum, as its declaration adds it: every occurrence of type t is the vector of
    ones / √d; a name no declaration has, zeros."""
    try:
        item = declared(name)
    except KeyError:
        return pa.field(name, pa.float64(), nullable=False), pa.array(np.zeros(len(COUNTS)))
    labels = np.repeat(np.arange(len(COUNTS)), COUNTS)
    total = type_sum(item, chunk_of(np.ones((len(labels), width)) / np.sqrt(width)), labels, len(COUNTS))
    if item.vector:
        return pa.field(name, pa.binary(8 * width), nullable=False), vector_column(total)
    return pa.field(name, pa.float64(), nullable=False), pa.array(total)


def write(path, names, widths=None):
    widths = widths or {}
    keys = [
        pa.field("layer", pa.int16(), False),
        pa.field("token", pa.string(), False),
        pa.field("n", pa.int64(), False),
    ]
    sums = [column(name, widths.get(name, D)) for name in names]
    schema = tagged_schema(pa.schema(keys + [field for field, _ in sums]), METADATA, SUMS_LAYOUT)
    with LayerWriter(path, schema) as writer:
        for layer in range(METADATA["n_layers"]):
            keys = [pa.array(np.full(len(COUNTS), layer, np.int16)), pa.array(["a", "b"]), pa.array(COUNTS)]
            writer.write(pa.table(keys + [values for _, values in sums], schema=schema))
    return str(path)


def merged_tokens(tmp_path, names) -> pd.DataFrame:
    path = write(tmp_path / f"{'-'.join(names)}.parquet", names)
    merge_partials([path], tmp_path / "merged.parquet", tmp_path / "tokens.parquet")
    return pd.read_parquet(tmp_path / "tokens.parquet")


@pytest.mark.parametrize("geometry", [{}, COSINE], ids=["core", "cosine"])
def test_the_older_layout_reads_and_merges(tmp_path, geometry):
    names = sum_names(geometry)
    assert SumsFile(write(tmp_path / "old.parquet", names)).sum_names == names
    tokens = merged_tokens(tmp_path, names)
    expected = ["layer", "token", "n", *(column.name for column in token_columns(kept_sums(geometry)))]
    assert list(tokens.columns) == expected
    np.testing.assert_allclose(tokens["V"], 0.0, atol=1e-12)


def test_the_same_sums_in_another_column_order_merge_to_the_same_tables(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    declared_order = merged_tokens(tmp_path / "a", sum_names(COSINE))
    reordered = merged_tokens(tmp_path / "b", sum_names(COSINE)[::-1])
    pd.testing.assert_frame_equal(reordered, declared_order)


@pytest.mark.parametrize(
    "names, widths",
    [
        (("sum_sq",), {}),  # no Σx
        (("sum",), {}),  # no Σ‖x‖²
        (("sum_sq", "sum", "sum_fifth"), {}),  # a column no declaration names
        (("sum_sq", "sum", "sum_unit"), {"sum_unit": D + 1}),  # Σ x/‖x‖ of another width than Σx
    ],
)
def test_a_file_of_other_sums_is_refused_in_one_line(tmp_path, names, widths):
    path = write(tmp_path / "other.parquet", names, widths)
    with pytest.raises(
        StatisticsError, match=r"holds columns .* not a sums file of this ctxvar's declared sums; delete"
    ) as caught:
        SumsFile(path)
    assert "\n" not in str(caught.value)


def test_a_sum_reads_as_an_attribute_and_a_misspelt_name_raises():
    from ctxvar.stats.sums import LayerSums

    sums = LayerSums.of(0, np.array(["a"]), np.array([2]), sum=np.ones((1, D)), sum_sq=np.full(1, 4.0))
    assert sums.sum_sq[0] == 4.0 and sums.sum_unit is None  # declared, not kept: None
    assert list(sums.sums) == ["sum_sq", "sum"]  # declaration order, whatever the keywords' order
    with pytest.raises(AttributeError, match="sum_sqq"):
        sums.sum_sqq  # noqa: B018


def test_a_misspelt_sum_given_by_name_raises_instead_of_being_dropped():
    from ctxvar.stats.sums import LayerSums

    with pytest.raises(TypeError, match="no declared sum is named sum_unti"):
        LayerSums.of(
            0, np.array(["a"]), np.array([2]), sum=np.ones((1, D)), sum_sq=np.ones(1), sum_unti=np.ones((1, D))
        )


def test_sums_moments_and_sample_files_hold_vectors_as_fixed_size_binary_read_back_bit_for_bit(tmp_path):
    """Σx as d little-endian float64 in one value per row, no nulls, the layout named: whatever the values, they
    come back with the same bits, signed zeros, subnormals, infinities and NaN payloads included."""
    special = np.array([0.0, -0.0, 5e-324, -2.2e-308, 1.7e308, np.inf, -np.inf, np.nan, 1 / 3, -2.5])
    special[7] = np.frombuffer(np.uint64(0x7FF8DEADBEEF0001).tobytes(), np.float64)[0]  # a NaN with a payload
    by_layer = [np.stack([np.roll(special, shift + 3 * layer) for shift in range(3)]) for layer in (0, 1)]
    with np.errstate(over="ignore"):  # 1.7e308 becomes inf, 5e-324 becomes 0: still special values
        points = [rows.astype(np.float32) for rows in by_layer[::-1]]
    metadata = {"n_layers": 2, "shard": 0}
    types = np.array(["a", "b", "c"], object)
    kept = kept_sums({"cosine": True})  # every sum of the file holds special values; Σx and Σ x/‖x‖ other ones

    def special_sums(rows):
        return {
            item.name: np.roll(rows, index, axis=0) if item.vector else rows[:, index]
            for index, item in enumerate(kept)
        }

    layers = [LayerSums.of(i, types, np.arange(1, 4), **special_sums(rows)) for i, rows in enumerate(by_layer)]
    write_sums(tmp_path / "s.parquet", layers, 10, metadata)
    per_layer = {item.name: 0.0 if not item.vector else np.zeros(10) for item in kept_layer_sums({})}
    with_moments = moments_schema(10, metadata, layer_sums=per_layer)
    with LayerWriter(tmp_path / "m.parquet", with_moments) as writer:
        for i, rows in enumerate(by_layer):
            writer.write(moments_table(i, 7, rows[i], np.resize(rows, (10, 10)), with_moments, per_layer))
    where = {"key": np.arange(3, dtype=np.uint64), "sentence_id": np.arange(3), "window": np.zeros(3, np.int32)}
    where |= {"position": np.arange(3, dtype=np.int32), "token": types}
    with_sample = sample_file.sample_schema(10, metadata)
    with LayerWriter(tmp_path / "x.parquet", with_sample) as writer:
        for i in (0, 1):
            writer.write(sample_file.sample_table(i, where, points[i], with_sample))

    def bits(array):
        return np.ascontiguousarray(array).tobytes()

    sums = SumsFile(tmp_path / "s.parquet")
    assert sums._file.layout == SUMS_LAYOUT
    vectors = [sums._file.schema.field(item.name) for item in kept if item.vector]
    assert all(field.type == pa.binary(80) and not field.nullable for field in vectors)
    for i, rows in enumerate(by_layer):
        got = sums.layer(i)
        assert all(bits(got.sums[name]) == bits(values) for name, values in special_sums(rows).items())
        n, total, outer = MomentsFile(tmp_path / "m.parquet").layer(i)
        assert n == 7 and bits(total) == bits(rows[i]) and bits(outer) == bits(np.resize(rows, (10, 10)))
        sample = SampleFile(tmp_path / "x.parquet").layer(i)
        assert sample.schema.field("x").type == pa.binary(40) and bits(points_of(sample)) == bits(points[i])


FORKED_READERS = """
import json, os, sys
from ctxvar.stats.sums import SumsFile
path, n = sys.argv[1], int(sys.argv[2])
readers = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:  # a reader: reads the layers, then exits as any process does (interpreter shutdown, exit())
        f = SumsFile(path); f.layer(0); f.layer(2)
        sys.exit(0)
    readers.append(pid)
print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in readers]))
"""


@pytest.mark.integration  # thirty processes: seconds, where the other tests here take milliseconds
def test_processes_that_read_sums_exit_cleanly(tmp_path):
    """Arrow's thread pool reading through a Python file made 3-10 % of processes abort at exit (status 134,
    "terminate called without an active exception"), after their work was done; 30 readers must all exit 0.
    The readers are forked from one fresh process that has imported ctxvar, so that each pays for its read and
    its exit, where the abort happened, and not for the imports; Arrow starts its thread pool anew in each."""
    import json
    import subprocess
    import sys

    from ctxvar.stats.sums import write_sums

    rng = np.random.default_rng(0)
    types, vectors = np.array([f"t{i}" for i in range(3000)], dtype=object), rng.standard_normal((3000, 256))
    layers = (layer_sums_of(i, types, np.arange(3000), vectors, {"cosine": True}) for i in range(3))
    write_sums(tmp_path / "s.parquet", layers, 256, {"n_layers": 3})
    run = subprocess.run(  # the readers run at once: each exits on its own, and the machine's cores are all busy
        [sys.executable, "-c", FORKED_READERS, str(tmp_path / "s.parquet"), "30"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == [0] * 30, run.stderr[-3000:]
