"""Unit tier: the one draw entry (ctxvar.figures.draw), through which the workflow draws every figure but Figs. 1
and 8: a figure in a new scope, declared and nothing else, is drawn as its scope calls it, or becomes a placeholder
named as its file when its data are too few."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxvar.figures.draw import draw
from ctxvar.files.atomic import write_csv

from support.figure_scopes import NEW_FIGURE, RUN, add_new_scope


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
