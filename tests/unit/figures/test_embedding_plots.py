"""Unit tier: the figures of the embedding matrices (ctxvar.figures.embedding_plots), drawn from synthetic tables:
the projection keeps a long model name whole in its title, names its axes and gives each matrix's I(W) (a power of
e where it underflowed), also drawn from the files its job writes; I(W) against the training step has a row per
matrix, uncentred and centred, one line per checkpoint family, and draws exactly the numbers of its CSV."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ctxvar.figures import embedding_plots
from ctxvar.figures.draw import draw
from ctxvar.figures.scopes import across_checkpoint_table
from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import write_table

from support.figure_checks import Drawn, laid_out
from support.figure_tables import LONG_NAME, matrices_table, projection_points

FAMILIES = {
    "pythia": {"pythia@step0": 0, "pythia@step1000": 1000, "pythia@step143000": 143000},
    "gpt2": {"gpt2@step0": 0, "gpt2@step100": 100},
}


@pytest.fixture(scope="module")
def long_name_figures() -> dict[str, Drawn]:
    """The projection of a model named :data:`~support.figure_tables.LONG_NAME`."""
    return laid_out({"emb01_projection": embedding_plots.projection(projection_points(), LONG_NAME, matrices_table())})


def test_every_title_stays_whole_for_a_long_model_name(long_name_figures):
    suptitle = long_name_figures["emb01_projection"].figure._suptitle.get_text()
    assert suptitle.replace("\n", "").replace(" ", "").startswith(LONG_NAME.replace(" ", ""))  # the whole name


def test_the_embedding_projection_names_its_axes_and_shows_each_matrix_s_isotropy(long_name_figures, tmp_path):
    plot = long_name_figures["emb01_projection"]
    titles = [ax.get_title() for ax in plot.figure.axes]
    assert titles == [
        "input, uncentred\n$I(W) = 0.731$",
        "input, centred\n$I(W) = 0.52$",
        "output, uncentred\n$I(W) = e^{-261}$",
        "output, centred\n$I(W) = 0.9$",
    ]
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in plot.figure.axes)
    drawn = plot.data.groupby(["matrix", "centred"])["isotropy"].unique()
    assert drawn[("input", False)] == [0.731] and drawn[("output", False)] == [0.0]
    # the workflow's draw function reads both files the embedding job writes
    write_table(pa.Table.from_pandas(projection_points(), preserve_index=False), tmp_path / "projection.parquet")
    write_csv(matrices_table(), tmp_path / "embedding_matrices.csv")
    inputs = {"projection": tmp_path / "projection.parquet", "embedding_matrices": tmp_path / "embedding_matrices.csv"}
    from_files = draw("emb01_projection", inputs, {"model": "m"})
    assert [ax.get_title() for ax in from_files.figure.axes] == titles


def test_isotropy_by_step_has_a_row_per_matrix_uncentred_and_centred_one_line_per_family():
    rng = np.random.default_rng(0)
    tables = {
        model: matrices_table(("input", "output"), isotropy=rng.uniform(0, 1, 4))
        if family == "pythia"
        # the checkpoints of a tied model hold one matrix, drawn in its own row
        else matrices_table(("tied",), isotropy=rng.uniform(0, 1, 2))
        for family, steps in FAMILIES.items()
        for model in steps
    }
    plot = embedding_plots.isotropy_by_step(across_checkpoint_table(FAMILIES, tables))
    axes = np.array(plot.figure.axes).reshape(3, 2)
    assert [ax.get_title() for ax in axes.flat] == [
        "input, uncentred",
        "input, centred",
        "output, uncentred",
        "output, centred",
        "input = output (tied), uncentred",
        "input = output (tied), centred",
    ]
    data = plot.data
    assert list(data.columns) == ["family", "model", "step", "matrix", "centred", "isotropy", "log_isotropy"]
    for ax, ((matrix, centred), part) in zip(axes.flat, data.groupby(["matrix", "centred"], sort=False)):
        drawn = np.concatenate([line.get_ydata() for line in ax.lines])
        np.testing.assert_array_equal(drawn, part["isotropy"])  # the CSV's rows, in the order drawn
        for model, row in part.set_index("model").iterrows():
            expected = tables[model].set_index(["matrix", "centred"]).loc[(matrix, centred), "isotropy"]
            assert row["isotropy"] == expected
    assert len(data) == 3 * 4 + 2 * 2
