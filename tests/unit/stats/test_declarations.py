"""A sum declared with a new ``geometry`` switch is kept by the extraction job exactly when the config turns the
switch on: the job's options (GeometryOptions, built from the config) agree with the config, which the workflow,
the disk estimate and the merge read. The options hold every switch in one set."""

from __future__ import annotations

import pytest

from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.stats import declarations
from ctxvar.stats.declarations import LayerSum, TypeSum, keeps_moments, kept_layer_sums, kept_sums, sums_files

FOURTH_POWER = TypeSum("sum_fourth", "Σ‖x‖⁴", vector=False, switch="fourth", values=lambda chunk: chunk.sq_norm**2)
LAYER_FOURTH = LayerSum("layer_fourth", "Σ‖x‖⁴", vector=False, switch="layer_fourth", values=lambda c: c.sq_norm**2)
GEOMETRY = {"covariance": False, "cosine": True, "twonn": False, "sample_size": 0, "ethayarajh": False}


@pytest.fixture
def with_new_switches(monkeypatch):
    monkeypatch.setattr(declarations, "TYPE_SUMS", (*declarations.TYPE_SUMS, FOURTH_POWER))
    monkeypatch.setattr(declarations, "LAYER_SUMS", (*declarations.LAYER_SUMS, LAYER_FOURTH))


@pytest.mark.parametrize("on", [True, False])
def test_the_options_keep_what_the_config_keeps(with_new_switches, on):
    geometry = {**GEOMETRY, "fourth": on, "layer_fourth": on}
    options = GeometryOptions.from_config(geometry)
    assert kept_sums(options) == kept_sums(geometry)
    assert (FOURTH_POWER in kept_sums(options)) is on
    assert kept_layer_sums(options) == kept_layer_sums(geometry)
    assert (LAYER_FOURTH in kept_layer_sums(options)) is on
    assert options.moments == keeps_moments(geometry)
    assert keeps_moments(geometry) is (on or bool(kept_layer_sums({**geometry, "layer_fourth": False})))


def test_the_shipped_switches_give_the_same_options():
    assert GeometryOptions.from_config(GEOMETRY) == GeometryOptions(cosine=True)


def test_the_sums_files_record_the_options_as_before_and_a_new_switch_as_json(with_new_switches):
    import json

    shipped = GeometryOptions.from_config({**GEOMETRY, "covariance": True, "twonn": True, "sample_size": 8})
    assert list(shipped.record().items()) == [  # as the first sums files' metadata: these keys in this order
        ("covariance", True),
        ("cosine", True),
        ("sample_size", 8),
        ("ethayarajh", False),
    ]
    new = GeometryOptions(cosine=True, switches=frozenset({"fourth"}))
    assert new == GeometryOptions(cosine=True, fourth=True) == GeometryOptions.from_config({**GEOMETRY, "fourth": True})
    assert json.loads(json.dumps(new.record())) == {**GeometryOptions(cosine=True).record(), "fourth": True}


def test_one_set_holds_every_switch_and_an_unknown_one_is_refused():
    options = GeometryOptions(covariance=True, ethayarajh=True, sample_size=4)
    assert options.switches == {"covariance", "ethayarajh"} and (options.covariance, options.cosine) == (True, False)
    with pytest.raises(TypeError, match="no geometry switch \\['fourth'\\]"):
        GeometryOptions(fourth=True)  # not declared here: a typo must not switch nothing on in silence


@pytest.mark.parametrize("covariance", [False, True])
@pytest.mark.parametrize("twonn", [False, True])
@pytest.mark.parametrize("ethayarajh", [False, True])
@pytest.mark.parametrize("layer_fourth", [False, True])
def test_the_workflow_and_the_job_name_the_same_files(with_new_switches, covariance, twonn, ethayarajh, layer_fourth):
    """The rules' outputs come from the config's mapping, the files the extraction job writes from its options:
    they must be the same kinds, or the job stops (extract_shard) or leaves an output unmade."""
    geometry = {
        **GEOMETRY,
        "covariance": covariance,
        "twonn": twonn,
        "sample_size": 16,
        "ethayarajh": ethayarajh,
        "layer_fourth": layer_fourth,
    }
    files = sums_files("p", geometry)
    assert sums_files("p", GeometryOptions.from_config(geometry)) == files
    assert list(files) == [
        kind
        for kind, kept in [
            ("moments", covariance or layer_fourth or any(item.switch is None for item in declarations.LAYER_SUMS)),
            ("words", ethayarajh),
            ("sentences", ethayarajh),
            ("sample", twonn),
        ]
        if kept
    ]
    assert all(path == f"p.{kind}.parquet" for kind, path in files.items())


def test_every_kind_of_file_beside_the_sums_has_a_merge():
    """sums_files names the kinds and merge_job merges those of LAYER_FILES: a kind in one list only would be
    written by the job and never merged, or merged from files no job writes."""
    from ctxvar.stats.merge import LAYER_FILES

    every_switch = {**GEOMETRY, "covariance": True, "twonn": True, "sample_size": 16, "ethayarajh": True}
    assert set(sums_files("p", every_switch)) == set(LAYER_FILES)
