"""Unit tier: what every figure draws, checked on its artists: axis scales chosen by the data (a decoder's
sentence-start token at M ≈ 4·10⁷ beside types at 1–10³), fitted lines drawn only where they are straight, labels
on every axes, every text on the canvas and clear of every other (the quick start with a decoder added, and a long
model name), the measured value (I(W)), and the sample batches' spread (synthetic tables)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.offsetbox import DrawingArea, HPacker, TextArea

from ctxvar.figures import cross_model, embedding_plots, geometry_plots, per_model, scopes
from ctxvar.figures.catalogue import FIGURES, figure_named, figures_of
from ctxvar.figures.cross_model import BAND_GID, BAND_LABEL, FINAL_NORM_LABEL
from ctxvar.figures.draw import draw
from ctxvar.figures.plotting import FIT_GID, NO_LINE_NOTE, AxisScale, axis_scale, scale_grid
from ctxvar.figures.scopes import across_checkpoint_table
from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import write_table
from ctxvar.stats.geometry import geometry_columns
from ctxvar.stats.token_table import TokenStats

from support.figure_checks import (
    bent_straight_lines,
    drawn_texts,
    overlapping_texts,
    straight_on_display,
    texts_off_canvas,
)
from support.quick_start_figures import DECODER, ENCODER, MODELS, draw_quick_start_with_a_decoder, token_stats

ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}
LONG_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct-Q4_1-dequantized-to-float32-a-long-model-name-for-a-title"
START = "<|im_start|>"
START_M = 4e7  # SmolLM2's sentence-start token from layer 12 on: its "massive activation"


def decoder_layer(n_types=400, seed=0, start=True) -> pd.DataFrame:
    """One layer's per-type table shaped like SmolLM2's middle layers: M and V of the types at 1–10³, and (with
    ``start``) the sentence-start token, in every sentence, at M = 4·10⁷ with V = 0 (one hidden state)."""
    rng = np.random.default_rng(seed)
    n = np.round(10 ** rng.uniform(0, 4.5, n_types)).astype(np.int64)
    m = 10 ** rng.uniform(0, 3, n_types)
    v = 10 ** rng.uniform(0, 3, n_types)
    tokens = [f"tok{i}" for i in range(n_types)]
    if start:
        tokens, n, m, v = [START, *tokens], np.r_[2887, n], np.r_[START_M, m], np.r_[0.0, v]
    return pd.DataFrame({"token": tokens, "n": n, "Q": m + v, "M": m, "V": v})


def paper_layer(n_types=400, seed=0) -> pd.DataFrame:
    """A per-type table as the paper's encoders give it: Q 50–100, M a share of it (no outliers)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(50, 100, n_types)
    m = q * rng.uniform(0.2, 0.9, n_types)
    n = np.round(10 ** rng.uniform(0, 4.5, n_types)).astype(np.int64)
    return pd.DataFrame({"token": [f"tok{i}" for i in range(n_types)], "n": n, "Q": q, "M": m, "V": q - m})


@pytest.fixture
def decoder(tmp_path) -> TokenStats:
    """Five layers, the first without the sentence-start token's outlier (a decoder's embeddings)."""
    return token_stats(tmp_path / "decoder.parquet", [decoder_layer(start=layer > 0, seed=layer) for layer in range(5)])


@pytest.fixture
def encoder(tmp_path) -> TokenStats:
    return token_stats(tmp_path / "encoder.parquet", [paper_layer(seed=layer) for layer in range(5)])


# --- the rule ------------------------------------------------------------------------------------------------------


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


# --- V on M and the other panels of per-type values ---------------------------------------------------------------


def fit_lines(ax) -> list:
    return [line for line in ax.lines if line.get_gid() == FIT_GID]


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


def test_fig11_v_on_m_panels_take_a_log_axis_only_where_the_outlier_is(decoder):
    plot = per_model.frequency_grid(decoder, "decoder", ANALYSIS)
    grid = np.array(plot.figure.axes).reshape(-1, 4)
    assert [row[3].get_xscale() for row in grid] == ["linear", "log", "log", "log", "log"]  # layer 0 has none
    assert all(ax.get_xscale() == ax.get_yscale() == "linear" for ax in grid[:, :3].flat)  # log10 n, log10(1+·)
    v_on_m = plot.data[plot.data["x"] == "M"]
    assert list(v_on_m["x_scale"]) == ["linear", "log", "log", "log", "log"]


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


