"""Unit tier: what figures draw from the run's tables (synthetic data): the paper's layers, scale groups and second
axes, bars that stack to one, labels that do not overlap, whole-set values on one log axis,
 and the panels of a switched-off geometry metric left out. Figures refuse tables of one model from
different sums, as the summary does: the checkpoint figure joins each checkpoint's layers.csv and geometry.csv by
layer; every other figure draws from one table per model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from ctxvar.errors import StatisticsError
from ctxvar.figures import scopes
from ctxvar.figures.catalogue import FIGURES, figures_of
from ctxvar.figures.cross_model import whole_set_values, within_between
from ctxvar.figures.draw import draw
from ctxvar.figures.per_model import decomposition_bars
from ctxvar.figures.plotting import grid_layers, middle_layer, panels, paper_style, place_labels, scale_groups
from ctxvar.files.atomic import write_csv
from ctxvar.stats.provenance import FINISH

STEPS = {"m@step0": 0, "m@step100": 100}


def checkpoint_tables(folder, geometry_sums: dict[str, str]) -> tuple[list[str], list[str]]:
    """Each checkpoint's layers.csv (from sums "h-{model}") and geometry.csv (from ``geometry_sums[model]``)."""
    layers_paths, geometry_paths = [], []
    for model in STEPS:
        (folder / model).mkdir(parents=True)
        layers = pd.DataFrame(
            {"layer": range(3), "final_norm": False, "cv_Q": 0.5, "M": 1.0, "Q": 2.0, "config_hash": f"h-{model}"}
        )
        geometry = pd.DataFrame(
            {"layer": range(3), "anisotropy": 0.3, "twonn": 7.0, "config_hash": geometry_sums[model]}
        )
        write_csv(layers, folder / model / "layers.csv")
        write_csv(geometry, folder / model / "geometry.csv")
        layers_paths.append(str(folder / model / "layers.csv"))
        geometry_paths.append(str(folder / model / "geometry.csv"))
    return layers_paths, geometry_paths


def test_the_checkpoint_figure_draws_tables_of_the_same_sums(tmp_path):
    layers, geometry = checkpoint_tables(tmp_path, {model: f"h-{model}" for model in STEPS})
    plot = draw("checkpoints", {"layers": layers, "geometry": geometry}, {"family": "m", "steps": STEPS})
    assert set(plot.data["model"]) == set(STEPS)


def test_the_checkpoint_figure_refuses_a_geometry_of_other_sums_naming_both_files(tmp_path):
    layers, geometry = checkpoint_tables(tmp_path, {"m@step0": "h-m@step0", "m@step100": "older"})
    with pytest.raises(StatisticsError) as error:
        draw("checkpoints", {"layers": layers, "geometry": geometry}, {"family": "m", "steps": STEPS})
    message = str(error.value)
    assert message.startswith("model 'm@step100': its files come from different sums")
    assert layers[1] in message and geometry[1] in message and message.endswith(FINISH) and "\n" not in message


def test_every_other_figure_draws_one_table_per_model():
    """Why no other figure checks: a model figure reads one of its tables; a summary figure the summary tables
    (stacked layers, stacked geometry, models.csv: written by one job, which checks each model's tables and
    run.json against each other), or one tokens.parquet per model; a figure across checkpoints one table of each."""
    for figure in figures_of(scopes.MODEL) + figures_of(scopes.ACROSS_CHECKPOINTS):
        assert len(figure.needs) == 1, figure
    for figure in figures_of(scopes.SUMMARY):
        assert len(figure.needs) == 1 or set(figure.needs) <= {"layers", "geometry", "models"}, figure


def test_the_pca_figures_refuse_a_selection_made_from_other_sums(tmp_path):
    """Figs. 1 and 8 and Table 2 read the model's selection.csv beside its tokens.parquet."""
    import pyarrow as pa

    from ctxvar.figures.pca_plots import pca_outputs
    from ctxvar.figures.pca_selection import SELECTION_COLUMNS
    from ctxvar.files.parquet import write_table

    tokens = pa.table({"layer": pa.array([0], pa.int16()), "token": ["x"], "n": [3], "Q": [0.5], "M": [0.1]})
    write_table(tokens.append_column("V", pa.array([0.4])), tmp_path / "tokens.parquet", {"config_hash": "now"})
    row = {"layer": 0, "token": "x", "n": 3, "Q": 0.5, "M": 0.1, "V": 0.4, "bin": 0, "pc1": 0.0, "pc2": 0.0}
    write_csv(pd.DataFrame([row], columns=SELECTION_COLUMNS).assign(config_hash="before"), tmp_path / "selection.csv")
    with pytest.raises(StatisticsError) as error:
        pca_outputs(
            tmp_path / "points.parquet",
            tmp_path / "selection.csv",
            tmp_path / "components.csv",
            tmp_path / "tokens.parquet",
            "m",
            {},
            None,
        )
    message = str(error.value)
    assert message.startswith("model 'm': its files come from different sums") and message.endswith(FINISH)
    assert f"{tmp_path / 'selection.csv'} from sums before" in message


