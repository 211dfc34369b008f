"""Merge partial sums across shards, one layer at a time, and finalize per-token statistics.

Memory: one layer of the merged sums (U · (d + 2) · 8 bytes, U = distinct types
over all shards) plus one shard's layer at a time; it does not grow with the
number of shards or layers.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from .errors import StatisticsError
from .moments import combine_into, finalize
from .sums import LayerSums, LayerWriter, SumsFile, sums_schema

log = logging.getLogger(__name__)

# Partials that differ in any of these cannot be added together.
MUST_MATCH = ("model_id", "model_name", "revision", "dtype", "n_layers", "d", "tokenizer_sha256", "weights_sha256",
              "merge_markers", "config_hash")
ADDITIVE = ("n_sentences", "n_skipped_too_long", "n_split_too_long", "n_sequences", "n_tokens")

TOKENS_SCHEMA = [("layer", pa.int16()), ("token", pa.string()), ("n", pa.int64()), ("Q", pa.float64()), ("M", pa.float64()), ("V", pa.float64())]


def open_partials(paths) -> list[SumsFile]:
    """Open and check partials; return them in shard order (the order sums are added in)."""
    files = sorted((SumsFile(p) for p in paths), key=lambda f: f.metadata.get("shard", -1))
    if not files:
        raise StatisticsError("merge: no partial files given")
    reference = files[0]
    for other in files[1:]:
        for key in MUST_MATCH:
            if other.metadata.get(key) != reference.metadata.get(key):
                raise StatisticsError(
                    f"merge: {other.path} differs from {reference.path} in {key} "
                    f"({other.metadata.get(key)!r} vs {reference.metadata.get(key)!r}); re-run extraction for the stale file"
                )
    shards = [f.metadata.get("shard") for f in files]
    if len(set(shards)) != len(shards):
        raise StatisticsError(f"merge: shard numbers repeat among the partials ({shards})")
    return files


def merged_metadata(files: list[SumsFile]) -> dict:
    first = files[0].metadata
    merged = {key: first.get(key) for key in (*MUST_MATCH, "commit", "attn_implementation", "versions")}
    for key in ADDITIVE:
        merged[key] = int(sum(f.metadata.get(key, 0) for f in files))
    merged["shards"] = [f.metadata.get("shard") for f in files]
    return merged


def merge_layer(files: list[SumsFile], layer: int, types: np.ndarray) -> LayerSums:
    """The sum over shards of one layer, rows aligned to ``types`` (sorted)."""
    d = files[0].d
    total = (np.zeros(len(types), np.int64), np.zeros((len(types), d)), np.zeros(len(types)))
    for part in files:
        rows = part.layer(layer)
        combine_into(total, (rows.count, rows.sum, rows.sum_sq), np.searchsorted(types, rows.types))
    return LayerSums(layer, types, *total)


def token_table(sums: LayerSums) -> pa.Table:
    """Per-type n, Q, M, V of one layer (columns as :data:`TOKENS_SCHEMA`)."""
    _, q, m, v = finalize(sums.count, sums.sum, sums.sum_sq)
    return pa.table(
        [np.full(len(sums.types), sums.layer, np.int16), pa.array(sums.types, pa.string()), sums.count, q, m, v],
        schema=pa.schema(TOKENS_SCHEMA),
    )


def merge_partials(paths, stats_path, tokens_path) -> dict:
    """Add the partials up (stats_path) and finalize n, Q, M, V per (layer, token) (tokens_path)."""
    files = open_partials(paths)
    types = np.unique(np.concatenate([f.types() for f in files]))
    metadata = {**merged_metadata(files), "n_types": int(len(types))}
    stats_schema = sums_schema(files[0].d, metadata)
    tokens_schema = pa.schema(TOKENS_SCHEMA, metadata=stats_schema.metadata)
    with LayerWriter(stats_path, stats_schema) as stats, LayerWriter(tokens_path, tokens_schema) as tokens:
        for layer in range(files[0].n_layers):
            merged = merge_layer(files, layer, types)
            stats.write(merged.to_table(stats_schema))
            tokens.write(token_table(merged).replace_schema_metadata(tokens_schema.metadata))
    log.info("merged %d shards: %d types, %d layers", len(files), len(types), files[0].n_layers)
    return metadata
