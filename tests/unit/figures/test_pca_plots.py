"""Unit tier: Figs. 1 and 8 and Table 2 (ctxvar.figures.pca_plots), from the files the PCA jobs write: a selection
made from other sums than the model's tokens.parquet is refused."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.figures.pca_plots import pca_outputs
from ctxvar.figures.pca_selection import SELECTION_COLUMNS
from ctxvar.files.atomic import write_csv
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