def test_a_selection_names_the_sums_of_the_tokens_it_was_selected_from(tmp_path, monkeypatch):
    """Even when no type can be selected (its empty selection.csv still has the column)."""
    import pyarrow as pa

    from ctxvar.figures import pca_selection
    from ctxvar.files.parquet import write_table

    tokens = pa.table({"layer": pa.array([0], pa.int16()), "token": ["x"], "n": [3], "Q": [0.5], "M": [0.1]})
    write_table(tokens.append_column("V", pa.array([0.4])), tmp_path / "tokens.parquet", {"config_hash": "now"})
    selected = pd.DataFrame([{c: 0 for c in pca_selection.SELECTION_COLUMNS}])
    monkeypatch.setattr(pca_selection, "selection", lambda *args: (selected, __import__("numpy").zeros((2, 4))))
    table, _ = pca_selection.select_pca_tokens("stats", tmp_path / "tokens.parquet", {"layer": 0}, {})
    assert table["config_hash"].tolist() == ["now"]

    def too_few(*args):
        raise pca_selection.InsufficientData("no type")

    monkeypatch.setattr(pca_selection, "selection", too_few)
    table, components = pca_selection.select_pca_tokens("stats", tmp_path / "tokens.parquet", {"layer": 0}, {})
    assert table.empty and "config_hash" in table.columns and components.empty


def test_middle_and_grid_layers_follow_the_paper():
    assert middle_layer(13) == 6 and middle_layer(25) == 12 and middle_layer(5) == 2
    assert grid_layers(13) == [0, 3, 6, 9, 12]
    assert grid_layers(25) == [0, 6, 12, 18, 24]
    assert grid_layers(3) == [0, 1, 2]


def test_scale_groups_put_only_far_larger_series_on_the_right():
    assert scale_groups({"bert": 300.0, "roberta": 150.0, "gpt2": 9000.0}) == (["bert", "roberta"], ["gpt2"])
    assert scale_groups({"a": 1.0, "b": 9.0}) == (["a", "b"], [])
    assert scale_groups({"a": np.nan, "b": 1.0}) == (["a", "b"], [])


def layers_frame(models=("a", "b"), n_layers=5, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i, model in enumerate(models):
        for layer in range(n_layers):
            q = rng.uniform(50, 100) * (1000 if i == 1 else 1)
            m, v_w = q * rng.uniform(0.1, 0.5), q * rng.uniform(0.1, 0.4)
            rows.append(
                {
                    "model": model,
                    "layer": layer,
                    "depth": layer / (n_layers - 1),
                    "Q": q,
                    "M": m,
                    "V": q - m,
                    "V_W": v_w,
                    "V_B": q - m - v_w,
                }
            )
    return pd.DataFrame(rows)


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


def test_far_larger_model_goes_on_a_second_axis_but_ratios_do_not():
    layers = layers_frame()
    plot = within_between(layers, ["a", "b"])
    assert set(plot.data.loc[plot.data["model"] == "b", "axis"]) == {"right"}
    first, twin = plot.figure.axes[0], plot.figure.axes[3]  # V_W panel and its twin
    assert [line.get_label() for line in first.lines] == ["a"] and [line.get_label() for line in twin.lines] == ["b"]
    ratio_panel = plot.figure.axes[2]
    assert sorted(line.get_label() for line in ratio_panel.lines) == ["a", "b"]
    assert [text.get_text() for text in plot.figure.legends[0].texts] == ["a", "b"]


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


def test_a_switched_off_geometry_metric_asks_for_no_figure_of_it():
    every = {"covariance": True, "cosine": True, "twonn": True}

    def left_out(geometry):
        return [figure.name for figure in FIGURES if not figure.drawn_with(geometry)]

    assert left_out(every) == []
    assert left_out({**every, "twonn": False}) == ["geo03_intrinsic_dimension", "twonn_by_step"]
    assert left_out({**every, "cosine": False}) == ["geo02_cosine"]
    assert left_out({**every, "covariance": False}) == [
        "geo04_spectrum",
        "geo01_isotropy",
        "geo06_anisotropy_encoders_decoders",
    ]


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
