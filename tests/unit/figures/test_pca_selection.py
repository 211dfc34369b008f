"""Unit tier: figure helpers, the paper's token selection and PCA, and what figures draw (synthetic data)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from ctxvar.errors import ConfigError, InsufficientData
from ctxvar.extraction.type_points import TypePoints
from ctxvar.figures.cross_model import whole_set_values, within_between
from ctxvar.figures.pca_selection import (
    check_layer,
    draws_per_bin,
    frequency_bins,
    pca_components,
    select_tokens,
    table2,
    table2_latex,
)
from ctxvar.figures.per_model import decomposition_bars
from ctxvar.figures.plotting import grid_layers, middle_layer, panels, paper_style, place_labels, scale_groups
from ctxvar.run.disk import ROW_OVERHEAD, pca_points_bytes
from ctxvar.run.resources import ModelShape

ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}


def token_table(n_types=400, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.round(10 ** rng.uniform(0, 5.5, n_types)).astype(int)
    q = rng.uniform(50, 100, n_types)
    m = q * rng.uniform(0.2, 0.9, n_types)
    words = [f"{'x' * (i % 5 + 1)}{i}" for i in range(n_types)]  # lengths 2 … 8
    return pd.DataFrame({"token": words, "n": n, "Q": q, "M": m, "V": q - m})


def test_middle_and_grid_layers_follow_the_paper():
    assert middle_layer(13) == 6 and middle_layer(25) == 12 and middle_layer(5) == 2
    assert grid_layers(13) == [0, 3, 6, 9, 12]
    assert grid_layers(25) == [0, 6, 12, 18, 24]
    assert grid_layers(3) == [0, 1, 2]


def test_scale_groups_put_only_far_larger_series_on_the_right():
    assert scale_groups({"bert": 300.0, "roberta": 150.0, "gpt2": 9000.0}) == (["bert", "roberta"], ["gpt2"])
    assert scale_groups({"a": 1.0, "b": 9.0}) == (["a", "b"], [])
    assert scale_groups({"a": np.nan, "b": 1.0}) == (["a", "b"], [])


def test_frequency_bins_are_equal_width_and_close_on_the_right():
    values = np.array([1.0, 1.39, 1.4, 2.0, 3.0, 5.0])
    np.testing.assert_array_equal(frequency_bins(values, 10), [0, 0, 1, 2, 5, 9])


def test_draws_per_bin_follow_the_authors_formula():
    sizes = np.array([100, 25, 1, 0, 4])
    # 2 + ⌊4·√(|T_r| / max|T_r|)⌋, at most |T_r|
    np.testing.assert_array_equal(draws_per_bin(sizes), [6, 4, 1, 0, 2])


def test_selection_takes_filtered_types_with_enough_characters_bin_by_bin():
    tokens = token_table()
    chosen = select_tokens(tokens, ANALYSIS, min_chars=3, n_bins=10, seed=3)
    log_n = np.log10(chosen["n"])
    assert ((log_n >= 1) & (log_n <= 5)).all() and (chosen["token"].str.len() >= 3).all()
    candidates = tokens[(np.log10(tokens["n"]).between(1, 5)) & (tokens["token"].str.len() >= 3)]
    bins = frequency_bins(np.log10(candidates["n"].to_numpy()), 10)
    expected = draws_per_bin(np.bincount(bins, minlength=10))
    np.testing.assert_array_equal(np.bincount(chosen["bin"], minlength=10), expected)
    assert chosen["bin"].is_monotonic_increasing and not chosen["token"].duplicated().any()


def test_selection_is_seeded():
    tokens = token_table()
    first = select_tokens(tokens, ANALYSIS, 3, 10, seed=3)
    assert first.equals(select_tokens(tokens.sample(frac=1, random_state=1), ANALYSIS, 3, 10, seed=3))
    assert not first["token"].equals(select_tokens(tokens, ANALYSIS, 3, 10, seed=4)["token"])


def test_selection_without_candidates_says_what_to_change():
    with pytest.raises(InsufficientData, match="min_chars"):
        select_tokens(token_table(), ANALYSIS, min_chars=50, n_bins=10, seed=3)


def test_pca_components_span_the_top_two_axes_of_the_means_and_the_origin():
    rng = np.random.default_rng(0)
    means = rng.normal(size=(20, 8)) * np.arange(1, 9) + 3.0
    components = pca_components(means)
    points = np.vstack([means, np.zeros(8)])
    values, vectors = np.linalg.eigh(np.cov(points, rowvar=False))
    top = vectors[:, ::-1][:, :2].T
    np.testing.assert_allclose(np.abs(components @ top.T), np.eye(2), atol=1e-9)
    # after shifting the projected origin to (0, 0), a point's coordinates are x·W
    centre = points.mean(axis=0)
    shifted = (means - centre) @ components.T - (0 - centre) @ components.T
    np.testing.assert_allclose(shifted, means @ components.T, atol=1e-9)
    assert (components[np.arange(2), np.abs(components).argmax(axis=1)] > 0).all()


def test_pca_layer_defaults_to_the_middle_and_is_range_checked():
    assert check_layer(None, 13) == 6 and check_layer(0, 13) == 0
    with pytest.raises(ConfigError, match="figures.pca.layer: 13"):
        check_layer(13, 13)


def test_table2_sorts_by_frequency_and_escapes_latex():
    selected = pd.DataFrame(
        {
            "token": ["a_b", "#x", "c&d"],
            "n": [10, 1000, 100],
            "Q": [1.0, 2.0, 3.0],
            "M": [0.5, 1.5, 2.5],
            "V": [0.5, 0.5, 0.5],
        }
    )
    table = table2(selected)
    assert list(table["token"]) == ["#x", "c&d", "a_b"]
    latex = table2_latex(table, "my_model", 6)
    assert r"\#x" in latex and r"c\&d" in latex and r"a\_b" in latex and r"my\_model" in latex
    assert "1000" in latex and r"\begin{tabular}" in latex


def test_type_points_keep_exactly_the_selected_rows_of_their_layer_in_batch_order():
    torch.manual_seed(0)
    hidden = [[torch.randn(2, 5, 6) for _ in range(3)] for _ in range(2)]  # per batch, per layer: (B, T, d)
    positions = [torch.tensor([0, 1, 2, 5, 6, 7]), torch.tensor([0, 1, 5])]
    type_index = np.array([0, 1, 2, 1, 3, 1, 3, 0, 1])  # the batches' tokens, in batch order
    batches = SimpleNamespace(
        type_index=type_index, tokens=np.array([4, 5, 6, 7, 8, 0, 1, 2, 3]), real=np.array([0, 6, 9])
    )
    points = TypePoints(1, np.array([False, True, False, True]), batches, 6, torch.device("cpu"))
    assert points.device_bytes() == 4 * 6 * 6
    for batch in range(2):
        for layer in range(3):
            points.add(layer, hidden[batch][layer].reshape(-1, 6), positions[batch])
    kept, batch_of, rows = points.to_numpy()
    expected = [hidden[0][1].reshape(-1, 6)[positions[0][[1, 3, 4, 5]]], hidden[1][1].reshape(-1, 6)[[0, 5]]]
    np.testing.assert_array_equal(kept, [1, 1, 3, 1, 3, 1])
    np.testing.assert_array_equal(batch_of, [0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(rows, torch.cat(expected).numpy())


def test_type_points_refuse_a_batch_left_out():
    batches = SimpleNamespace(type_index=np.array([0, 1]), tokens=np.array([0, 1]), real=np.array([0, 1, 2]))
    points = TypePoints(0, np.array([True, True]), batches, 2, torch.device("cpu"))
    points.add(0, torch.zeros(1, 2), torch.tensor([0]))
    with pytest.raises(RuntimeError, match="1 of 2 batches"):
        points.to_numpy()


def test_the_disk_estimate_of_fig1_points_is_bounded_by_the_tokens_and_the_types_drawn():
    shape = ModelShape(13, 768, 30522)
    config = {"figures": {"pca": {"n_bins": 10}}, "analysis": {"max_log10_n": 2}}
    assert pca_points_bytes(1000, shape, config) == 1000 * (4 * 768 + ROW_OVERHEAD)
    assert pca_points_bytes(10**6, shape, config) == 6 * 10 * 100 * (4 * 768 + ROW_OVERHEAD)


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


def test_every_catalogue_entry_names_its_draw_function():
    from ctxvar.figures.catalogue import (
        CHECKPOINT_FIGURE,
        GEOMETRY_MODEL_FIGURES,
        GEOMETRY_SUMMARY_FIGURES,
        MODEL_FIGURES,
        PCA_FIGURES,
        SUMMARY_FIGURES,
    )
    from ctxvar.figures.draw import draw_function

    entries = {**MODEL_FIGURES, **SUMMARY_FIGURES, **PCA_FIGURES, **GEOMETRY_MODEL_FIGURES, **GEOMETRY_SUMMARY_FIGURES}
    for name, spec in {**entries, "checkpoints": CHECKPOINT_FIGURE}.items():
        assert callable(draw_function(spec)), name


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
    from ctxvar.figures.catalogue import GEOMETRY_MODEL_FIGURES, GEOMETRY_SUMMARY_FIGURES, accumulated

    every = {"covariance": True, "cosine": True, "twonn": True}
    assert accumulated(GEOMETRY_SUMMARY_FIGURES, every) == GEOMETRY_SUMMARY_FIGURES
    assert list(accumulated(GEOMETRY_SUMMARY_FIGURES, {**every, "twonn": False})) == ["geo01_isotropy", "geo02_cosine"]
    assert list(accumulated(GEOMETRY_SUMMARY_FIGURES, {**every, "covariance": False})) == [
        "geo02_cosine",
        "geo03_intrinsic_dimension",
    ]
    assert list(accumulated(GEOMETRY_MODEL_FIGURES, {**every, "covariance": False})) == ["geo05_cv_by_min_count"]


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


def test_merged_points_refuse_a_shard_with_no_chosen_types_beside_shards_with_them(tmp_path):
    """A shard's file of no layer (written when types.csv chose none) beside files of a layer: the shards were
    extracted with different choices, and the merged file would lack that shard's points without a word."""
    import pyarrow as pa

    from ctxvar.errors import StatisticsError
    from ctxvar.extraction.pca_points import merge_points, points_schema
    from ctxvar.files.parquet import vector_column, write_table

    d = 2
    rows = np.ones((1, d), np.float32)
    chosen = pa.table([pa.array(["a"]), pa.array([0], pa.int32()), vector_column(rows, "<f4")], schema=points_schema(d))
    write_table(chosen, tmp_path / "points0.parquet", metadata={"model_id": "m", "shard": 0, "layer": 1, "d": d})
    none = {"model_id": "m", "shard": 1, "layer": None, "d": d}
    write_table(points_schema(d).empty_table(), tmp_path / "points1.parquet", metadata=none)
    with pytest.raises(StatisticsError, match="do not belong with"):
        merge_points([tmp_path / "points0.parquet", tmp_path / "points1.parquet"], tmp_path / "points.parquet")
    merge_points([tmp_path / "points1.parquet"], tmp_path / "none.parquet")  # no types chosen at all: one layer
