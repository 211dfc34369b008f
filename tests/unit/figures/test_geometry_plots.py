"""Unit tier: the geometry figures (ctxvar.figures.geometry_plots), drawn from synthetic tables: the anisotropy of
encoders against decoders, told apart by models.csv's ``attention``, and the TwoNN dimension averaged over layers
against the training step, one line per checkpoint family, each drawing exactly the numbers of its CSV, also read
from the files the rules give them; the sample batches' spread shaded as their mean ± std; the panels of a
switched-off metric left out, or a placeholder that says why; the spectrum ticked at whole components and layers,
with a final norm promised only where it is drawn, and the Gaussian reference's dashes in the legend; the C.V. of Q
against n_min with its legend on the canvas, naming a flat layer it cannot draw on its log axes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.lines import Line2D
from matplotlib.offsetbox import DrawingArea, HPacker, TextArea

from ctxvar.errors import InsufficientData
from ctxvar.figures import geometry_plots
from ctxvar.figures.cross_model import BAND_GID, BAND_LABEL, FINAL_NORM_LABEL
from ctxvar.figures.draw import draw
from ctxvar.figures.scopes import across_checkpoint_table
from ctxvar.files.atomic import write_csv

from support.figure_checks import Drawn, drawn_texts, laid_out, overlapping_texts, texts_off_canvas
from support.figure_tables import geometry_table, layers_table, models_table
from support.quick_start_figures import DECODER, ENCODER, draw_quick_start_with_a_decoder, token_stats
from support.quick_start_figures import MODELS as QUICK_START_MODELS

MODELS = ["tiny-bert", "gaussian-null", "tiny-gpt2", "tiny-roberta", "other"]
ATTENTION = ["bidirectional", "none", "causal", "bidirectional", np.nan]  # the null has none; "other" is not known
NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> dict[str, Drawn]:
    """The TwoNN dimension, the spectra and the anisotropy of encoders against decoders of the quick start
    (all-MiniLM-L6-v2 and the Gaussian null) with SmolLM2 added, drawn from tables shaped like theirs
    (:func:`~support.quick_start_figures.draw_quick_start_with_a_decoder`)."""
    drawn = {"geo03_intrinsic_dimension", "geo04_spectrum", "geo06_anisotropy_encoders_decoders"}
    return laid_out(draw_quick_start_with_a_decoder(tmp_path_factory.mktemp("quick_start"), drawn))


def lines(ax) -> dict[str, np.ndarray]:
    """label → the y values of the line so labelled on ``ax``."""
    return {line.get_label(): np.asarray(line.get_ydata(), dtype=float) for line in ax.lines}


# --- encoders against decoders ----------------------------------------------------------------------------------------


def left_out(plot) -> str:
    """The legend's title, unwrapped: the models of neither kind."""
    return " ".join(plot.figure.legends[0].get_title().get_text().split())


def test_encoders_and_decoders_get_a_panel_each_sharing_y():
    geometry = geometry_table(MODELS, n_layers=4, batches=4)
    plot = geometry_plots.encoders_decoders(geometry, models_table(MODELS, ATTENTION), MODELS)
    encoders, decoders = plot.figure.axes
    assert (encoders.get_title(), decoders.get_title()) == ("Encoders", "Decoders")
    assert encoders.get_shared_y_axes().joined(encoders, decoders)
    for ax, members in ((encoders, ["tiny-bert", "tiny-roberta"]), (decoders, ["tiny-gpt2"])):
        drawn = {label: y for label, y in lines(ax).items() if label in MODELS}
        assert sorted(drawn) == sorted(members)
        for model in members:
            np.testing.assert_array_equal(drawn[model], geometry.loc[geometry["model"] == model, "anisotropy"])
    assert left_out(plot) == "left out: gaussian-null (no attention), other (attention not known)"
    data = plot.data
    assert list(dict.fromkeys(data["model"])) == ["tiny-bert", "tiny-roberta", "tiny-gpt2"]  # exactly what is drawn
    assert set(data.loc[data["group"] == "encoders", "attention"]) == {"bidirectional"}
    assert set(data.loc[data["group"] == "decoders", "attention"]) == {"causal"}
    drawn = geometry.set_index(["model", "layer"]).loc[list(zip(data["model"], data["layer"]))]
    np.testing.assert_array_equal(data["anisotropy"], drawn["anisotropy"])
    np.testing.assert_array_equal(data["anisotropy_batch_std"], drawn["anisotropy_batch_std"])


