"""Unit tier: the figures across models (ctxvar.figures.cross_model), drawn from synthetic tables: Fig. 2 puts a
decoder's massive activation on a log axis, keeps the paper's encoders linear and shows every type whole, and puts
V with types seen once on a symlog axis it labels readably; a far larger model goes on a second axis, but not in the
ratios; the whole-set values share one log axis per panel; Fig. 4 draws a decoder's C.V. on a log axis beside the
others; Fig. 10 spans the data and says where a bound is not drawn."""

from __future__ import annotations

import numpy as np
import pytest

from ctxvar.figures import cross_model
from ctxvar.figures.cross_model import whole_set_values, within_between
from ctxvar.figures.plotting import NO_LINE_NOTE
from ctxvar.stats.token_table import TokenStats

from support.figure_checks import Drawn, drawn_texts, fit_lines, laid_out, overlapping_texts
from support.figure_tables import START, START_M, decoder_layer, decoder_stats, encoder_stats, layers_frame
from support.quick_start_figures import MODELS, draw_quick_start_with_a_decoder, token_stats

ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}


@pytest.fixture
def decoder(tmp_path) -> TokenStats:
    return decoder_stats(tmp_path)


@pytest.fixture
def encoder(tmp_path) -> TokenStats:
    return encoder_stats(tmp_path)


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> dict[str, Drawn]:
    """Figs. 2, 4 and 10 of the quick start (all-MiniLM-L6-v2 and the Gaussian null) with SmolLM2 added, drawn from
    tables shaped like theirs (:func:`~support.quick_start_figures.draw_quick_start_with_a_decoder`)."""
    drawn = {"fig02_variance_on_mean", "fig04_cv_slope_r2", "fig10_frequency_histogram"}
    return laid_out(draw_quick_start_with_a_decoder(tmp_path_factory.mktemp("quick_start"), drawn))


# --- V on M -----------------------------------------------------------------------------------------------------------


def test_fig02_puts_a_massive_activation_on_a_log_axis_and_keeps_the_paper_linear(decoder, encoder):
    """The decoder's panel shows every type on a log M axis, and no fitted line (it would be a curve there; its title
    says so); the encoder's keeps linear axes, where the fit is the straight line a + b·M between the fitted Ms."""
    plot = cross_model.variance_on_mean({"decoder": decoder, "encoder": encoder}, ANALYSIS)
    on_decoder, on_encoder = plot.figure.axes[:2]
    assert (on_decoder.get_xscale(), on_decoder.get_yscale()) == ("log", "linear")
    assert on_decoder.get_xlim()[0] <= 1.0 and on_decoder.get_xlim()[1] >= START_M  # the outlier is in view
    scatter = on_decoder.collections[0].get_offsets()
    assert START_M in scatter[:, 0] and len(scatter) == len(decoder.layer(2))
    assert (on_encoder.get_xscale(), on_encoder.get_yscale()) == ("linear", "linear")
    assert list(plot.data["x_scale"]) == ["log", "linear"] and list(plot.data["y_scale"]) == ["linear", "linear"]
    assert [text.get_text() for text in on_decoder.texts] == [START] and not on_encoder.texts  # the outlier named
    assert list(plot.data["named"].fillna("")) == [START, ""]
    assert list(plot.data["line"]) == [False, True]
    assert not fit_lines(on_decoder) and on_decoder.get_title().endswith(NO_LINE_NOTE)
    (line,) = fit_lines(on_encoder)
    fit, kept = plot.data.iloc[1], encoder.layer(2).query("n >= 10")["M"]
    np.testing.assert_allclose(line.get_xdata(), [kept.min(), kept.max()])
    np.testing.assert_allclose(line.get_ydata(), fit.intercept + fit.slope * line.get_xdata())
    assert NO_LINE_NOTE not in on_encoder.get_title()


