"""Unit tier: the one draw entry (ctxvar.figures.draw), through which the workflow draws every figure but Figs. 1
and 8: a figure in a new scope, declared and nothing else, is drawn as its scope calls it; a figure whose data are
too few becomes a placeholder named as its file that says why, with a warning; a job's figures are each saved to
their own files, never under another's name, and an error names the figure it stopped at."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from ctxvar.errors import IntegrityError
from ctxvar.figures.draw import draw, draw_job
from ctxvar.files.atomic import write_csv

from support.figure_scopes import NEW_FIGURE, RUN, add_new_scope
from support.figure_tables import geometry_table


@pytest.fixture
def new_scope(monkeypatch):
    """The catalogue with :data:`NEW_FIGURE` in :data:`NEW_SCOPE`, as the workflow and the draw entry read it."""
    return add_new_scope(monkeypatch)


def test_a_figure_in_a_new_scope_is_drawn_by_the_draw_entry(new_scope, tmp_path):
    inputs = RUN.inputs(NEW_FIGURE, {"family": "dec"})
    for index, path in enumerate(inputs["layers"]):
        write_csv(pd.DataFrame({"layer": [0, 1], "Q": [1.0 + index, 2.0 + index]}), tmp_path / path)
    params = {"family": "dec", **RUN.params(NEW_FIGURE, {"family": "dec"})}
    plot = draw("layers_by_step", {"layers": [str(tmp_path / path) for path in inputs["layers"]]}, params)
    assert list(plot.data["model"]) == ["dec@s0", "dec@s0", "dec@s10", "dec@s10"]
    np.testing.assert_array_equal(plot.data["Q"], [1.0, 2.0, 2.0, 3.0])
    empty = draw("layers_by_step", {"layers": []}, {"family": "dec", "steps": {}})
    assert empty.data.to_dict("list") == {"figure": ["dec"], "not_drawn": ["no checkpoint"]}  # named as its file


def test_a_figure_whose_data_are_too_few_is_a_placeholder_that_says_why(tmp_path, caplog):
    """No layer of any model with a TwoNN dimension (too few distinct points in each sample): the job still writes
    the figure's files, a placeholder and its CSV, and the run goes on with a warning."""
    geometry = geometry_table(["a", "b"])
    geometry[["twonn", "twonn_gaussian"]] = np.nan
    write_csv(geometry, tmp_path / "geometry.csv")
    with caplog.at_level(logging.WARNING, logger="ctxvar"):
        plot = draw("geo03_intrinsic_dimension", {"geometry": str(tmp_path / "geometry.csv")}, {"models": ["a", "b"]})
    (reason,) = plot.data["not_drawn"]
    assert plot.data["figure"].tolist() == ["geo03_intrinsic_dimension"] and "TwoNN dimension" in reason
    assert [text.get_text() for text in plot.figure.texts] == [f"geo03_intrinsic_dimension: not drawn\n{reason}"]
    assert "figure geo03_intrinsic_dimension not drawn" in caplog.text


def test_a_job_saves_each_of_its_figures_to_its_own_files_and_names_the_one_it_stops_at(tmp_path):
    geometry = geometry_table(["a", "b"])
    geometry["twonn"] = np.nan  # geo03 a placeholder beside geo01 drawn
    write_csv(geometry, tmp_path / "geometry.csv")
    figures = {name: {"analysis": {}, "models": ["a", "b"]} for name in ("geo01_isotropy", "geo03_intrinsic_dimension")}
    outputs = [[tmp_path / "figures" / f"{name}.{ext}" for ext in ("png", "pdf", "csv")] for name in figures]
    inputs = {"geometry": str(tmp_path / "geometry.csv")}
    with pytest.raises(ValueError, match="figure geo01_isotropy would be saved as .*geo03_intrinsic_dimension.png"):
        draw_job(figures, inputs, {}, outputs[::-1])
    with pytest.raises(ValueError, match="figure geo03_intrinsic_dimension would be saved as .*geo01_isotropy.png"):
        draw_job(figures, inputs, {}, [outputs[0], outputs[0]])
    assert not (tmp_path / "figures").exists()  # refused before any figure is drawn
    draw_job(figures, inputs, {}, outputs)
    assert all(path.stat().st_size > 0 for files in outputs for path in files)
    assert set(pd.read_csv(outputs[0][2])["model"]) == {"a", "b"}
    assert pd.read_csv(outputs[1][2])["figure"].tolist() == ["geo03_intrinsic_dimension"]  # its placeholder
    with pytest.raises(IntegrityError) as error:
        draw_job(figures, {"geometry": str(tmp_path / "missing.csv")}, {}, outputs)
    assert error.value.__notes__ == ["while drawing figure geo01_isotropy"]
