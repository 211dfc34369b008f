"""Unit tier: what every figure draws, checked on its artists: axis scales chosen by the data (a decoder's
sentence-start token at M ≈ 4·10⁷ beside types at 1–10³), labels on every axes, the measured value (I(W)),
titles inside the figure for a long model name, and the sample batches' spread (synthetic tables)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ctxvar.figures import cross_model, embedding_plots, geometry_plots, per_model
from ctxvar.figures.catalogue import (
    ACROSS_CHECKPOINT_FIGURES,
    CHECKPOINT_FIGURE,
    EMBEDDING_CHECKPOINT_FIGURE,
    EMBEDDING_PROJECTION_FIGURE,
    GEOMETRY_MODEL_FIGURES,
    GEOMETRY_SUMMARY_FIGURES,
    MODEL_FIGURES,
    PCA_FIGURES,
    SUMMARY_FIGURES,
)
from ctxvar.figures.cross_model import BAND_GID, BAND_LABEL
from ctxvar.figures.draw import across_checkpoint_table, draw_function, embedding_projection_figure
from ctxvar.figures.plotting import AxisScale, axis_scale, scale_grid
from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import parquet_writer, tagged_schema, write_table
from ctxvar.stats.geometry import geometry_columns
from ctxvar.stats.token_table import TokenStats

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


def token_stats(path, layers: list[pd.DataFrame]) -> TokenStats:
    """tokens.parquet of these per-layer tables (one row group per layer), read back as the figures read it."""
    schema = pa.Schema.from_pandas(layers[0], preserve_index=False)
    with parquet_writer(path, tagged_schema(schema, {"model": "m"})) as writer:
        for table in layers:
            writer.write_table(pa.Table.from_pandas(table, schema=schema, preserve_index=False))
    return TokenStats(path)


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


def test_fig02_puts_a_massive_activation_on_a_log_axis_and_keeps_the_paper_linear(decoder, encoder):
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
    fit = plot.data.iloc[0]
    line = on_decoder.lines[0]  # the straight line a + b·M, drawn at points even on the log axis
    np.testing.assert_allclose(line.get_ydata(), fit.intercept + fit.slope * line.get_xdata())
    assert len(line.get_xdata()) > 2 and line.get_xdata().max() == pytest.approx(START_M)


def test_fig11_v_on_m_panels_take_a_log_axis_only_where_the_outlier_is(decoder):
    plot = per_model.frequency_grid(decoder, "decoder", ANALYSIS)
    grid = np.array(plot.figure.axes).reshape(-1, 4)
    assert [row[3].get_xscale() for row in grid] == ["linear", "log", "log", "log", "log"]  # layer 0 has none
    assert all(ax.get_xscale() == ax.get_yscale() == "linear" for ax in grid[:, :3].flat)  # log10 n, log10(1+·)
    v_on_m = plot.data[plot.data["x"] == "M"]
    assert list(v_on_m["x_scale"]) == ["linear", "log", "log", "log", "log"]


def overlapping_tick_labels(axis) -> list[tuple[str, str]]:
    """Pairs of neighbouring tick labels of a drawn matplotlib Axis whose boxes overlap."""
    renderer = axis.figure.canvas.get_renderer()
    labels = [(tick.label1.get_text(), tick.label1.get_window_extent(renderer)) for tick in axis.get_major_ticks()]
    labels = [(text, box) for text, box in labels if text]
    return [(a, b) for (a, box_a), (b, box_b) in zip(labels, labels[1:]) if box_a.overlaps(box_b)]


@pytest.mark.parametrize("power", [1.7, 3.4])  # V over 5 decades, over 10
def test_v_on_m_with_types_seen_once_keeps_v_readable_on_a_symlog_axis(tmp_path, power):
    """A third of the types seen once (V = 0) and V over 5 or 10 decades: symlog V, linear up to the decade under
    V's 1st percentile; the fitted line, whose slope is negative, stops at 0 instead of pulling the axis down 10
    decades, and no tick labels overlap."""
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
    FigureCanvasAgg(plot.figure).draw()
    v = stats.layer(1)["V"].to_numpy()
    assert ax.get_yscale() == "symlog"
    assert ax.yaxis.get_transform().linthresh == 10 ** np.floor(np.log10(np.percentile(v[v > 0], 1)))
    line = ax.lines[0].get_ydata()
    assert plot.data["slope"].iloc[0] < 0 and np.nanmin(line) >= 0 and np.isnan(line).any()
    assert ax.get_ylim()[0] >= -ax.yaxis.get_transform().linthresh
    assert not overlapping_tick_labels(ax.yaxis) and not overlapping_tick_labels(ax.xaxis)


def test_fig07_draws_the_outlying_m_on_a_log_axis(decoder):
    plot = per_model.frequency_scatter_middle(decoder, "decoder", ANALYSIS)
    q_ax, m_ax, v_ax = plot.figure.axes
    assert (q_ax.get_yscale(), m_ax.get_yscale(), v_ax.get_yscale()) == ("log", "log", "linear")
    assert list(plot.data["y_scale"]) == ["log", "log", "linear"]
    for ax, fit in zip((q_ax, m_ax), plot.data.itertuples()):  # x linear (log10 n), y log: the line still shows
        xs, ys = ax.lines[0].get_xdata(), ax.lines[0].get_ydata()
        drawn = np.isfinite(ys)
        assert drawn.sum() >= 100 and (ys[drawn] >= 0).all()
        np.testing.assert_allclose(ys[drawn], fit.intercept + fit.slope * xs[drawn])


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


def draw_every_figure(folder, model: str) -> dict:
    """Every figure of the catalogue, drawn by the function its entry names, for one model called ``model`` (and
    a second, "encoder", in the summary figures)."""
    decoder = token_stats(folder / "decoder.parquet", [decoder_layer(150, seed=layer) for layer in range(3)])
    encoder = token_stats(folder / "encoder.parquet", [paper_layer(150, seed=layer) for layer in range(3)])
    models = [model, "encoder"]
    layers, geometry = layers_table(models, n_layers=3), geometry_table(models, n_layers=3, batches=4)
    sentences = folder / "sentences.parquet"
    write_table(pa.table({"n_words": np.random.default_rng(0).integers(5, 40, 300)}), sentences)
    plots = {}
    for name, spec in {**MODEL_FIGURES, **GEOMETRY_MODEL_FIGURES}.items():
        inputs = {"layers": layers[layers["model"] == model], "geometry": geometry[geometry["model"] == model]}
        args = [decoder if need == "tokens" else inputs[need] for need in spec.needs]
        plots[name] = draw_function(spec)(*args, model, *([ANALYSIS] if "tokens" in spec.needs else []))
    summary = {"layers": layers, "geometry": geometry, "models": models_table(models, ["causal", "bidirectional"])}
    for name, spec in {**SUMMARY_FIGURES, **GEOMETRY_SUMMARY_FIGURES}.items():
        if spec.needs == ("tokens",):
            plots[name] = draw_function(spec)({model: decoder, "encoder": encoder}, ANALYSIS)
        elif spec.needs == ("sentences",):
            plots[name] = draw_function(spec)(sentences)
        else:
            plots[name] = draw_function(spec)(*(summary[need] for need in spec.needs), models)
    tokens = decoder.layer(1)
    selected = tokens.iloc[[0, 5, 9, 17]].assign(pc1=[3.0, -1.0, 0.5, 1.0], pc2=[1.0, 2.0, -1.0, 0.0])
    points = pd.DataFrame(
        {"token": np.repeat(selected["token"], 5), "pc1": np.random.default_rng(1).normal(size=20)}
    ).assign(pc2=np.random.default_rng(2).normal(size=20), sq_norm=1.0)
    plots["fig01_pca"] = draw_function(PCA_FIGURES["fig01_pca"])(points, selected, model, 1)
    plots["fig08_selected_tokens"] = draw_function(PCA_FIGURES["fig08_selected_tokens"])(
        tokens, selected, model, 1, ANALYSIS
    )
    steps = {f"{model}@step{step}": step for step in (0, 1000, 10000)}
    layer_tables = {m: layers_table([m], n_layers=3).drop(columns="model") for m in steps}
    geometry_tables = {m: geometry_table([m], n_layers=3).drop(columns="model") for m in steps}
    plots["checkpoints"] = draw_function(CHECKPOINT_FIGURE)(
        geometry_plots.checkpoint_table(steps, layer_tables, geometry_tables), model
    )
    plots["emb01_projection"] = draw_function(EMBEDDING_PROJECTION_FIGURE)(projection_points(), model, matrices_table())
    plots["embedding_checkpoints"] = draw_function(EMBEDDING_CHECKPOINT_FIGURE)(
        embedding_plots.checkpoint_table(steps, {m: matrices_table() for m in steps}), model
    )
    families = {model: steps, "other": {f"other@step{step}": step for step in (0, 10, 100)}}
    members = [m for family in families.values() for m in family]
    inputs = {
        "geometry": {m: geometry_table([m], n_layers=3).drop(columns="model") for m in members},
        "embedding_matrices": {m: matrices_table() for m in members},
    }
    for name, spec in ACROSS_CHECKPOINT_FIGURES.items():
        (need,) = spec.needs
        plots[name] = draw_function(spec)(across_checkpoint_table(families, inputs[need]))
    return plots


def models_table(models: list[str], attention: list) -> pd.DataFrame:
    """summary/models.csv's columns the encoder-decoder figure reads."""
    return pd.DataFrame({"model": models, "attention": attention})


