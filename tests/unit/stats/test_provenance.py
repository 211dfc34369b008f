"""Tables read together come from the same sums (ctxvar.stats.provenance): a half-finished run is refused."""

from __future__ import annotations

import pandas as pd
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.files.atomic import write_csv, write_json
from ctxvar.stats.provenance import check_same_sums, table_sums
from ctxvar.stats.summary import summary_tables


def model_files(folder, model: str, layers_hash: str, run_hash: str) -> tuple[str, str, str]:
    layers = folder / f"{model}-layers.csv"
    geometry = folder / f"{model}-geometry.csv"
    run = folder / f"{model}-run.json"
    write_csv(pd.DataFrame({"layer": [0, 1], "Q": [1.0, 2.0], "config_hash": layers_hash}), layers)
    write_csv(pd.DataFrame({"layer": [0, 1], "anisotropy": [0.1, 0.2], "config_hash": layers_hash}), geometry)
    write_json({"model_name": model, "config_hash": run_hash}, run)
    return str(layers), str(geometry), str(run)


def test_the_summary_refuses_a_model_whose_tables_come_from_other_sums(tmp_path):
    good = model_files(tmp_path, "a", "h1", "h1")
    stale = model_files(tmp_path, "b", "old", "new")  # merged again, layer statistics not re-run
    layers, geometry, models = summary_tables({"a": good[0]}, {"a": good[1]}, {"a": good[2]})
    assert layers["config_hash"].tolist() == ["h1", "h1"] and models["config_hash"].tolist() == ["h1"]
    expected = (
        r"model 'b': its files come from different sums \(.*b-run.json from sums new; "
        r".*b-layers.csv, .*b-geometry.csv from sums old\); finish the run"
    )
    with pytest.raises(StatisticsError, match=expected) as error:
        summary_tables({"a": good[0], "b": stale[0]}, {"a": good[1], "b": stale[1]}, {"a": good[2], "b": stale[2]})
    assert "\n" not in str(error.value)


def test_a_table_of_an_older_ctxvar_names_no_sums_and_is_refused():
    with pytest.raises(StatisticsError, match="layers.csv names no config_hash"):
        table_sums(pd.DataFrame({"layer": [0]}), "layers.csv")
    check_same_sums("m", {"x": {"h"}, "y": {"h"}})


def test_the_closing_lines_say_finished_only_when_every_output_is_current(tmp_path):
    from ctxvar.run.end import outdated_outputs, success_message

    folder = tmp_path / "results" / "study"
    (folder / "m").mkdir(parents=True)
    write_json({"config_hash": "new"}, folder / "m" / "run.json")
    write_csv(pd.DataFrame({"layer": [0], "config_hash": ["old"]}), folder / "m" / "layers.csv")
    finals = [str(folder / "m" / "layers.csv"), str(folder / "summary" / "models.csv")]
    outdated = outdated_outputs(finals, {"m": "new"}, str(folder))
    assert outdated == [str(folder / "summary" / "models.csv"), str(folder / "m" / "layers.csv")]
    text = success_message(folder, ["m"], "snakemake --report r.html", outdated=outdated)
    assert "not all current" in text.splitlines()[0] and "finished" not in text.splitlines()[0]
    assert "outdated    " in text and "without --until" in text
    write_csv(pd.DataFrame({"layer": [0], "config_hash": ["new"]}), folder / "m" / "layers.csv")
    assert outdated_outputs(finals[:1], {"m": "new"}, str(folder)) == []
    assert (
        success_message(folder, ["m"], "snakemake --report r.html").splitlines()[0].startswith("==== ctxvar: finished")
    )
