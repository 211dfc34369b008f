"""Cross-model tables: every model's layers.csv stacked, and one row per model."""

from __future__ import annotations

import logging

import pandas as pd

from ctxvar.errors import CtxvarError
from ctxvar.files.atomic import read_csv, read_json
from ctxvar.stats.provenance import SUMS_COLUMN, check_same_sums, table_sums

log = logging.getLogger(__name__)

MODEL_COLUMNS = [
    "model",
    "family",
    "model_name",
    "revision",
    "dtype",
    "n_layers",
    "d",
    "final_norm",
    "attention",
    "n_types",
    "n_tokens",
    "n_sentences",
    "n_skipped_too_long",
    "weights_sha256",
    "same_weights_as",
    "config_hash",
    "type_marker",
]


def stack_layers(layer_csvs: dict[str, str]) -> pd.DataFrame:
    """``{model id: layers.csv}`` → one table with a leading ``model`` column, in the given order (any per-model
    CSVs: geometry.csv, embedding_matrices.csv); a table of the ``model`` column alone when there are none (a run
    whose every model has ``forward: false``)."""
    frames = [read_csv(path).assign(model=model) for model, path in layer_csvs.items()]
    if not frames:
        return pd.DataFrame(columns=["model"])
    table = pd.concat(frames, ignore_index=True)
    return table[["model", *[c for c in table.columns if c != "model"]]]


def is_stack_of(path, tables: dict[str, str]) -> bool:
    """Whether the summary table ``path`` holds ``tables`` ({model id: its per-model CSV}) as :func:`stack_layers`
    stacks them now; False when it does not (a per-model table re-made since, a model added or removed) or when
    any of them cannot be read."""
    try:
        return read_csv(path).equals(stack_layers(tables))
    except (CtxvarError, OSError, ValueError, KeyError):
        return False


def summary_tables(
    layer_csvs: dict[str, str],
    geometry_csvs: dict[str, str],
    run_jsons: dict[str, str],
    families: dict[str, str | None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """summary/layers.csv, geometry.csv and models.csv (:func:`stack_layers`, :func:`models_table`), refusing a
    model whose layers.csv, geometry.csv and run.json come from different sums (:mod:`ctxvar.stats.provenance`)."""
    layers, geometry = stack_layers(layer_csvs), stack_layers(geometry_csvs)
    models = models_table(run_jsons, families)
    for model, run in zip(models["model"], models[SUMS_COLUMN]):
        check_same_sums(
            model,
            {
                run_jsons[model]: {run or ""},
                layer_csvs[model]: table_sums(layers, layer_csvs[model], model),
                geometry_csvs[model]: table_sums(geometry, geometry_csvs[model], model),
            },
        )
    return layers, geometry, models


def models_table(run_jsons: dict[str, str], families: dict[str, str | None] | None = None) -> pd.DataFrame:
    """``{model id: run.json}`` → one row per model (|T| = n_types, |X| = n_tokens as in the paper's Table 3).

    ``family``: the entry a revision came from (``families``). ``same_weights_as``:
    the other models whose loaded weights hash the same (some published checkpoint
    branches serve another step's weights); each such group is also logged as a warning.
    """
    rows = []
    for model, path in run_jsons.items():
        run = read_json(path)
        rows.append(
            {"model": model, "family": (families or {}).get(model), **{c: run.get(c) for c in MODEL_COLUMNS[2:]}}
        )
    table = pd.DataFrame(rows, columns=MODEL_COLUMNS)
    groups = table.groupby("weights_sha256")["model"].agg(list)
    table["same_weights_as"] = [
        " ".join(m for m in groups[h] if m != model) if pd.notna(h) else ""
        for model, h in zip(table["model"], table["weights_sha256"])
    ]
    for same in groups[groups.map(len) > 1]:
        log.warning(
            "models %s load identical weights (SHA-256 of every tensor); if they are different checkpoints, "
            "the published revisions serve the same files: check them on the Hub",
            ", ".join(same),
        )
    return table