@pytest.fixture(scope="module")
def every_figure(tmp_path_factory) -> dict:
    plots = draw_every_figure(tmp_path_factory.mktemp("every_figure"), LONG_NAME)
    names = {
        *MODEL_FIGURES,
        *GEOMETRY_MODEL_FIGURES,
        *SUMMARY_FIGURES,
        *GEOMETRY_SUMMARY_FIGURES,
        *PCA_FIGURES,
        *ACROSS_CHECKPOINT_FIGURES,
    }
    assert names <= set(plots) and len(plots) == len(names) + 3
    assert not any("not_drawn" in plot.data for plot in plots.values())
    for plot in plots.values():
        plot.figure.draw_without_rendering()  # the layout the PNG gets
    return plots


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


def test_every_axes_of_every_figure_has_its_labels(every_figure):
    missing = {name: unlabelled(plot.figure) for name, plot in every_figure.items()}
    assert not {name: axes for name, axes in missing.items() if axes}


def test_every_title_and_axis_label_stays_inside_its_figure_for_a_long_model_name(every_figure):
    for name, plot in every_figure.items():
        figure = plot.figure
        renderer = FigureCanvasAgg(figure).get_renderer()
        page = figure.bbox
        titles = [figure._suptitle] + [t for ax in figure.axes for t in (ax.title, ax._left_title, ax._right_title)]
        labels = [axis.label for ax in figure.axes if ax.get_visible() for axis in (ax.xaxis, ax.yaxis)]
        for text in titles + labels:
            if text is None or not text.get_text() or not text.get_visible():
                continue
            box = text.get_window_extent(renderer)
            inside = page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0 and box.y1 <= page.y1 + 1
            assert inside, (name, text.get_text(), box, page.bounds)
    suptitle = every_figure["emb01_projection"].figure._suptitle.get_text()
    assert suptitle.replace("\n", "").replace(" ", "").startswith(LONG_NAME.replace(" ", ""))  # the whole name


def test_the_embedding_projection_names_its_axes_and_shows_each_matrix_s_isotropy(every_figure, tmp_path):
    plot = every_figure["emb01_projection"]
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
    from_files = embedding_projection_figure(
        "emb01_projection", "m", tmp_path / "projection.parquet", tmp_path / "embedding_matrices.csv"
    )
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
