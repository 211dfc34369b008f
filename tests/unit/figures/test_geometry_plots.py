"""Unit tier: the figures of Razzhigaev et al. and Machina & Mercer that put several models on one figure (synthetic
tables): the anisotropy of encoders against decoders, told apart by models.csv's ``attention``; the TwoNN dimension
averaged over layers, and I(W), against the training step, one line per checkpoint family. Each draws exactly the
numbers of its CSV, and the workflow's draw functions read them from the files the rules give them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxvar.errors import InsufficientData
from ctxvar.figures import embedding_plots, geometry_plots
from ctxvar.figures.cross_model import BAND_GID
from ctxvar.figures.draw import draw
from ctxvar.figures.scopes import across_checkpoint_table
from ctxvar.files.atomic import write_csv

from .test_draw_artists import band_of, geometry_table, matrices_table, models_table

MODELS = ["tiny-bert", "gaussian-null", "tiny-gpt2", "tiny-roberta", "other"]
ATTENTION = ["bidirectional", "none", "causal", "bidirectional", np.nan]  # the null has none; "other" is not known


def lines(ax) -> dict[str, np.ndarray]:
    """label → the y values of the line so labelled on ``ax``."""
    return {line.get_label(): np.asarray(line.get_ydata(), dtype=float) for line in ax.lines}


# --- encoders against decoders -------------------------------------------------------------------------------------


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


# --- across checkpoints --------------------------------------------------------------------------------------------

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
