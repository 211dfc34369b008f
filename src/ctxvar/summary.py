"""Cross-model tables: every model's layers.csv stacked, and one row per model."""

from __future__ import annotations

import json

import pandas as pd

MODEL_COLUMNS = ["model", "model_name", "revision", "dtype", "n_layers", "d", "n_types", "n_tokens", "n_sentences",
                 "n_skipped_too_long", "weights_sha256", "config_hash"]


def stack_layers(layer_csvs: dict[str, str]) -> pd.DataFrame:
    """``{model id: layers.csv}`` → one table with a leading ``model`` column, in the given order."""
    frames = [pd.read_csv(path).assign(model=model) for model, path in layer_csvs.items()]
    table = pd.concat(frames, ignore_index=True)
    return table[["model", *[c for c in table.columns if c != "model"]]]


def models_table(run_jsons: dict[str, str]) -> pd.DataFrame:
    """``{model id: run.json}`` → one row per model (|T| = n_types, |X| = n_tokens as in the paper's Table 3)."""
    rows = []
    for model, path in run_jsons.items():
        run = json.loads(open(path).read())
        rows.append({"model": model, **{c: run.get(c) for c in MODEL_COLUMNS[1:]}})
    return pd.DataFrame(rows, columns=MODEL_COLUMNS)
