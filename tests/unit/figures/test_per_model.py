"""Unit tier: the figures of one model (ctxvar.figures.per_model), drawn from synthetic tables: Fig. 5's bars stack
to one; Figs. 7 and 11-13 put an outlying M on a log axis and draw the fitted line only where a panel's axes are
linear, titled with three significant digits; Figs. 14-16 bin outlying values evenly on a log axis, and still draw
a layer whose every Q is the same and one whose every type is filtered out."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from ctxvar.figures import per_model
from ctxvar.figures.per_model import decomposition_bars
from ctxvar.figures.plotting import NO_LINE_NOTE
from ctxvar.stats.token_table import TokenStats

from support.figure_checks import Drawn, fit_lines, laid_out, straight_on_display
from support.figure_tables import START_M, decoder_stats, layers_frame
from support.quick_start_figures import DECODER, draw_quick_start_with_a_decoder, token_stats

ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}


@pytest.fixture
def decoder(tmp_path) -> TokenStats:
    return decoder_stats(tmp_path)


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> dict[str, Drawn]:
    """Fig. 7 of the quick start (all-MiniLM-L6-v2 and the Gaussian null) with SmolLM2 added, drawn from
    tables shaped like theirs (:func:`~support.quick_start_figures.draw_quick_start_with_a_decoder`)."""
    return laid_out(draw_quick_start_with_a_decoder(tmp_path_factory.mktemp("quick_start"), {"fig07_frequency"}))


def test_decomposition_bars_stack_to_one():
    layers = layers_frame(models=("a",)).drop(columns="model")
    plot = decomposition_bars(layers, "a")
    bars = plot.figure.axes[0].patches
    tops = {}
    for bar in bars:
        tops[round(bar.get_x() + bar.get_width() / 2)] = max(
            tops.get(round(bar.get_x() + bar.get_width() / 2), 0), bar.get_y() + bar.get_height()
        )
    np.testing.assert_allclose(list(tops.values()), 1.0)
    np.testing.assert_allclose(plot.data[["M_over_Q", "V_W_over_Q", "V_B_over_Q"]].sum(axis=1), 1.0)
    assert len(bars) == 3 * len(layers)


# --- against frequency ------------------------------------------------------------------------------------------------


def test_fig07_draws_the_outlying_m_on_a_log_axis_and_the_line_only_on_linear_axes(decoder):
    plot = per_model.frequency_scatter_middle(decoder, "decoder", ANALYSIS)
    q_ax, m_ax, v_ax = plot.figure.axes
    assert (q_ax.get_yscale(), m_ax.get_yscale(), v_ax.get_yscale()) == ("log", "log", "linear")
    assert list(plot.data["y_scale"]) == ["log", "log", "linear"] and list(plot.data["line"]) == [False, False, True]
    assert not fit_lines(q_ax) and not fit_lines(m_ax)
    assert all(ax.get_title().endswith(NO_LINE_NOTE) for ax in (q_ax, m_ax))
    (line,) = fit_lines(v_ax)
    fit = plot.data.iloc[2]
    np.testing.assert_allclose(line.get_ydata(), fit.intercept + fit.slope * line.get_xdata())
    assert straight_on_display(line)


def test_fig11_v_on_m_panels_take_a_log_axis_only_where_the_outlier_is(decoder):
    plot = per_model.frequency_grid(decoder, "decoder", ANALYSIS)
    grid = np.array(plot.figure.axes).reshape(-1, 4)
    assert [row[3].get_xscale() for row in grid] == ["linear", "log", "log", "log", "log"]  # layer 0 has none
    assert all(ax.get_xscale() == ax.get_yscale() == "linear" for ax in grid[:, :3].flat)  # log10 n, log10(1+·)
    v_on_m = plot.data[plot.data["x"] == "M"]
    assert list(v_on_m["x_scale"]) == ["linear", "log", "log", "log", "log"]


def test_fit_labels_give_three_significant_digits(quick_start):
    """SmolLM2's Fig. 7: a slope of M on log10 n_t in the millions is written as a power of ten."""
    titles = [ax.get_title() for ax in quick_start[f"fig07_frequency/{DECODER}"].figure.axes]
    slopes = [re.match(r"slope\xa0(\S+),", title).group(1) for title in titles]
    assert re.fullmatch(r"\$\d\.\d\d\\times10\^\{[67]\}\$", slopes[1]), slopes
    assert all(
        re.fullmatch(r"−?\d\.\d\d|−?0\.\d{3,5}|−?\d\d\.\d|−?\d{3}|\$-?\d\.\d\d\\times10\^\{-?\d+\}\$", s)
        for s in slopes
    ), slopes


# --- histograms -------------------------------------------------------------------------------------------------------


def test_fig14_histograms_bin_outlying_values_evenly_on_a_log_axis(decoder):
    plot = per_model.value_histograms(decoder, "decoder", ANALYSIS)
    grid = np.array(plot.figure.axes).reshape(-1, 3)
    assert grid[2, 1].get_xscale() == "log" and grid[0, 1].get_xscale() == "linear"
    bins = plot.data.query("layer == 2 and statistic == 'M'")
    assert set(bins["x_scale"]) == {"log"}
    widths = np.log10(bins["bin_right"] / bins["bin_left"]).to_numpy()  # equal on the log axis
    np.testing.assert_allclose(widths, widths[0])
    layer = decoder.layer(2)
    kept = layer[(np.log10(layer["n"]) >= 1) & (np.log10(layer["n"]) <= 5)]
    assert bins["count"].sum() == len(kept) and bins["count"].iloc[-1] >= 1  # the outlier is counted, last bin
    assert bins["bin_right"].iloc[-1] == pytest.approx(START_M)
    heights = [patch.get_height() for patch in grid[2, 1].patches]
    assert heights == list(bins["count"])


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
