"""A new per-(layer, type) sum is one declaration: registered, it is accumulated, written to the partials, merged,
finalized into tokens.parquet, counted by the device budget and the disk estimate, and listed in the docs' rows.

The example is the architecture page's: Σ‖x‖⁴ per type, finalized as the mean fourth power of the norm.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxvar import disk
from ctxvar.extraction import accumulator
from ctxvar.extraction.accumulator import GeometryOptions, state_bytes
from ctxvar.resources import ModelShape
from ctxvar.stats import declarations
from ctxvar.stats.declarations import TokenColumn, TypeSum
from ctxvar.stats.sums import SumsFile

FOURTH_POWER = TypeSum(
    "sum_fourth",
    "Σ‖x‖⁴",
    vector=False,
    switch=None,
    values=lambda chunk: chunk.sq_norm**2,
    columns=(TokenColumn("Q4", "mean ‖x‖⁴ of the type's occurrences", lambda c: c["sum_fourth"] / c["n"]),),
)


@pytest.fixture
def with_fourth_power(monkeypatch):
    """The registry with Σ‖x‖⁴ declared after the built-in sums (for this test only)."""
    monkeypatch.setattr(declarations, "TYPE_SUMS", (*declarations.TYPE_SUMS, FOURTH_POWER))


def run(tmp_path, tiny_models, texts, n_shards):
    from pipeline_runs import run_geometry_pipeline

    folder = tmp_path / f"shards{n_shards}"
    folder.mkdir()
    return run_geometry_pipeline(folder, tiny_models["bert"], texts, n_shards, GeometryOptions(cosine=True))


def test_a_declared_sum_goes_through_extraction_merge_and_finalize(
    with_fourth_power, tmp_path, tiny_models, corpus_texts
):
    from oracle import brute_force_embeddings

    texts = corpus_texts[:60]
    one, three = run(tmp_path, tiny_models, texts, 1), run(tmp_path, tiny_models, texts, 3)
    for files in (one, three):
        stats = SumsFile(files["stats"])
        assert stats.sum_names == ("sum_sq", "sum", "sum_unit", "sum_fourth")
    tokens = pd.read_parquet(one["tokens"])
    assert list(tokens.columns) == ["layer", "token", "n", "Q", "M", "V", "self_similarity", "Q4"]

    keys, X = brute_force_embeddings(tiny_models["bert"], texts)
    fourth = (X**2).sum(-1) ** 2  # (layers, occurrences)
    expected = pd.DataFrame(
        [(layer, key, fourth[layer, keys == key].mean()) for layer in range(X.shape[0]) for key in np.unique(keys)],
        columns=["layer", "token", "Q4_oracle"],
    )
    merged = tokens.merge(expected, on=["layer", "token"], how="outer", indicator=True)
    assert (merged["_merge"] == "both").all()
    np.testing.assert_allclose(merged["Q4"], merged["Q4_oracle"], rtol=1e-9)

    three_tokens = pd.read_parquet(three["tokens"])  # shard-invariant: the same sums, added in another grouping
    np.testing.assert_allclose(three_tokens["Q4"], tokens["Q4"], rtol=1e-12)
    assert (three_tokens["n"] == tokens["n"]).all()


def test_a_declared_sum_is_in_the_budget_the_disk_estimate_and_the_docs(monkeypatch):
    options, geometry = GeometryOptions(cosine=True), {"cosine": True, "covariance": False, "twonn": False}
    geometry |= {"ethayarajh": False, "sample_size": 0}
    shape = ModelShape(n_layers=4, d=32, vocab_size=500)
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
    assert [item.name for item in declarations.kept_sums(GeometryOptions())] == ["sum_sq", "sum"]
    assert [item.name for item in declarations.kept_sums({"cosine": True})] == ["sum_sq", "sum", "sum_unit"]