def test_the_batch_band_is_the_per_batch_anisotropy_mean_plus_minus_std():
    geometry = geometry_table(MODELS, n_layers=4, batches=4)
    plot = geometry_plots.encoders_decoders(geometry, models_table(MODELS, ATTENTION), MODELS)
    decoders = plot.figure.axes[1]
    rows = geometry[geometry["model"] == "tiny-gpt2"]
    vertices = band_of(decoders, "C2")  # tiny-gpt2 is the third model: its colour in every cross-model figure
    for depth, mean, std in zip(rows["depth"], rows["anisotropy_batch_mean"], rows["anisotropy_batch_std"]):
        at = vertices[np.isclose(vertices[:, 0], depth), 1]
        np.testing.assert_allclose([at.min(), at.max()], [mean - std, mean + std])
    one = geometry_plots.encoders_decoders(geometry_table(MODELS, 4), models_table(MODELS, ATTENTION), MODELS)
    assert not [c for ax in one.figure.axes for c in ax.collections if c.get_gid() == BAND_GID]
    assert "anisotropy_batch_std" not in one.data


def test_a_run_of_encoders_alone_gets_one_panel_and_one_of_neither_kind_a_placeholder_reason():
    """Neither kind: every attention empty, or a models.csv without the column (sums extracted before)."""
    geometry = geometry_table(MODELS, n_layers=3)
    encoders = models_table(MODELS, ["bidirectional"] * len(MODELS))
    plot = geometry_plots.encoders_decoders(geometry, encoders, MODELS)
    assert [ax.get_title() for ax in plot.figure.axes] == ["Encoders"]
    assert left_out(plot) == ""
    with pytest.raises(InsufficientData, match="no model is known as an encoder or a decoder"):
        geometry_plots.encoders_decoders(geometry, models_table(MODELS, [np.nan] * len(MODELS)), MODELS)
    older = pd.DataFrame({"model": MODELS})  # a models.csv made before the column existed
    with pytest.raises(InsufficientData, match="extract them again"):
        geometry_plots.encoders_decoders(geometry, older, MODELS)


def test_the_summary_rule_draws_it_from_summary_geometry_and_models_csv(tmp_path):
    """models.csv as summarise_models writes it, read back: the Gaussian null's "none" stays a word, an unknown
    attention is an empty cell."""
    write_csv(geometry_table(MODELS, n_layers=3), tmp_path / "geometry.csv")
    write_csv(models_table(MODELS, ATTENTION), tmp_path / "models.csv")
    inputs = {"geometry": tmp_path / "geometry.csv", "models": tmp_path / "models.csv"}
    plot = draw("geo06_anisotropy_encoders_decoders", inputs, {"models": MODELS})
    assert "not_drawn" not in plot.data and set(plot.data["model"]) == {"tiny-bert", "tiny-roberta", "tiny-gpt2"}
    assert left_out(plot) == "left out: gaussian-null (no attention), other (attention not known)"


def test_the_encoder_alone_gets_no_final_norm_entry():
    geometry = geometry_table(["encoder"], batches=1)
    plot = geometry_plots.encoders_decoders(geometry, models_table(["encoder"], ["bidirectional"]), ["encoder"])
    assert FINAL_NORM_LABEL not in [text.get_text() for text in plot.figure.legends[0].texts]


