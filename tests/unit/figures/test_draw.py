"""Figures refuse tables of one model from different sums, as the summary does: the checkpoint figure joins each
checkpoint's layers.csv and geometry.csv by layer; every other figure draws from one table per model."""

from __future__ import annotations

import pandas as pd
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.figures.catalogue import GEOMETRY_MODEL_FIGURES, GEOMETRY_SUMMARY_FIGURES, MODEL_FIGURES, SUMMARY_FIGURES
from ctxvar.figures.draw import checkpoint_figure
from ctxvar.files.atomic import write_csv
from ctxvar.stats.provenance import FINISH

STEPS = {"m@step0": 0, "m@step100": 100}


def checkpoint_tables(folder, geometry_sums: dict[str, str]) -> tuple[list[str], list[str]]:
    """Each checkpoint's layers.csv (from sums "h-{model}") and geometry.csv (from ``geometry_sums[model]``)."""
    layers_paths, geometry_paths = [], []
    for model in STEPS:
        (folder / model).mkdir(parents=True)
        layers = pd.DataFrame(
            {"layer": range(3), "final_norm": False, "cv_Q": 0.5, "M": 1.0, "Q": 2.0, "config_hash": f"h-{model}"}
        )
        geometry = pd.DataFrame(
            {"layer": range(3), "anisotropy": 0.3, "twonn": 7.0, "config_hash": geometry_sums[model]}
        )
        write_csv(layers, folder / model / "layers.csv")
        write_csv(geometry, folder / model / "geometry.csv")
        layers_paths.append(str(folder / model / "layers.csv"))
        geometry_paths.append(str(folder / model / "geometry.csv"))
    return layers_paths, geometry_paths


def test_the_checkpoint_figure_draws_tables_of_the_same_sums(tmp_path):
    layers, geometry = checkpoint_tables(tmp_path, {model: f"h-{model}" for model in STEPS})
    plot = checkpoint_figure("m", STEPS, layers, geometry)
    assert set(plot.data["model"]) == set(STEPS)


def test_the_checkpoint_figure_refuses_a_geometry_of_other_sums_naming_both_files(tmp_path):
    layers, geometry = checkpoint_tables(tmp_path, {"m@step0": "h-m@step0", "m@step100": "older"})
    with pytest.raises(StatisticsError) as error:
        checkpoint_figure("m", STEPS, layers, geometry)
    message = str(error.value)
    assert message.startswith("model 'm@step100': its files come from different sums")
    assert layers[1] in message and geometry[1] in message and message.endswith(FINISH) and "\n" not in message


def test_every_other_figure_draws_one_table_per_model():
    """Why no other figure checks: a model figure reads one of its tables, a summary figure one stacked summary
    table (checked when the summary is made) or one tokens.parquet per model."""
    for spec in {**MODEL_FIGURES, **GEOMETRY_MODEL_FIGURES, **SUMMARY_FIGURES, **GEOMETRY_SUMMARY_FIGURES}.values():
        assert len(spec.needs) == 1, spec


def test_the_pca_figures_refuse_a_selection_made_from_other_sums(tmp_path):
    """Figs. 1 and 8 and Table 2 read the model's selection.csv beside its tokens.parquet."""
    import pyarrow as pa

    from ctxvar.figures.pca_plots import pca_outputs
    from ctxvar.figures.pca_selection import SELECTION_COLUMNS
    from ctxvar.files.parquet import write_table

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


def test_a_selection_names_the_sums_of_the_tokens_it_was_selected_from(tmp_path, monkeypatch):
    """Even when no type can be selected (its empty selection.csv still has the column)."""
    import pyarrow as pa

    from ctxvar.figures import pca_selection
    from ctxvar.files.parquet import write_table

    tokens = pa.table({"layer": pa.array([0], pa.int16()), "token": ["x"], "n": [3], "Q": [0.5], "M": [0.1]})
    write_table(tokens.append_column("V", pa.array([0.4])), tmp_path / "tokens.parquet", {"config_hash": "now"})
    selected = pd.DataFrame([{c: 0 for c in pca_selection.SELECTION_COLUMNS}])
    monkeypatch.setattr(pca_selection, "selection", lambda *args: (selected, __import__("numpy").zeros((2, 4))))
    table, _ = pca_selection.select_pca_tokens("stats", tmp_path / "tokens.parquet", {"layer": 0}, {})
    assert table["config_hash"].tolist() == ["now"]

    def too_few(*args):
        raise pca_selection.InsufficientData("no type")

    monkeypatch.setattr(pca_selection, "selection", too_few)
    table, components = pca_selection.select_pca_tokens("stats", tmp_path / "tokens.parquet", {"layer": 0}, {})
    assert table.empty and "config_hash" in table.columns and components.empty
