"""Unit tier: Figs. 1 and 8 and Table 2 (ctxvar.figures.pca_plots), from the files the PCA jobs write: a selection
made from other sums than the model's tokens.parquet is refused; an empty one, of a corpus too small for it, makes
placeholders that say why and an empty Table 2, with a warning."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pandas as pd
import pyarrow as pa
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.figures.pca_plots import NO_SELECTION, pca_outputs
from ctxvar.figures.pca_selection import SELECTION_COLUMNS
from ctxvar.files.atomic import read_csv, write_csv
from ctxvar.files.parquet import write_table
from ctxvar.stats.provenance import FINISH


def test_the_pca_figures_refuse_a_selection_made_from_other_sums(tmp_path):
    """Figs. 1 and 8 and Table 2 read the model's selection.csv beside its tokens.parquet."""
    tokens = pa.table({"layer": pa.array([0], pa.int16()), "token": ["x"], "n": [3], "Q": [0.5], "M": [0.1]})
    write_table(tokens.append_column("V", pa.array([0.4])), tmp_path / "tokens.parquet", {"config_hash": "now"})
    row = {"layer": 0, "token": "x", "n": 3, "Q": 0.5, "M": 0.1, "V": 0.4, "bin": 0, "pc1": 0.0, "pc2": 0.0}
    write_csv(pd.DataFrame([row], columns=SELECTION_COLUMNS).assign(config_hash="before"), tmp_path / "selection.csv")
    with pytest.raises(StatisticsError) as error:
        pca_outputs(
            tmp_path / "points.parquet",
            tmp_path / "selection.csv",
            tmp_path / "components.csv",
            tmp_path / "tokens.parquet",
            "m",
            {},
            None,
        )
    message = str(error.value)
    assert message.startswith("model 'm': its files come from different sums") and message.endswith(FINISH)
    assert f"{tmp_path / 'selection.csv'} from sums before" in message


def test_an_empty_selection_makes_placeholders_that_say_why_and_an_empty_table_2(tmp_path, caplog):
    """No type passes the selection of a tiny corpus: selection.csv has no row but names the sums of its tokens
    (ctxvar.figures.pca_selection), the extraction collects no point, and the job writes every file it promises."""
    tokens = {"layer": pa.array([0], pa.int16()), "token": ["x"], "n": [3], "Q": [0.5], "M": [0.1], "V": [0.4]}
    write_table(pa.table(tokens), tmp_path / "tokens.parquet", {"config_hash": "now"})
    write_csv(pd.DataFrame(columns=SELECTION_COLUMNS).assign(config_hash="now"), tmp_path / "selection.csv")
    names = {"fig01": "fig01_pca", "fig08": "fig08_selected_tokens"}
    kinds = {"": ".png", "_pdf": ".pdf", "_data": ".csv"}  # pca.smk's outputs: fig01, fig01_pdf, fig01_data, ...
    files = {f"{key}{kind}": tmp_path / f"{name}{end}" for key, name in names.items() for kind, end in kinds.items()}
    outputs = SimpleNamespace(**files, table2=tmp_path / "table2.csv", table2_tex=tmp_path / "table2.tex")
    with caplog.at_level(logging.WARNING, logger="ctxvar"):
        pca_outputs(
            tmp_path / "points.parquet",  # none: the points are not read
            tmp_path / "selection.csv",
            tmp_path / "components.csv",
            tmp_path / "tokens.parquet",
            "m",
            {},
            outputs,
        )
    for key, name in names.items():
        assert read_csv(files[f"{key}_data"]).to_dict("list") == {"figure": [name], "not_drawn": [NO_SELECTION]}
        assert files[key].stat().st_size and files[f"{key}_pdf"].stat().st_size
    table2 = read_csv(outputs.table2)
    assert table2.empty and {"token", "n"} <= set(table2.columns)
    assert outputs.table2_tex.read_text() == f"% Table 2 of m: {NO_SELECTION}\n"
    assert "figures fig01_pca and fig08_selected_tokens not drawn" in caplog.text