def test_the_final_norm_is_promised_only_where_it_is_drawn(quick_start):
    """MiniLM has no final norm: its spectrum's colorbar does not mention one; the decoder's does."""
    label = {model: quick_start[f"geo04_spectrum/{model}"].figure.axes[-1].get_ylabel() for model in QUICK_START_MODELS}
    assert label[ENCODER] == "layer" and "final norm" in label[DECODER]
    encoders_decoders = quick_start["geo06_anisotropy_encoders_decoders"].figure
    rings = [ax for ax in encoders_decoders.axes for c in ax.collections if c.get_label() == FINAL_NORM_LABEL]
    assert [ax.get_title() for ax in rings] == ["Decoders"]


# --- the sample batches' spread ---------------------------------------------------------------------------------------


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


# --- a switched-off metric --------------------------------------------------------------------------------------------


def geometry_frame(models=("a", "b"), n_layers=4, seed=0) -> pd.DataFrame:
    """A stacked geometry table (summary/geometry.csv) of random positive metrics."""
    from ctxvar.stats.geometry import geometry_columns

    rng = np.random.default_rng(seed)
    rows = [
        {
            **{column: rng.uniform(0.1, 1.0) for column in geometry_columns(3)},
            "model": model,
            "layer": layer,
            "depth": layer / (n_layers - 1),
            "final_norm": False,
        }
        for model in models
        for layer in range(n_layers)
    ]
    return pd.DataFrame(rows)


def test_intrinsic_dimension_without_any_twonn_value_is_a_placeholder_not_a_matplotlib_error():
    """geometry.twonn: false leaves twonn NaN; a log axis of NaN alone raised ValueError in matplotlib."""
    from ctxvar.figures.geometry_plots import intrinsic_dimension
    from ctxvar.figures.plotting import plot_or_placeholder

    geometry = geometry_frame()
    intrinsic_dimension(geometry, ["a", "b"]).figure.savefig(__import__("io").BytesIO(), format="png")
    geometry[["twonn", "twonn_gaussian"]] = np.nan
    plot = plot_or_placeholder("geo03_intrinsic_dimension", lambda: intrinsic_dimension(geometry, ["a", "b"]))
    assert "no layer of any model has a TwoNN dimension" in plot.data["not_drawn"][0]


def test_checkpoints_leave_out_the_panel_of_a_switched_off_metric():
    from ctxvar.figures.geometry_plots import checkpoint_table, checkpoints

    geometry = {model: part.drop(columns="model") for model, part in geometry_frame(("s0", "s1")).groupby("model")}
    layers = {
        model: pd.DataFrame({"layer": range(4), "final_norm": False, "cv_Q": 0.5, "M": 1.0, "Q": 2.0})
        for model in geometry
    }
    for frame in geometry.values():
        frame["twonn"] = np.nan  # geometry.twonn: false
    plot = checkpoints(checkpoint_table({"s0": 0, "s1": 100}, layers, geometry), "family")
    labels = [ax.get_ylabel() for ax in plot.figure.axes if ax.get_ylabel() and "layer" not in ax.get_ylabel()]
    assert labels == ["anisotropy $\\lambda_1/\\mathrm{tr}\\,C$", "C.V. of $Q(X_t)$", "$M(X)/Q(X)$"]
    assert "twonn" not in plot.data.columns and {"anisotropy", "cv_Q", "M_over_Q"} <= set(plot.data.columns)


# --- the Gaussian reference, the spectrum and the C.V. against n_min --------------------------------------------------


def test_the_gaussian_reference_s_legend_entry_shows_each_model_s_dash(quick_start):
    figure = quick_start["geo03_intrinsic_dimension"].figure
    entries = [row.get_children() for row in figure.legends[0].findobj(HPacker)]  # (handle, text) per entry
    entries = [entry for entry in entries if [type(box) for box in entry] == [DrawingArea, TextArea]]
    ((handle, _),) = [(handle, text) for handle, text in entries if "Gaussian" in text.get_text()]
    dashes = {to_hex(line.get_color()) for line in handle.findobj(Line2D) if line.get_linestyle() == "--"}
    drawn = {to_hex(line.get_color()) for line in figure.axes[0].lines if line.get_linestyle() == "--"}
    assert dashes == drawn and len(drawn) == len(QUICK_START_MODELS)


