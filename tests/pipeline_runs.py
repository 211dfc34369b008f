"""The package's data path without Snakemake: shard, extract and merge, as the workflow's jobs do.

Extraction runs on ``CTXVAR_TEST_DEVICE`` (default ``cpu``; ``cuda`` on a GPU machine).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pyarrow as pa

from ctxvar.corpus.shards import write_shards
from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.extract import ExtractionSettings, extract_shard
from ctxvar.io import write_table
from ctxvar.stats.layers import layers_table
from ctxvar.stats.merge import merge_partials

TEST_DEVICE = os.environ.get("CTXVAR_TEST_DEVICE", "cpu")


def assert_sums_equal(got: pa.Table, expected: pa.Table) -> None:
    """Bitwise on a CPU; on a GPU to float64 rounding, since CUDA's float64 ``index_add_`` adds in no fixed order."""
    if TEST_DEVICE == "cpu":
        assert got.equals(expected)
        return
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas(), check_exact=False, rtol=1e-12)


def run_pipeline(tmp, model_dir, texts, n_shards, model_id, batch_tokens=512, chunk_sentences=16, cosine=False):
    """Shard, extract (with Σ x/‖x‖ if ``cosine``), merge; return (tokens DataFrame, layers DataFrame, stats path)."""
    write_table(pa.table({"sentence_id": np.arange(len(texts)), "text": texts}), tmp / "sentences.parquet")
    shards = [tmp / f"shard{i}.parquet" for i in range(n_shards)]
    write_shards(tmp / "sentences.parquet", shards, chunk_sentences=chunk_sentences)
    partials = []
    for i, shard in enumerate(shards):
        settings = ExtractionSettings(
            model={"id": model_id},
            source=str(model_dir),
            device=TEST_DEVICE,
            batch_tokens=batch_tokens,
            shard=i,
            progress=False,
            config_hash="test",
            geometry=GeometryOptions(cosine=cosine),
        )
        extract_shard(shard, tmp / f"partial{i}.parquet", settings)
        partials.append(tmp / f"partial{i}.parquet")
    merge_partials(partials, tmp / "stats.parquet", tmp / "tokens.parquet")
    return pd.read_parquet(tmp / "tokens.parquet"), layers_table(tmp / "stats.parquet", 1, 5), tmp / "stats.parquet"
