"""Workflow tier: the demo's geometry outputs, the Gaussian null, the checkpoint sweep and its figures."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.stats.geometry import geometry_columns

CHECKPOINTS = ["trained-gpt2@step0", "trained-gpt2@step100", "trained-gpt2@step400"]
MODELS = ["tiny-bert", "tiny-roberta", "gaussian-null", *CHECKPOINTS]


def test_every_model_has_its_geometry_table(demo):
    summary = pd.read_csv(demo / "results" / "demo" / "summary" / "geometry.csv")
    assert list(summary["model"].unique()) == MODELS
    for model in MODELS:
        table = pd.read_csv(demo / "results" / "demo" / model / "geometry.csv")
        assert list(table.columns) == geometry_columns(10)
        one_batch = [c for c in table.columns if c.endswith("_std")] if (table["sample_batches"] == 1).all() else []
        assert table.drop(columns=["final_norm", *one_batch]).notna().all().all(), model  # a std needs 2 batches
        assert ((table["anisotropy"] > 0) & (table["anisotropy"] <= 1)).all() and (table["twonn_points"] <= 4096).all()
        np.testing.assert_allclose(table["explained_1"], table["anisotropy"], rtol=1e-12)
        layers = pd.read_csv(demo / "results" / "demo" / model / "layers.csv")
        assert list(table["final_norm"]) == list(layers["final_norm"])


def test_final_norm_flags_only_the_last_layer_of_pre_ln_decoders(demo):
    flags = {m: pd.read_csv(demo / "results" / "demo" / m / "layers.csv")["final_norm"].tolist() for m in MODELS}
    assert not any(flags["tiny-bert"]) and not any(flags["tiny-roberta"])
    assert flags["trained-gpt2@step0"] == [False] * 4 + [True] and flags["gaussian-null"] == [False, True]


def test_checkpoint_sweep_has_distinct_weights_and_its_figure(demo):
    models = pd.read_csv(demo / "results" / "demo" / "summary" / "models.csv", keep_default_na=False).set_index("model")
    assert list(models.loc[CHECKPOINTS, "family"]) == ["trained-gpt2"] * 3
    assert models.loc[CHECKPOINTS, "weights_sha256"].nunique() == 3 and (models["same_weights_as"] == "").all()
    drawn = pd.read_csv(demo / "results" / "demo" / "figures" / "checkpoints" / "trained-gpt2.csv")
    assert sorted(drawn["step"].unique()) == [0, 100, 400] and len(drawn) == 3 * 5
    for model in CHECKPOINTS:
        rows = drawn[drawn["model"] == model].reset_index(drop=True)
        geometry = pd.read_csv(demo / "results" / "demo" / model / "geometry.csv")
        layers = pd.read_csv(demo / "results" / "demo" / model / "layers.csv")
        np.testing.assert_allclose(rows["anisotropy"], geometry["anisotropy"], rtol=1e-12)
        np.testing.assert_allclose(rows["M_over_Q"], layers["M"] / layers["Q"], rtol=1e-12)
        np.testing.assert_allclose(rows["cv_Q"], layers["cv_Q"], rtol=1e-12)


def test_geometry_figures_draw_the_tables(demo):
    drawn = pd.read_csv(demo / "results" / "demo" / "figures" / "geo01_isotropy.csv")
    summary = pd.read_csv(demo / "results" / "demo" / "summary" / "geometry.csv")
    np.testing.assert_allclose(drawn["isoscore"], summary["isoscore"], rtol=1e-12)


def test_layer_norm_null_shows_appendix_i(demo):
    """C.V. of Q over types with n_t ≥ n_min falls with n_min at the LayerNorm layer of the Gaussian null."""
    drawn = pd.read_csv(demo / "results" / "demo" / "gaussian-null" / "figures" / "geo05_cv_by_min_count.csv")
    normed = drawn[drawn["layer"] == 1]
    assert normed["cv_Q"].iloc[0] > 3 * normed["cv_Q"].min() and normed["slope"].iloc[0] < -0.3