def test_a_spectrum_of_few_layers_is_ticked_at_whole_components_and_whole_layers():
    """Three hidden states: the colorbar's ticks are layers (0, 1, 2), the x axis's components (1 … 10), none of them
    halfway between two."""
    plot = geometry_plots.spectrum(geometry_table(["m"], n_layers=3), "m")
    plot.figure.draw_without_rendering()
    ax, colorbar = plot.figure.axes
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (colorbar.yaxis, colorbar.get_ylim())):
        ticks = [tick for tick in axis.get_majorticklocs() if low <= tick <= high]
        assert len(ticks) >= 2 and all(float(tick).is_integer() for tick in ticks), ticks


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


# --- across checkpoints -----------------------------------------------------------------------------------------------


FAMILIES = {
    "pythia": {"pythia@step0": 0, "pythia@step1000": 1000, "pythia@step143000": 143000},
    "gpt2": {"gpt2@step0": 0, "gpt2@step100": 100},
}


CHECKPOINTS = [model for steps in FAMILIES.values() for model in steps]


def checkpoint_geometry() -> dict[str, pd.DataFrame]:
    """Each checkpoint's geometry.csv; the second one's layer 1 has no TwoNN (too few distinct points)."""
    tables = {m: geometry_table([m], n_layers=4, seed=i).drop(columns="model") for i, m in enumerate(CHECKPOINTS)}
    tables["pythia@step1000"].loc[1, "twonn"] = np.nan
    return tables


def test_twonn_by_step_draws_the_mean_over_the_layers_one_line_per_family():
    tables = checkpoint_geometry()
    plot = geometry_plots.twonn_by_step(across_checkpoint_table(FAMILIES, tables))
    (ax,) = plot.figure.axes
    data = plot.data
    assert list(data["model"]) == CHECKPOINTS and list(data.columns) == [
        "family",
        "model",
        "step",
        "twonn_mean_over_layers",
        "n_layers",
        "layers",
    ]
    for row in data.itertuples():
        twonn = tables[row.model]["twonn"]
        assert row.twonn_mean_over_layers == pytest.approx(twonn.mean())  # NaN left out
        assert row.n_layers == twonn.notna().sum() and row.layers == "0-3"
    assert data.loc[data["model"] == "pythia@step1000", "n_layers"].item() == 3
    drawn = lines(ax)
    assert list(drawn) == ["pythia", "gpt2"]
    for family, steps in FAMILIES.items():
        np.testing.assert_array_equal(drawn[family], data.loc[data["family"] == family, "twonn_mean_over_layers"])
        line = next(line for line in ax.lines if line.get_label() == family)
        assert list(line.get_xdata()) == list(steps.values())
    assert ax.get_xscale() == "symlog" and ax.get_xlabel() == "training step"  # 100 to 143,000: three decades
    assert ax.xaxis.get_transform().linthresh == 100


def test_twonn_by_step_without_twonn_is_a_placeholder_reason():
    tables = checkpoint_geometry()
    for table in tables.values():
        table["twonn"] = np.nan  # geometry.twonn: false
    with pytest.raises(InsufficientData, match="no checkpoint has a TwoNN dimension"):
        geometry_plots.twonn_by_step(across_checkpoint_table(FAMILIES, tables))


def test_the_checkpoint_rule_reads_each_checkpoint_s_file_in_the_order_of_its_families(tmp_path):
    tables = checkpoint_geometry()
    paths = []
    for model in CHECKPOINTS:
        paths.append(tmp_path / f"{model}.csv")
        write_csv(tables[model], paths[-1])
    plot = draw("twonn_by_step", {"geometry": paths}, {"families": FAMILIES})
    assert list(plot.data["model"]) == CHECKPOINTS and "not_drawn" not in plot.data
    empty = draw("twonn_by_step", {"geometry": []}, {"families": {}})
    assert "no models[] entry with revisions" in empty.data["not_drawn"][0]
