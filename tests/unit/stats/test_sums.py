"""A sums file's columns: the older ctxvar's layout (layer, token, n, then the declared sums) reads and merges;
the same sums in another column order merge to the same tables; a file lacking a sum every sums file holds, or
holding a column no declaration names or one of the wrong width, is refused with one line, not a KeyError."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.files.parquet import tagged_schema, vector_column
from ctxvar.stats.declarations import declared, kept_sums, token_columns
from ctxvar.stats.merge import merge_partials
from ctxvar.stats.sums import SUMS_LAYOUT, LayerWriter, SumsFile

from support.declared_sums import COSINE, chunk_of, sum_names, type_sum

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
