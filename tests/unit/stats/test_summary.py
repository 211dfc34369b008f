"""The summary tables (ctxvar.stats.summary). Summary tables that are not the models' tables as they are now are
outdated: a run with a target or --until that re-made a model's geometry.csv (say after geometry.spectrum_k changed,
which the sums do not carry) left summary/geometry.csv with the old columns; the closing lines said "finished" and
load_results returned it. Checkpoints that load identical weights are flagged and logged."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.files.atomic import write_csv, write_json
from ctxvar.results import check_summary_current
from ctxvar.run.end import outdated_outputs
from ctxvar.stats.summary import models_table, summary_tables


def finished_run(folder):
    """A run folder with two models' tables and the summary made from them."""
    for model in ("a", "b"):
        (folder / model).mkdir(parents=True)
        layers = pd.DataFrame({"layer": [0, 1], "Q": [0.5, float("nan")], "config_hash": "h"})
        write_csv(layers, folder / model / "layers.csv")
        geometry = pd.DataFrame({"layer": [0, 1], "final_norm": [False, True], "explained_1": [0.1, 0.2]})
        write_csv(geometry.assign(config_hash="h"), folder / model / "geometry.csv")
    (folder / "summary").mkdir()
    tables = {name: {m: str(folder / m / name) for m in "ab"} for name in ("layers.csv", "geometry.csv")}
    layers, geometry, _ = summary_tables(
        tables["layers.csv"], tables["geometry.csv"], {m: write_run_json(folder, m) for m in "ab"}
    )
    write_csv(layers, folder / "summary" / "layers.csv")
    write_csv(geometry, folder / "summary" / "geometry.csv")
    return [str(folder / "summary" / name) for name in ("layers.csv", "geometry.csv")]


def write_run_json(folder, model) -> str:
    from ctxvar.files.atomic import write_json

    write_json({"model_name": model, "config_hash": "h"}, folder / model / "run.json")
    return str(folder / model / "run.json")


def test_a_current_summary_is_current(tmp_path):
    finals = finished_run(tmp_path)
    assert outdated_outputs(finals, {"a": "h", "b": "h"}, str(tmp_path)) == []
    check_summary_current(tmp_path, ["a", "b"])


def test_a_per_model_table_re_made_since_makes_the_summary_outdated(tmp_path):
    finals = finished_run(tmp_path)
    fewer = pd.DataFrame({"layer": [0, 1], "final_norm": [False, True], "explained_1": [0.1, 0.25]})
    write_csv(fewer.assign(config_hash="h"), tmp_path / "b" / "geometry.csv")  # same sums, other numbers
    assert outdated_outputs(finals, {"a": "h", "b": "h"}, str(tmp_path)) == [str(tmp_path / "summary" / "geometry.csv")]
    with pytest.raises(StatisticsError, match=r"summary/geometry.csv is not the models' geometry.csv as they are now"):
        check_summary_current(tmp_path, ["a", "b"])


def test_a_model_left_out_of_the_summary_makes_it_outdated(tmp_path):
    finals = finished_run(tmp_path)
    assert len(outdated_outputs(finals, {"a": "h"}, str(tmp_path))) == 2


def test_models_csv_says_whether_each_model_is_an_encoder_or_a_decoder(tmp_path):
    """From each run.json's ``attention``; empty for sums extracted before it was recorded."""
    from ctxvar.files.atomic import write_json
    from ctxvar.stats.summary import models_table

    runs = {}
    for model, attention in (("bert", "bidirectional"), ("gpt2", "causal"), ("null", "none"), ("older", None)):
        (tmp_path / model).mkdir()
        record = {"model_name": model, "config_hash": "h", **({"attention": attention} if attention else {})}
        write_json(record, tmp_path / model / "run.json")
        runs[model] = str(tmp_path / model / "run.json")
    table = models_table(runs)
    assert table["attention"].tolist()[:3] == ["bidirectional", "causal", "none"] and pd.isna(table["attention"][3])


def test_identical_weights_are_flagged_and_logged(tmp_path, caplog):
    runs = {}
    for model, digest in (("p@step0", "aa"), ("p@step1", "bb"), ("p@step2", "bb")):
        runs[model] = tmp_path / f"{model}.json"
        write_json({"weights_sha256": digest}, runs[model])
    with caplog.at_level(logging.WARNING):
        table = models_table(runs, {m: "p" for m in runs})
    assert list(table["same_weights_as"]) == ["", "p@step2", "p@step1"]
    assert "p@step1, p@step2 load identical weights" in caplog.text