@pytest.mark.parametrize("power", [1.7, 3.4])  # V over 5 decades, over 10
def test_v_on_m_with_types_seen_once_keeps_v_readable_on_a_symlog_axis(tmp_path, power):
    """A third of the types seen once (V = 0) and V over 5 or 10 decades: symlog V, linear up to the decade under
    V's 1st percentile, the axis no lower than that, and no tick labels overlap."""
    layers = []
    for layer in range(3):
        table = decoder_layer(seed=layer)
        once = np.random.default_rng(layer).random(len(table)) < 0.3
        table.loc[once, ["n", "V"]] = [1, 0.0]
        table["V"] = np.where(once, 0.0, table["V"] ** power / table["M"] ** 0.2)  # falling with M
        table["Q"] = table["M"] + table["V"]
        layers.append(table)
    stats = token_stats(tmp_path / "once.parquet", layers)
    plot = cross_model.variance_on_mean({"decoder": stats}, {"min_log10_n": 0, "max_log10_n": 5})
    ax = plot.figure.axes[0]
    v = stats.layer(1)["V"].to_numpy()
    assert ax.get_yscale() == "symlog"
    assert ax.yaxis.get_transform().linthresh == 10 ** np.floor(np.log10(np.percentile(v[v > 0], 1)))
    assert plot.data["slope"].iloc[0] < 0 and not fit_lines(ax)
    assert ax.get_ylim()[0] >= -ax.yaxis.get_transform().linthresh
    assert not overlapping_texts(drawn_texts(plot.figure))


def test_fig02_shows_every_type_and_names_each_model_whole(quick_start):
    """[SEP], at the smallest M of the encoder's types, is in view: no axis of Fig. 2 clips a point away."""
    drawn = quick_start["fig02_variance_on_mean"]
    for ax, model in zip(drawn.figure.axes, MODELS):
        points = ax.collections[0].get_offsets()
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert ((points[:, 0] >= x0) & (points[:, 0] <= x1) & (points[:, 1] >= y0) & (points[:, 1] <= y1)).all()
        assert model in ax.get_title().split("\n")[0]
    assert "Every type drawn" in drawn.figure._suptitle.get_text()


# --- per-layer curves -------------------------------------------------------------------------------------------------


def test_far_larger_model_goes_on_a_second_axis_but_ratios_do_not():
    layers = layers_frame()
    plot = within_between(layers, ["a", "b"])
    assert set(plot.data.loc[plot.data["model"] == "b", "axis"]) == {"right"}
    first, twin = plot.figure.axes[0], plot.figure.axes[3]  # V_W panel and its twin
    assert [line.get_label() for line in first.lines] == ["a"] and [line.get_label() for line in twin.lines] == ["b"]
    ratio_panel = plot.figure.axes[2]
    assert sorted(line.get_label() for line in ratio_panel.lines) == ["a", "b"]
    assert [text.get_text() for text in plot.figure.legends[0].texts] == ["a", "b"]


def test_whole_set_values_share_one_log_axis_per_panel():
    layers = layers_frame()
    plot = whole_set_values(layers, ["a", "b"])
    assert len(plot.figure.axes) == 3  # no twin axes
    for ax in plot.figure.axes:
        assert ax.get_yscale() == "log" and sorted(line.get_label() for line in ax.lines) == ["a", "b"]


def test_whole_set_values_with_no_value_at_all_still_draws():
    layers = layers_frame()
    layers[["Q", "M", "V"]] = np.nan  # a corpus too small for the frequency filter
    plot = whole_set_values(layers, ["a", "b"])
    plot.figure.savefig(__import__("io").BytesIO(), format="png")


def test_fig04_draws_the_decoder_s_cv_on_a_log_axis_beside_the_others(quick_start):
    cv, slope, r2 = quick_start["fig04_cv_slope_r2"].figure.axes[:3]
    assert (cv.get_yscale(), slope.get_yscale(), r2.get_yscale()) == ("log", "linear", "linear")
    data = quick_start["fig04_cv_slope_r2"].data
    assert data["cv_Q"].max() > 10 and data["cv_Q"].min() < 0.1  # the decoder's, and the null's or the encoder's


# --- frequency --------------------------------------------------------------------------------------------------------


def test_fig10_spans_the_data_and_says_where_a_bound_is_not_drawn(quick_start):
    drawn = quick_start["fig10_frequency_histogram"]
    for ax in drawn.figure.axes:
        right = drawn.data.loc[drawn.data["model"] == ax.get_title().split(" (")[0], "bin_right"].max()
        assert ax.get_xlim()[1] < right + 0.2
        assert all(line.get_xdata()[0] <= right for line in ax.lines)
    assert "not drawn beyond the data: 5" in drawn.figure._suptitle.get_text()
