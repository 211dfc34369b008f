"""Unit tier: what every figure shares (ctxvar.figures.plotting): numbers to three significant digits, titles wrapped
between words or after a name's separators (never inside a name), the scale rules of per-type values and of
per-layer curves, grids even on a log axis that end at the extreme values, the paper's middle and grid layers, the
series that go on a second axis, and labels placed clear of each other once the layout is final."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from ctxvar.figures.plotting import (
    MIN_TITLE_SIZE,
    NO_BREAK,
    AxisScale,
    axis_scale,
    curve_scale,
    fit_text,
    fit_titles,
    grid_layers,
    middle_layer,
    panels,
    paper_style,
    place_labels,
    scale_grid,
    scale_groups,
    significant,
)

from support.figure_checks import drawn_texts, overlapping_texts, texts_off_canvas
from support.figure_tables import decoder_layer

NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.mark.parametrize(
    "value, written",
    [
        (-1.008, "−1.01"),
        (0.78, "0.78"),
        (0.005962, "0.00596"),
        (484.3, "484"),
        (1234.5, r"$1.23\times10^{3}$"),
        (999.7, r"$1.00\times10^{3}$"),
        (7203261.719, r"$7.20\times10^{6}$"),
        (-5.4879e-06, r"$-5.49\times10^{-6}$"),
        (0.0, "0"),
        (np.nan, "n/a"),
    ],
)
def test_numbers_are_written_to_three_significant_digits(value, written):
    assert significant(value) == written


def fitted(title: str, width_px: float, size: float = 8.0):
    """A title fitted into ``width_px`` pixels (:func:`fit_text`), as drawn."""

    @paper_style
    def draw():
        figure, axes = panels(1, 1, size=(6, 2))
        text = axes[0, 0].set_title(title, fontsize=size)
        renderer = FigureCanvasAgg(figure).get_renderer()
        fit_text(text, renderer, width_px, title, size)
        return text, renderer

    return draw()


@pytest.mark.parametrize("width_px", [600, 400, 250])  # at 200 dpi: a panel's width, two thirds, under half
def test_a_title_wraps_between_words_or_after_a_separator_of_a_name(width_px):
    """Each line break is at a space of the title or after one of a name's separators (- _ / .), and every line
    fits; a name is never cut between two of its letters while a wrap at a separator can make it fit."""
    title = f"{NAME} (layer{NO_BREAK}15)"
    text, renderer = fitted(title, width_px)
    lines = text.get_text().split("\n")
    assert text.get_window_extent(renderer).width <= width_px
    rebuilt = lines[0]
    for line in lines[1:]:
        if rebuilt.endswith(("-", "_", "/", ".")) and title.startswith(rebuilt + line.split(" ")[0]):
            rebuilt += line  # wrapped after a separator
        else:
            rebuilt += " " + line  # wrapped at a space
    assert rebuilt == title, text.get_text()
    assert "layer\xa015" in text.get_text()  # a no-break space joins


def test_a_title_is_shrunk_a_little_before_a_name_in_it_is_wrapped():
    text, renderer = fitted(NAME, 10_000)
    width = text.get_window_extent(renderer).width
    text, renderer = fitted(f"{NAME} (layer{NO_BREAK}15)", 0.9 * width)  # the name fits at 7.2 points
    assert text.get_text() == f"{NAME}\n(layer{NO_BREAK}15)" and MIN_TITLE_SIZE < text.get_fontsize() < 8


# --- scales -----------------------------------------------------------------------------------------------------------


def test_axis_scale_is_linear_unless_values_span_orders_of_magnitude():
    rng = np.random.default_rng(0)
    assert axis_scale(rng.uniform(50, 100, 500)) == AxisScale("linear")  # the paper's encoders
    assert axis_scale(decoder_layer()["M"]) == AxisScale("log")  # one outlier far beyond the 99th percentile
    assert axis_scale(10 ** rng.uniform(0, 3.5, 500)) == AxisScale("log")  # no outlier, but 3.5 decades
    assert axis_scale(10 ** rng.uniform(0, 2.5, 500)) == AxisScale("linear")
    with_zeros = np.r_[np.zeros(50), 10 ** rng.uniform(0, 3, 500), 4e7]  # V of types seen once is 0
    scale = axis_scale(with_zeros)
    low = np.percentile(with_zeros[with_zeros > 0], 1)
    assert scale.name == "symlog" and scale.linthresh == 10 ** np.floor(np.log10(low))  # a decade, at or under it
    assert axis_scale(np.r_[-1.0, 10 ** rng.uniform(0, 6, 500)]) == AxisScale("linear")  # signed: linear
    assert axis_scale([np.nan, 1.0]) == AxisScale("linear")


def test_the_scale_rule_sees_a_group_of_outliers_that_holds_the_99th_percentile():
    """SmolLM2's layers 3–9: 1–2 % of the types (massive activations) at 10–100 × the others' Q, so many that the
    99th percentile is one of them: the middle 90 % of the values take < 10 % of the range, so log."""
    rng = np.random.default_rng(0)
    bulk, outliers = rng.normal(8000, 1500, 840), rng.uniform(2e5, 6.6e5, 16)
    assert axis_scale(np.r_[bulk, outliers]) == AxisScale("log")
    assert axis_scale(np.r_[bulk, rng.uniform(2e4, 3e4, 16)]) == AxisScale("linear")  # a tail, not apart
    tight = np.r_[rng.normal(2.18, 0.01, 840), rng.uniform(1.85, 2.0, 16)]  # MiniLM's log10(1 + Q) at layer 2
    assert axis_scale(tight) == AxisScale("linear")  # squashed, but within a decade: a log axis has no tick


def test_per_layer_curves_go_on_a_log_axis_where_positive_values_span_orders_of_magnitude():
    cv = np.r_[np.full(7, 0.1), 0.04, 0.02, np.full(20, 28.0)]  # C.V.: MiniLM, the null, SmolLM2's middle layers
    assert curve_scale(cv) == AxisScale("log")
    assert curve_scale(np.r_[0.0024, 0.78, 0.19]) == AxisScale("linear")  # R², a share: within [0, 1]
    assert curve_scale(np.r_[-0.76, 0.07]) == AxisScale("linear")  # slopes: signed
    assert curve_scale(np.r_[3.0, 120.0]) == AxisScale("linear")  # within two decades


@pytest.mark.parametrize("scale", ["log", "symlog"])
def test_a_grid_on_a_log_axis_ends_exactly_at_the_extreme_values(scale):
    """10 ** log10(6.829612598000279) is one ulp below it: a histogram binned on the round trip lost that type."""
    lo, hi = 0.2004865494579971, 6.829612598000279
    ax = Figure().subplots()
    ax.set_xscale(scale)
    grid = scale_grid(ax.xaxis, lo, hi, 51)
    assert (grid[0], grid[-1]) == (lo, hi) and np.all(np.diff(grid) > 0)
    counts, _ = np.histogram([lo, 1.0, hi], bins=grid)
    assert counts.sum() == 3


def test_scale_groups_put_only_far_larger_series_on_the_right():
    assert scale_groups({"bert": 300.0, "roberta": 150.0, "gpt2": 9000.0}) == (["bert", "roberta"], ["gpt2"])
    assert scale_groups({"a": 1.0, "b": 9.0}) == (["a", "b"], [])
    assert scale_groups({"a": np.nan, "b": 1.0}) == (["a", "b"], [])


def test_middle_and_grid_layers_follow_the_paper():
    assert middle_layer(13) == 6 and middle_layer(25) == 12 and middle_layer(5) == 2
    assert grid_layers(13) == [0, 3, 6, 9, 12]
    assert grid_layers(25) == [0, 6, 12, 18, 24]
    assert grid_layers(3) == [0, 1, 2]


# --- labels -----------------------------------------------------------------------------------------------------------


@paper_style
def crowded_labels():
    figure, axes = panels(1, 1, size=(3, 3))
    ax = axes[0, 0]
    rng = np.random.default_rng(1)
    xy = rng.normal(scale=0.3, size=(25, 2))
    ax.scatter(xy[:, 0], xy[:, 1])
    ax.set(xlim=(-3, 3), ylim=(-3, 3))
    place_labels(ax, xy[:, 0], xy[:, 1], [f"token{i}" for i in range(25)])
    return figure, ax


def test_placed_labels_do_not_overlap():
    figure, ax = crowded_labels()
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw_without_rendering()
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]  # the text itself, not its leader line
    assert len(boxes) == 25
    overlapping = [(i, j) for i in range(25) for j in range(i + 1, 25) if boxes[i].overlaps(boxes[j])]
    assert not overlapping


@paper_style
def labelled_panel(titled: bool):
    """Names at points of the frame's edges, placed at the end of the drawing, after the title is fitted."""
    figure, axes = panels(1, 1, size=(2.4, 2.0))
    ax = axes[0, 0]
    xy = np.array([[1.0, 1.0], [1.0, 0.98], [0.98, 1.0], [0.0, 0.0], [0.02, 0.0]])
    ax.scatter(xy[:, 0], xy[:, 1])
    ax.set(xlabel="x", ylabel="y", title=f"{NAME} {NAME}" if titled else "")
    place_labels(ax, xy[:, 0], xy[:, 1], ["<|im_start|>", "Exit", "Module", "Tri", "Oper"], beside=True)
    from ctxvar.figures.plotting import Plot

    return Plot(figure, pd.DataFrame())


