"""A new sum is one declaration: registered, it is accumulated, written to the partials, merged, finalized into
tokens.parquet (per type) or geometry.csv (per layer), counted by the device budget and the disk estimate, and listed
in the docs' rows.

The per-type example is the architecture page's: Σ‖x‖⁴ per type, finalized as the mean fourth power of the norm.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxvar.extraction import accumulator
from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.budget import state_bytes
from ctxvar.run import disk
from ctxvar.run.resources import ModelShape
from ctxvar.stats import declarations
from ctxvar.stats.declarations import LayerColumn, LayerSum, TokenColumn, TypeSum
from ctxvar.stats.sums import SumsFile

from support.pipeline_runs import TEST_DEVICE

# Against the brute-force oracle, which runs on the CPU: there the pipeline agrees to 1e-9; a GPU's fp32 kernels
# agree with the CPU's to the suite's 1e-6 of Q, and ‖x‖⁴ = Q² doubles a relative error.
ORACLE_RTOL = 1e-9 if TEST_DEVICE == "cpu" else 2e-6

FOURTH_POWER = TypeSum(
    "sum_fourth",
    "Σ‖x‖⁴",
    vector=False,
    switch=None,
    values=lambda chunk: chunk.sq_norm**2,
    columns=(TokenColumn("Q4", "mean ‖x‖⁴ of the type's occurrences", lambda c: c["sum_fourth"] / c["n"]),),
)


def without(registry: tuple, name: str) -> tuple:
    """``registry`` without the declaration named ``name``, which the recipe may have declared for good already."""
    return tuple(item for item in registry if item.name != name)


@pytest.fixture
def with_fourth_power(monkeypatch):
    """The registry with Σ‖x‖⁴ declared after the other sums (for this test only, unless the recipe declared it)."""
    monkeypatch.setattr(declarations, "TYPE_SUMS", (*without(declarations.TYPE_SUMS, "sum_fourth"), FOURTH_POWER))


def run(tmp_path, tiny_models, texts, n_shards):
    from support.pipeline_runs import run_geometry_pipeline

    folder = tmp_path / f"shards{n_shards}"
    folder.mkdir()
    return run_geometry_pipeline(folder, tiny_models["bert"], texts, n_shards, GeometryOptions(cosine=True))


def test_a_declared_sum_goes_through_extraction_merge_and_finalize(
    with_fourth_power, tmp_path, tiny_models, corpus_texts
):
    from support.oracle import brute_force_embeddings

    texts = corpus_texts[:60]
    one, three = run(tmp_path, tiny_models, texts, 1), run(tmp_path, tiny_models, texts, 3)
    kept = declarations.kept_sums({"cosine": True})
    assert kept[-1] is FOURTH_POWER
    for files in (one, three):
        assert SumsFile(files["stats"]).sum_names == tuple(item.name for item in kept)
    tokens = pd.read_parquet(one["tokens"])
    assert list(tokens.columns) == [
        "layer",
        "token",
        "n",
        *(column.name for column in declarations.token_columns(kept)),
    ]

    keys, X = brute_force_embeddings(tiny_models["bert"], texts)
    fourth = (X**2).sum(-1) ** 2  # (layers, occurrences)
    expected = pd.DataFrame(
        [(layer, key, fourth[layer, keys == key].mean()) for layer in range(X.shape[0]) for key in np.unique(keys)],
        columns=["layer", "token", "Q4_oracle"],
    )
    merged = tokens.merge(expected, on=["layer", "token"], how="outer", indicator=True)
    assert (merged["_merge"] == "both").all()
    np.testing.assert_allclose(merged["Q4"], merged["Q4_oracle"], rtol=ORACLE_RTOL)

    three_tokens = pd.read_parquet(three["tokens"])  # shard-invariant: the same sums, added in another grouping
    np.testing.assert_allclose(three_tokens["Q4"], tokens["Q4"], rtol=1e-12)
    assert (three_tokens["n"] == tokens["n"]).all()


def test_a_declared_sum_is_in_the_budget_the_disk_estimate_and_the_docs(monkeypatch):
    options, geometry = GeometryOptions(cosine=True), {"cosine": True, "covariance": False, "twonn": False}
    geometry |= {"ethayarajh": False, "sample_size": 0}
    shape = ModelShape(n_layers=4, d=32, vocab_size=500)
    monkeypatch.setattr(declarations, "TYPE_SUMS", without(declarations.TYPE_SUMS, "sum_fourth"))
    before = state_bytes(4, 100, 32, options), disk.sums_bytes(1000, shape, geometry), disk.token_table_row(geometry)
    sums_rows, column_rows = declarations.docs_rows()
    monkeypatch.setattr(declarations, "TYPE_SUMS", (*declarations.TYPE_SUMS, FOURTH_POWER))
    after = state_bytes(4, 100, 32, options), disk.sums_bytes(1000, shape, geometry), disk.token_table_row(geometry)
    assert after[0] - before[0] == 8 * 4 * 100  # one float64 per (layer, type) on the device
    assert after[1] - before[1] == 8 * 4 * 500  # and on disk, for min(V, N) types
    assert after[2] - before[2] == 8  # one more float64 column in tokens.parquet
    assert accumulator.kept_sums(options)[-1] is FOURTH_POWER
    new_sums, new_columns = declarations.docs_rows()
    assert new_sums == [*sums_rows, "| | `sum_fourth` | float64 | Σ‖x‖⁴ |"]
    assert new_columns == [*column_rows, "| `Q4` | mean ‖x‖⁴ of the type's occurrences |"]


def test_a_switched_sum_is_kept_only_when_its_switch_is_on():
    always = [item.name for item in declarations.TYPE_SUMS if item.switch is None]
    assert [item.name for item in declarations.kept_sums(GeometryOptions())] == always
    cosine = [item.name for item in declarations.TYPE_SUMS if item.switch in (None, "cosine")]
    assert [item.name for item in declarations.kept_sums({"cosine": True})] == cosine
    assert "sum_unit" in cosine and "sum_unit" not in always


FOURTH_POWER_ALL = LayerSum(
    "sum_fourth_all",
    "Σ‖x‖⁴ over the layer's tokens",
    vector=False,
    switch=None,
    values=lambda chunk: chunk.sq_norm**2,
    columns=(
        LayerColumn("mean_fourth_power", "mean ‖x‖⁴ over the layer's tokens", lambda c: c["sum_fourth_all"] / c["n"]),
    ),
)
UNIT_ALL = LayerSum(
    "sum_unit_all",
    "Σ x/‖x‖ over the layer's tokens",
    vector=True,
    switch="cosine",
    values=lambda chunk: chunk.unit,
    columns=(
        LayerColumn(
            "mean_cosine_all",
            "mean cosine over distinct pairs, from Σ x/‖x‖",
            lambda c: (c["sum_unit_all"] @ c["sum_unit_all"] - c["n"]) / (c["n"] * (c["n"] - 1)),
        ),
    ),
)


@pytest.fixture
def with_layer_sums(monkeypatch):
    """The registry with two per-layer sums declared (for this test only): a number and a d-vector."""
    monkeypatch.setattr(declarations, "LAYER_SUMS", (FOURTH_POWER_ALL, UNIT_ALL))


def test_declared_layer_sums_go_through_extraction_merge_and_finalize(
    with_layer_sums, tmp_path, tiny_models, corpus_texts
):
    from ctxvar.stats.geometry import geometry_table
    from ctxvar.stats.sums import MomentsFile

    from support.oracle import brute_force_embeddings

    texts = corpus_texts[:60]
    tables = {}
    for n_shards in (1, 3):
        files = run(tmp_path, tiny_models, texts, n_shards)  # cosine on, covariance off: the moments file for them
        moments = MomentsFile(files["moments"])
        assert not moments.has_outer and moments.layer_sum_names == ("sum_fourth_all", "sum_unit_all")
        tables[n_shards] = geometry_table(files["stats"], files["moments"], None, 4, 0, 0.0, 6.0)
    table = tables[1]
    assert list(table.columns[-3:]) == ["mean_fourth_power", "mean_cosine_all", "config_hash"]
    assert table["anisotropy"].isna().all()  # no Σxxᵀ without geometry.covariance

    _, X = brute_force_embeddings(tiny_models["bert"], texts)
    np.testing.assert_allclose(table["mean_fourth_power"], ((X**2).sum(-1) ** 2).mean(1), rtol=ORACLE_RTOL)
    np.testing.assert_allclose(table["mean_cosine_all"], table["mean_cosine"], rtol=1e-9, atol=1e-12)
    pd.testing.assert_frame_equal(tables[3], table, check_exact=False, rtol=1e-12)


def test_declared_layer_sums_are_in_the_budget_the_disk_estimate_and_the_docs(monkeypatch):
    geometry = {"cosine": True, "covariance": False, "twonn": False, "ethayarajh": False, "sample_size": 0}
    options, shape = GeometryOptions(cosine=True), ModelShape(n_layers=4, d=32, vocab_size=500)
    monkeypatch.setattr(declarations, "LAYER_SUMS", ())  # before: none declared (whatever the recipe declared)
    before = state_bytes(4, 100, 32, options), disk.sums_bytes(1000, shape, geometry)
    assert not options.moments and declarations.layer_docs_rows() == ([], [])
    monkeypatch.setattr(declarations, "LAYER_SUMS", (FOURTH_POWER_ALL, UNIT_ALL))
    after = state_bytes(4, 100, 32, options), disk.sums_bytes(1000, shape, geometry)
    assert options.moments
    assert after[0] - before[0] == 8 * 4 * (1 + 32)  # a number and a d-vector per layer on the device
    assert after[1] - before[1] == 4 * 32 * (18 + 8 * 2)  # the moments file: d rows per layer, two more columns
    sums_rows, column_rows = declarations.layer_docs_rows()
    unit_row = "Σ x/‖x‖ over the layer's tokens, component j on row j (`geometry.cosine` only)"
    assert sums_rows[1] == f"| | `sum_unit_all` | float64 | {unit_row} |"
    assert column_rows[0] == "| `mean_fourth_power` | mean ‖x‖⁴ over the layer's tokens | |"