# --- every figure of the catalogue ---------------------------------------------------------------------------------


def layers_table(models: list[str], n_layers=5, seed=0) -> pd.DataFrame:
    """A stacked layers.csv with every column a figure draws."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        for layer in range(n_layers):
            q = rng.uniform(50, 100)
            m, v_w = q * rng.uniform(0.1, 0.5), q * rng.uniform(0.1, 0.4)
            rows.append(
                {
                    "model": model,
                    "layer": layer,
                    "depth": layer / (n_layers - 1),
                    "final_norm": layer == n_layers - 1,
                    **{"Q": q, "M": m, "V": q - m, "V_W": v_w, "V_B": q - m - v_w, "cv_Q": rng.uniform(0.01, 1)},
                    **{"slope_VM": rng.uniform(-1, 0), "r2_VM": rng.uniform(0, 1)},
                    **{f"slope_log{s}": rng.uniform(-0.2, 0.2) for s in "QMV"},
                }
            )
    return pd.DataFrame(rows)


def geometry_table(models: list[str], n_layers=5, batches=1, seed=0) -> pd.DataFrame:
    """A stacked geometry.csv; with ``batches`` > 1, batch means and standard deviations."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        for layer in range(n_layers):
            row = {column: rng.uniform(0.1, 1.0) for column in geometry_columns(3)}
            row |= {"model": model, "layer": layer, "depth": layer / (n_layers - 1), "final_norm": False}
            row |= {"twonn": rng.uniform(3, 12), "twonn_gaussian": rng.uniform(100, 140), "sample_batches": batches}
            for metric, centre in (("anisotropy_batch", row["anisotropy"]), ("twonn_batch", row["twonn"])):
                row[f"{metric}_mean"] = centre * rng.uniform(0.95, 1.05)
                row[f"{metric}_std"] = centre * rng.uniform(0.01, 0.1) if batches > 1 else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def projection_points(names=("input", "output"), rows=40, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.concat(
        [
            pd.DataFrame(
                {"matrix": name, "centred": centre, "row": np.arange(rows), "x": rng.normal(size=rows)}
            ).assign(y=rng.normal(size=rows))
            for name in names
            for centre in (False, True)
        ],
        ignore_index=True,
    )


def matrices_table(names=("input", "output"), isotropy=(0.731, 0.52, 0.0, 0.9)) -> pd.DataFrame:
    """embedding_matrices.csv's columns the projection draws; an I(W) of 0 underflowed (log I(W) −261)."""
    rows = [(name, centre) for name in names for centre in (False, True)]
    values = list(isotropy)[: len(rows)]
    return pd.DataFrame(
        {
            "matrix": [name for name, _ in rows],
            "centred": [centre for _, centre in rows],
            "isotropy": values,
            "log_isotropy": [np.log(v) if v > 0 else -261.0 for v in values],
            "mean_cosine": 0.1,
        }
    )


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


def models_table(models: list[str], attention: list) -> pd.DataFrame:
    """summary/models.csv's columns the encoder-decoder figure reads."""
    return pd.DataFrame({"model": models, "attention": attention})


@dataclass
class Drawn:
    """A figure as its PNG lays it out, and every text it draws (:func:`~support.figure_checks.drawn_texts`)."""

    figure: object
    data: pd.DataFrame
    texts: list


def laid_out(plots: dict) -> dict[str, Drawn]:
    assert not any("not_drawn" in plot.data for plot in plots.values())
    return {name: Drawn(plot.figure, plot.data, drawn_texts(plot.figure)) for name, plot in plots.items()}


@pytest.fixture(scope="module")
def long_name_figures(tmp_path_factory) -> dict[str, Drawn]:
    return laid_out(draw_long_name_figures(tmp_path_factory.mktemp("long_name"), LONG_NAME))


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> dict[str, Drawn]:
    """Every figure of the quick start (all-MiniLM-L6-v2 and the Gaussian null) with SmolLM2 added, drawn from
    tables shaped like theirs."""
    return laid_out(draw_quick_start_with_a_decoder(tmp_path_factory.mktemp("quick_start")))


def test_the_two_sets_draw_every_figure_of_the_catalogue(quick_start, long_name_figures):
    drawn = {name.split("/")[0] for name in [*quick_start, *long_name_figures]}
    assert {figure.name for figure in FIGURES} == drawn


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


def test_fig02_shows_every_type_and_names_each_model_whole(quick_start):
    """[SEP], at the smallest M of the encoder's types, is in view: no axis of Fig. 2 clips a point away."""
    drawn = quick_start["fig02_variance_on_mean"]
    for ax, model in zip(drawn.figure.axes, MODELS):
        points = ax.collections[0].get_offsets()
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert ((points[:, 0] >= x0) & (points[:, 0] <= x1) & (points[:, 1] >= y0) & (points[:, 1] <= y1)).all()
        assert model in ax.get_title().split("\n")[0]
    assert "Every type drawn" in drawn.figure._suptitle.get_text()


def test_fit_labels_give_three_significant_digits(quick_start):
    """SmolLM2's Fig. 7: a slope of M on log10 n_t in the millions is written as a power of ten."""
    titles = [ax.get_title() for ax in quick_start[f"fig07_frequency/{DECODER}"].figure.axes]
    slopes = [re.match(r"slope\xa0(\S+),", title).group(1) for title in titles]
    assert re.fullmatch(r"\$\d\.\d\d\\times10\^\{[67]\}\$", slopes[1]), slopes
    assert all(
        re.fullmatch(r"−?\d\.\d\d|−?0\.\d{3,5}|−?\d\d\.\d|−?\d{3}|\$-?\d\.\d\d\\times10\^\{-?\d+\}\$", s)
        for s in slopes
    ), slopes


def test_fig04_draws_the_decoder_s_cv_on_a_log_axis_beside_the_others(quick_start):
    cv, slope, r2 = quick_start["fig04_cv_slope_r2"].figure.axes[:3]
    assert (cv.get_yscale(), slope.get_yscale(), r2.get_yscale()) == ("log", "linear", "linear")
    data = quick_start["fig04_cv_slope_r2"].data
    assert data["cv_Q"].max() > 10 and data["cv_Q"].min() < 0.1  # the decoder's, and the null's or the encoder's


def test_fig10_spans_the_data_and_says_where_a_bound_is_not_drawn(quick_start):
    drawn = quick_start["fig10_frequency_histogram"]
    for ax in drawn.figure.axes:
        right = drawn.data.loc[drawn.data["model"] == ax.get_title().split(" (")[0], "bin_right"].max()
        assert ax.get_xlim()[1] < right + 0.2
        assert all(line.get_xdata()[0] <= right for line in ax.lines)
    assert "not drawn beyond the data: 5" in drawn.figure._suptitle.get_text()


def test_the_final_norm_is_promised_only_where_it_is_drawn(quick_start):
    """MiniLM has no final norm: its spectrum's colorbar does not mention one; the decoder's does."""
    label = {model: quick_start[f"geo04_spectrum/{model}"].figure.axes[-1].get_ylabel() for model in MODELS}
    assert label[ENCODER] == "layer" and "final norm" in label[DECODER]
    encoders_decoders = quick_start["geo06_anisotropy_encoders_decoders"].figure
    rings = [ax for ax in encoders_decoders.axes for c in ax.collections if c.get_label() == FINAL_NORM_LABEL]
    assert [ax.get_title() for ax in rings] == ["Decoders"]


def test_the_encoder_alone_gets_no_final_norm_entry():
    geometry = geometry_table(["encoder"], batches=1)
    plot = geometry_plots.encoders_decoders(geometry, models_table(["encoder"], ["bidirectional"]), ["encoder"])
    assert FINAL_NORM_LABEL not in [text.get_text() for text in plot.figure.legends[0].texts]


def test_the_gaussian_reference_s_legend_entry_shows_each_model_s_dash(quick_start):
    figure = quick_start["geo03_intrinsic_dimension"].figure
    entries = [row.get_children() for row in figure.legends[0].findobj(HPacker)]  # (handle, text) per entry
    entries = [entry for entry in entries if [type(box) for box in entry] == [DrawingArea, TextArea]]
    ((handle, _),) = [(handle, text) for handle, text in entries if "Gaussian" in text.get_text()]
    dashes = {to_hex(line.get_color()) for line in handle.findobj(Line2D) if line.get_linestyle() == "--"}
    drawn = {to_hex(line.get_color()) for line in figure.axes[0].lines if line.get_linestyle() == "--"}
    assert dashes == drawn and len(drawn) == len(MODELS)


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


# --- the sample batches' spread ------------------------------------------------------------------------------------


def band_of(ax, colour) -> np.ndarray:
    """The vertices (x, y) of the batch band drawn in ``colour`` on ``ax``."""
    from matplotlib.colors import to_rgba

    (band,) = [
        c
        for c in ax.collections
        if c.get_gid() == BAND_GID and np.allclose(c.get_facecolor()[0][:3], to_rgba(colour)[:3])
    ]
    return band.get_paths()[0].vertices


@pytest.mark.parametrize(
    "draw, column, metric",
    [
        (geometry_plots.isotropy, "anisotropy", "anisotropy_batch"),
        (geometry_plots.intrinsic_dimension, "twonn", "twonn_batch"),
    ],
)
def test_anisotropy_and_twonn_shade_the_batches_mean_plus_minus_std(draw, column, metric):
    geometry = geometry_table(["a", "b"], batches=4)
    plot = draw(geometry, ["a", "b"])
    ax = plot.figure.axes[0]
    for model, colour in (("a", "C0"), ("b", "C1")):
        rows = geometry[geometry["model"] == model]
        vertices = band_of(ax, colour)
        for depth, mean, std in zip(rows["depth"], rows[f"{metric}_mean"], rows[f"{metric}_std"]):
            at = vertices[np.isclose(vertices[:, 0], depth), 1]
            np.testing.assert_allclose([at.min(), at.max()], [mean - std, mean + std])
    assert BAND_LABEL in [text.get_text() for text in plot.figure.legends[0].texts]
    pd.testing.assert_series_equal(
        plot.data[f"{metric}_std"], geometry[f"{metric}_std"].reset_index(drop=True), check_names=False
    )
    assert set(plot.data["sample_batches"]) == {4} and column in plot.data

    one_batch = draw(geometry_table(["a", "b"], batches=1), ["a", "b"])
    assert not [c for c in one_batch.figure.axes[0].collections if c.get_gid() == BAND_GID]
    assert f"{metric}_std" not in one_batch.data
    assert BAND_LABEL not in [text.get_text() for text in one_batch.figure.legends[0].texts]


def test_checkpoints_shade_each_layer_s_batch_spread_across_steps():
    steps = {f"m@step{step}": step for step in (0, 1000, 10000)}
    layers = {m: layers_table([m], n_layers=3).drop(columns="model") for m in steps}
    geometry = {
        m: geometry_table([m], n_layers=3, batches=4, seed=i).drop(columns="model") for i, m in enumerate(steps)
    }
    table = geometry_plots.checkpoint_table(steps, layers, geometry)
    plot = geometry_plots.checkpoints(table, "m")
    anisotropy_ax, twonn_ax = plot.figure.axes[:2]
    for ax, metric in ((anisotropy_ax, "anisotropy_batch"), (twonn_ax, "twonn_batch")):
        bands = [c for c in ax.collections if c.get_gid() == BAND_GID]
        assert len(bands) == 3  # one per layer
        for layer, band in enumerate(bands):
            rows = table[table["layer"] == layer].sort_values("step")
            vertices = band.get_paths()[0].vertices
            for step, mean, std in zip(rows["step"], rows[f"{metric}_mean"], rows[f"{metric}_std"]):
                at = vertices[np.isclose(vertices[:, 0], step), 1]
                np.testing.assert_allclose([at.min(), at.max()], [mean - std, mean + std])
    assert {"anisotropy_batch_std", "twonn_batch_std", "sample_batches"} <= set(plot.data.columns)
    assert "batch mean ± std" in plot.figure._suptitle.get_text()  # the title says what the shade is
    one = {m: geometry_table([m], n_layers=3).drop(columns="model") for m in steps}
    plain = geometry_plots.checkpoints(geometry_plots.checkpoint_table(steps, layers, one), "m")
    assert not [c for ax in plain.figure.axes for c in ax.collections if c.get_gid() == BAND_GID]


def test_a_spectrum_of_few_layers_is_ticked_at_whole_components_and_whole_layers():
    """Three hidden states: the colorbar's ticks are layers (0, 1, 2), the x axis's components (1 … 10), none of them
    halfway between two."""
    plot = geometry_plots.spectrum(geometry_table(["m"], n_layers=3), "m")
    plot.figure.draw_without_rendering()
    ax, colorbar = plot.figure.axes
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (colorbar.yaxis, colorbar.get_ylim())):
        ticks = [tick for tick in axis.get_majorticklocs() if low <= tick <= high]
        assert len(ticks) >= 2 and all(float(tick).is_integer() for tick in ticks), ticks
