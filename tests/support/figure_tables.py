"""Synthetic tables the figures draw, shaped as a run writes them: one layer's per-type table (token, n, Q, M, V) of
a decoder whose sentence-start token sits at M = 4·10⁷ (:func:`decoder_layer`) or of the paper's encoders
(:func:`paper_layer`), and tokens.parquet of five such layers (:func:`decoder_stats`, :func:`encoder_stats`); a
stacked layers.csv with Q(X), M(X) and its parts (:func:`layers_frame`) or with every column a figure draws
(:func:`layers_table`); a stacked geometry.csv, with sample batches' means and spreads (:func:`geometry_table`);
embedding_projection.parquet's points (:func:`projection_points`), embedding_matrices.csv (:func:`matrices_table`)
and summary/models.csv (:func:`models_table`); and a model id too long for any title (:data:`LONG_NAME`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.stats.geometry import geometry_columns
from ctxvar.stats.token_table import TokenStats

from support.quick_start_figures import token_stats

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


def decoder_stats(folder) -> TokenStats:
    """Five layers, the first without the sentence-start token's outlier (a decoder's embeddings)."""
    return token_stats(folder / "decoder.parquet", [decoder_layer(start=layer > 0, seed=layer) for layer in range(5)])


def encoder_stats(folder) -> TokenStats:
    """Five layers of the paper's encoders' types."""
    return token_stats(folder / "encoder.parquet", [paper_layer(seed=layer) for layer in range(5)])


def layers_frame(models=("a", "b"), n_layers=5, seed=0) -> pd.DataFrame:
    """A stacked layers.csv of Q(X), M(X), V(X) and V(X)'s parts V_W and V_B; the second model's 1,000 × the
    first's."""
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


def models_table(models: list[str], attention: list) -> pd.DataFrame:
    """summary/models.csv's columns the encoder-decoder figure reads."""
    return pd.DataFrame({"model": models, "attention": attention})
