"""Unit tier: the paper's token selection and PCA (ctxvar.figures.pca_selection) on synthetic token tables:
frequency bins, draws per bin, the seeded selection and what it asks to change when nothing qualifies, the top two
axes of the means, the PCA layer, and Table 2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxvar.errors import ConfigError, InsufficientData
from ctxvar.figures.pca_selection import (
    check_layer,
    draws_per_bin,
    frequency_bins,
    pca_components,
    select_tokens,
    table2,
    table2_latex,
)

ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}


def token_table(n_types=400, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.round(10 ** rng.uniform(0, 5.5, n_types)).astype(int)
    q = rng.uniform(50, 100, n_types)
    m = q * rng.uniform(0.2, 0.9, n_types)
    words = [f"{'x' * (i % 5 + 1)}{i}" for i in range(n_types)]  # lengths 2 … 8
    return pd.DataFrame({"token": words, "n": n, "Q": q, "M": m, "V": q - m})


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
