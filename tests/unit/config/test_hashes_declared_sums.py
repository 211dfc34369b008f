"""The extraction hash holds every declared sum a run keeps: a new or changed sum re-extracts what it changes, and
only that; a run that keeps the first three sums keeps the hash it had before the sums entered it."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from ctxvar.config.entries import models_by_id
from ctxvar.config.hashes import extraction_config_hash
from ctxvar.stats import declarations
from ctxvar.stats.declarations import LayerColumn, LayerSum, TypeSum, hashed_sums

from support.workflow_runs import DEMO

# The demo's hashes as ctxvar computed them before the declared sums entered the hash (its partials keep them).
DEMO_HASHES = {
    False: {
        "tiny-bert": "c5977f19ab4bf281",
        "tiny-roberta": "d6797236a10de261",
        "gaussian-null": "460851c710c93dc3",
        "trained-gpt2@step0": "a0612b8270d08bf3",
        "trained-gpt2@step100": "9aa7d42a9c58d20f",
        "trained-gpt2@step400": "736115cefaad95e2",
    },
    True: {
        "tiny-bert": "71a03a2fffc759e2",
        "tiny-roberta": "1a3e27282504e261",
        "gaussian-null": "6b3f4e4fd692c63b",
        "trained-gpt2@step0": "cda8d6226f028813",
        "trained-gpt2@step100": "ed65f7d90c34e67d",
        "trained-gpt2@step400": "412f354d70253322",
    },
}


def demo_hashes(cosine: bool) -> dict[str, str]:
    """Each demo model's extraction hash, with geometry.cosine as given, as the workflow computes it."""
    config = copy.deepcopy(DEMO)
    config["geometry"] = {**config["geometry"], "cosine": cosine}
    return {
        model: extraction_config_hash(config, entry, hashed_sums(config["geometry"]))
        for model, entry in models_by_id(config).items()
    }


def fourth_power(switch: str | None) -> TypeSum:
    return TypeSum("sum_fourth_test", "Σ‖x‖⁴", vector=False, switch=switch, values=lambda chunk: chunk.sq_norm**2)


@pytest.fixture
def first_sums(monkeypatch):
    """The registries holding the first three sums alone, as they were before any other was declared."""
    first = {(kind, name) for kind, name, *_ in declarations.FIRST_SUMS}
    monkeypatch.setattr(
        declarations, "TYPE_SUMS", tuple(i for i in declarations.TYPE_SUMS if ("type", i.name) in first)
    )
    monkeypatch.setattr(declarations, "LAYER_SUMS", ())


@pytest.mark.parametrize("cosine", [False, True])
def test_a_run_of_the_first_sums_keeps_its_hash(first_sums, cosine):
    assert hashed_sums({"cosine": cosine}) == []
    assert demo_hashes(cosine) == DEMO_HASHES[cosine]


@pytest.mark.parametrize("cosine", [False, True])
def test_the_declared_sums_re_extract_a_run_exactly_when_they_add_to_the_first(cosine):
    unchanged = demo_hashes(cosine) == DEMO_HASHES[cosine]
    assert unchanged is (hashed_sums({"cosine": cosine}) == [])


def test_a_new_sum_kept_always_re_extracts_every_model(first_sums, monkeypatch):
    monkeypatch.setattr(declarations, "TYPE_SUMS", (*declarations.TYPE_SUMS, fourth_power(None)))
    assert hashed_sums({}) == [["type", "sum_fourth_test", "Σ‖x‖⁴", False]]
    for cosine in (False, True):
        changed = demo_hashes(cosine)
        assert all(changed[model] != DEMO_HASHES[cosine][model] for model in changed)


def test_a_sum_behind_a_switch_re_extracts_only_the_runs_that_turn_it_on(first_sums, monkeypatch):
    monkeypatch.setattr(declarations, "TYPE_SUMS", (*declarations.TYPE_SUMS, fourth_power("cosine")))
    assert demo_hashes(False) == DEMO_HASHES[False]
    assert all(demo_hashes(True)[model] != hash_ for model, hash_ in DEMO_HASHES[True].items())


def test_a_changed_formula_or_a_per_layer_sum_re_extracts(first_sums, monkeypatch):
    first = declarations.TYPE_SUMS
    renamed = dataclasses.replace(first[0], formula="Σ‖x‖₂²")
    monkeypatch.setattr(declarations, "TYPE_SUMS", (renamed, *declarations.TYPE_SUMS[1:]))
    assert hashed_sums({}) == [["type", "sum_sq", "Σ‖x‖₂²", False]]
    assert demo_hashes(False)["tiny-bert"] != DEMO_HASHES[False]["tiny-bert"]
    monkeypatch.setattr(declarations, "TYPE_SUMS", first)
    per_layer = LayerSum(
        "sum_fourth_all_test",
        "Σ‖x‖⁴ over the layer's tokens",
        vector=False,
        switch=None,
        values=lambda chunk: chunk.sq_norm**2,
        columns=(LayerColumn("mean_fourth_power_test", "mean ‖x‖⁴", lambda c: c["sum_fourth_all_test"] / c["n"]),),
    )
    monkeypatch.setattr(declarations, "LAYER_SUMS", (per_layer,))
    assert hashed_sums({}) == [["layer", "sum_fourth_all_test", "Σ‖x‖⁴ over the layer's tokens", False]]
    assert demo_hashes(False)["tiny-bert"] != DEMO_HASHES[False]["tiny-bert"]
