"""Unit tier: every figure of the catalogue, drawn by the function of its entry and checked on its artists (the
quick start with a decoder added, and the figures that name a model, for a long model name): together the two sets
draw every figure; every axes has its labels; every text stays on the canvas and clear of every other; a line
straight in its data is straight on the page, and every fitted line is the fit, drawn only on linear axes. What one
figure draws is checked in its module's file (test_per_model.py, test_cross_model.py, test_geometry_plots.py,
test_embedding_plots.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ctxvar.figures import embedding_plots, geometry_plots, scopes
from ctxvar.figures.catalogue import FIGURES, figure_named, figures_of
from ctxvar.figures.plotting import FIT_GID, NO_LINE_NOTE
from ctxvar.figures.scopes import across_checkpoint_table

from support.figure_checks import (
    Drawn,
    bent_straight_lines,
    laid_out,
    overlapping_texts,
    straight_on_display,
    texts_off_canvas,
)
from support.figure_tables import (
    LONG_NAME,
    decoder_layer,
    geometry_table,
    layers_table,
    matrices_table,
    models_table,
    paper_layer,
    projection_points,
)
from support.quick_start_figures import DECODER, ENCODER, draw_quick_start_with_a_decoder, token_stats

ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}
LONG_NAME_FIGURES = (
    "fig02_variance_on_mean",
    "fig05_decomposition",
    "geo04_spectrum",
    "geo06_anisotropy_encoders_decoders",
)


def draw_long_name_figures(folder, model: str) -> dict:
    """The figures that name a model called ``model`` in a title or a legend (and a second, "encoder"), and every
    figure of training checkpoints, drawn by the function of its catalogue entry: those the quick start's
    (:func:`~support.quick_start_figures.draw_quick_start_with_a_decoder`) leave out."""
    decoder = token_stats(folder / "decoder.parquet", [decoder_layer(150, seed=layer) for layer in range(3)])
    encoder = token_stats(folder / "encoder.parquet", [paper_layer(150, seed=layer) for layer in range(3)])
    models = [model, "encoder"]
    layers, geometry = layers_table(models, n_layers=3), geometry_table(models, n_layers=3, batches=4)
    summary = {"layers": layers, "geometry": geometry, "models": models_table(models, ["causal", "bidirectional"])}
    one_model = {"layers": layers[layers["model"] == model], "geometry": geometry[geometry["model"] == model]}
    plots = {}
    for name in LONG_NAME_FIGURES:
        figure = figure_named(name)
        if figure.needs == ("tokens",):
            plots[name] = figure.draw({model: decoder, "encoder": encoder}, ANALYSIS)
        elif figure.scope is scopes.SUMMARY:
            plots[name] = figure.draw(*(summary[need] for need in figure.needs), models)
        else:
            plots[name] = figure.draw(*(one_model[need] for need in figure.needs), model)
    steps = {f"{model}@step{step}": step for step in (0, 1000, 10000)}
    layer_tables = {m: layers_table([m], n_layers=3).drop(columns="model") for m in steps}
    geometry_tables = {m: geometry_table([m], n_layers=3).drop(columns="model") for m in steps}
    plots["checkpoints"] = figure_named("checkpoints").draw(
        geometry_plots.checkpoint_table(steps, layer_tables, geometry_tables), model
    )
    plots["emb01_projection"] = figure_named("emb01_projection").draw(projection_points(), model, matrices_table())
    plots["embedding_checkpoints"] = figure_named("embedding_checkpoints").draw(
        embedding_plots.checkpoint_table(steps, {m: matrices_table() for m in steps}), model
    )
    families = {model: steps, "other": {f"other@step{step}": step for step in (0, 10, 100)}}
    members = [m for family in families.values() for m in family]
    inputs = {
        "geometry": {m: geometry_table([m], n_layers=3).drop(columns="model") for m in members},
        "embedding_matrices": {m: matrices_table() for m in members},
    }
    for figure in figures_of(scopes.ACROSS_CHECKPOINTS):
        (need,) = figure.needs
        plots[figure.name] = figure.draw(across_checkpoint_table(families, inputs[need]))
    return plots


@pytest.fixture(scope="module")
def long_name_figures(tmp_path_factory) -> dict[str, Drawn]:
    return laid_out(draw_long_name_figures(tmp_path_factory.mktemp("long_name"), LONG_NAME))


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> dict[str, Drawn]:
    """Every figure of the quick start (all-MiniLM-L6-v2 and the Gaussian null) with SmolLM2 added, drawn from
    tables shaped like theirs."""
    return laid_out(draw_quick_start_with_a_decoder(tmp_path_factory.mktemp("quick_start")))


# The scopes the two sets draw: the quick start's per model, summary, corpus, PCA and embedding projection, the long
# names' the checkpoints' three
DRAWN_SCOPES = (
    scopes.MODEL,
    scopes.SUMMARY,
    scopes.CORPUS,
    scopes.PCA,
    scopes.EMBEDDING_PROJECTION,
    scopes.CHECKPOINTS,
    scopes.EMBEDDING_CHECKPOINTS,
    scopes.ACROSS_CHECKPOINTS,
)


def test_the_two_sets_draw_every_figure_of_the_catalogue(quick_start, long_name_figures):
    """Every figure of the scopes the two sets draw (a figure in a new scope has its own test)."""
    drawn = {name.split("/")[0] for name in [*quick_start, *long_name_figures]}
    assert {figure.name for figure in FIGURES if figure.scope in DRAWN_SCOPES} == drawn


def unlabelled(figure) -> list[str]:
    """The visible axes of ``figure`` without an x or a y label: a colorbar needs the label along it, a twin
    axes (same frame as another) its own y label and the x label of the axes it twins."""
    missing = []
    for ax in figure.axes:
        if not ax.get_visible():
            continue
        if hasattr(ax, "_colorbar"):
            along = ax.yaxis if ax._colorbar.orientation == "vertical" else ax.xaxis
            if not along.get_label_text():
                missing.append("colorbar")
            continue
        frame = ax.get_position().bounds
        same_frame = [other for other in figure.axes if other.get_position().bounds == frame]
        if not any(other.get_xlabel() for other in same_frame) or not ax.get_ylabel():
            missing.append(ax.get_title() or repr(ax))
    return missing


@pytest.mark.parametrize("figures", ["quick_start", "long_name_figures"])
def test_every_axes_of_every_figure_has_its_labels(figures, request):
    missing = {name: unlabelled(drawn.figure) for name, drawn in request.getfixturevalue(figures).items()}
    assert not {name: axes for name, axes in missing.items() if axes}


@pytest.mark.parametrize("figures", ["quick_start", "long_name_figures"])
def test_every_text_stays_on_the_canvas_and_overlaps_no_other(figures, request):
    """Titles, axis labels, offset texts, tick labels, the names of outlying tokens, legend and colorbar texts: on
    the Agg canvas each is inside the figure, and no two overlap."""
    for name, drawn in request.getfixturevalue(figures).items():
        assert not texts_off_canvas(drawn.figure, drawn.texts), name
        assert not overlapping_texts(drawn.texts), name


@pytest.mark.parametrize("figures", ["quick_start", "long_name_figures"])
def test_a_straight_line_of_the_data_is_straight_on_the_page(figures, request):
    """A line whose points lie on one straight line of its data coordinates (a linear fit) is drawn straight: never
    a curve on a log or symlog axis."""
    bent = {name: bent_straight_lines(drawn.figure) for name, drawn in request.getfixturevalue(figures).items()}
    assert not {name: axes for name, axes in bent.items() if axes}


def test_every_fitted_line_is_the_fit_straight_on_linear_axes(quick_start):
    """Each line of a regression panel is a + b·x from the smallest to the largest fitted x, straight on the page;
    a panel with a log axis has none, and its title says so."""
    panels = {name: drawn for name, drawn in quick_start.items() if "line" in drawn.data}
    assert {"fig02_variance_on_mean", f"fig07_frequency/{DECODER}", f"fig11_frequency_grid/{ENCODER}"} <= set(panels)
    for name, drawn in panels.items():
        axes = [ax for ax in drawn.figure.axes if ax.collections and not hasattr(ax, "_colorbar")]
        assert len(axes) == len(drawn.data), name
        for ax, fit in zip(axes, drawn.data.itertuples()):
            lines = [line for line in ax.lines if line.get_gid() == FIT_GID]
            linear = ax.get_xscale() == ax.get_yscale() == "linear"
            assert fit.line == linear == bool(lines), (name, ax.get_title())
            assert (NO_LINE_NOTE in ax.get_title()) == (not linear), (name, ax.get_title())
            for line in lines:
                np.testing.assert_allclose(line.get_ydata(), fit.intercept + fit.slope * line.get_xdata())
                assert straight_on_display(line), (name, ax.get_title())