@pytest.mark.parametrize("titled", [False, True])
def test_labels_stay_inside_the_frame_clear_of_each_other_and_of_the_ticks(titled):
    plot = labelled_panel(titled)
    texts = drawn_texts(plot.figure)
    ax = plot.figure.axes[0]
    frame = ax.get_window_extent(FigureCanvasAgg(plot.figure).get_renderer())
    named = [box for text, box in texts if text in {"<|im_start|>", "Exit", "Module", "Tri", "Oper"}]
    assert len(named) == 5
    assert all(frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1 for box in named)
    assert not overlapping_texts(texts) and not texts_off_canvas(plot.figure, texts)


def test_minor_tick_labels_that_overlap_are_dropped_and_others_kept():
    """A log axis of a decade and a half, squeezed into a short panel, labels 2–9 × 10ⁿ on top of each other: its
    minor labels go, its major ones stay; a tall panel of the same range keeps its minor labels
    (:func:`ctxvar.figures.plotting.thin_tick_labels`, as every figure's layout is settled)."""
    for height, kept in ((1.0, False), (6.0, True)):
        figure, axes = panels(1, 1, size=(2.0, height))
        axes[0, 0].plot([1, 2], [0.003, 0.05])
        axes[0, 0].set_yscale("log")
        assert fit_titles(figure)  # thins the tick labels in the layout it settles
        figure.draw_without_rendering()
        minor = [label.get_text() for label in axes[0, 0].yaxis.get_ticklabels(minor=True) if label.get_text()]
        assert bool(minor) is kept and [label.get_text() for label in axes[0, 0].yaxis.get_ticklabels()]
        assert not overlapping_texts(drawn_texts(figure))
