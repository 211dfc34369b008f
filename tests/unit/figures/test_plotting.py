"""Unit tier: what every figure shares (ctxvar.figures.plotting): numbers to three significant digits, titles wrapped
between words or after a name's separators (never inside a name), the scale rules of per-type values and of
per-layer curves, and labels placed clear of each other once the layout is final."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from ctxvar.figures import geometry_plots, per_model
from ctxvar.figures.plotting import (
    MIN_TITLE_SIZE,
    NO_BREAK,
    AxisScale,
    axis_scale,
    curve_scale,
    fit_text,
    fit_titles,
    panels,
    paper_style,
    place_labels,
    significant,
)

from support.figure_checks import drawn_texts, overlapping_texts, texts_off_canvas
from support.quick_start_figures import token_stats

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


def test_the_histograms_of_a_layer_of_constant_q_still_draw(tmp_path):
    """A LayerNorm output whose Q(X_t) is the same for every type up to rounding: numpy cannot cut that range
    into 50 bins, so the bins lie around the value."""
    n = np.arange(10, 60)
    layer = pd.DataFrame({"token": [f"t{i}" for i in n], "n": n, "Q": 414.72 + 1e-13 * np.sin(n), "M": 4.0 + n})
    layer["V"] = layer["Q"] - layer["M"]
    plot = per_model.value_histograms(
        token_stats(tmp_path / "t.parquet", [layer]), "m", {"min_log10_n": 1, "max_log10_n": 5}
    )
    q_bins = plot.data.query("statistic == 'Q'")
    assert q_bins["count"].sum() == len(layer) and q_bins["bin_left"].min() < 414.72 < q_bins["bin_right"].max()


def test_the_histograms_of_a_layer_whose_every_type_is_filtered_out_still_draw(tmp_path):
    """A corpus of three sentences: no type reaches n ≥ 10, so each panel has no value and draws empty bins."""
    layer = pd.DataFrame({"token": ["a", "b"], "n": [1, 2], "Q": [3.0, 4.0], "M": [1.0, 2.0], "V": [2.0, 2.0]})
    plot = per_model.value_histograms(
        token_stats(tmp_path / "t.parquet", [layer]), "m", {"min_log10_n": 1, "max_log10_n": 5}
    )
    assert plot.data["count"].sum() == 0 and len(plot.data) == 3 * 50


def test_the_c_v_against_n_min_of_31_layers_keeps_its_legend_on_the_canvas(tmp_path):
    rng = np.random.default_rng(0)
    n = np.round(10 ** rng.uniform(1, 3.5, 300)).astype(np.int64)
    layers = []
    for _ in range(31):
        q = rng.uniform(100, 200, len(n))
        layers.append(pd.DataFrame({"token": [f"t{i}" for i in range(len(n))], "n": n, "Q": q, "M": q / 2, "V": q / 2}))
    plot = geometry_plots.cv_against_min_count(
        token_stats(tmp_path / "t.parquet", layers), NAME, {"min_log10_n": 1, "max_log10_n": 5}
    )
    texts = drawn_texts(plot.figure)
    assert len([text for text, _ in texts if text.startswith("layer ")]) == 31
    assert not texts_off_canvas(plot.figure, texts) and not overlapping_texts(texts)


def test_a_layer_whose_every_q_is_equal_is_named_not_drawn_on_the_log_axes(tmp_path):
    """C.V. 0 (LayerNorm without γ: every type's Q is d) has no place on the log axis: the other layer is drawn,
    the title names the flat one, and no text leaves the canvas."""
    rng = np.random.default_rng(0)
    n = np.round(10 ** rng.uniform(1, 3.5, 300)).astype(np.int64)
    tokens = [f"t{i}" for i in range(len(n))]
    q = rng.uniform(100, 200, len(n))
    varied = pd.DataFrame({"token": tokens, "n": n, "Q": q, "M": q / 2, "V": q / 2})
    flat = pd.DataFrame({"token": tokens, "n": n, "Q": 384.0, "M": 192.0, "V": 192.0})
    plot = geometry_plots.cv_against_min_count(
        token_stats(tmp_path / "t.parquet", [varied, flat]), "m", {"min_log10_n": 1, "max_log10_n": 5}
    )
    ax = plot.figure.axes[0]
    assert "C.V. 0 (every Q equal) at layer 1: not drawn" in " ".join(ax.get_title().split())
    assert ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.get_lines()][0].startswith("layer 0: slope")
    texts = drawn_texts(plot.figure)
    assert not texts_off_canvas(plot.figure, texts) and not overlapping_texts(texts)


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
