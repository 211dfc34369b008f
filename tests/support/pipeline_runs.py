"""The package's data path without Snakemake: shard, extract and merge, as the workflow's jobs do.

Extraction runs on ``CTXVAR_TEST_DEVICE`` (default ``cpu``; ``cuda`` on a GPU machine).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ctxvar.corpus.shards import split_corpus
from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.extract import extract_shard, prepare_shard, run_and_write
from ctxvar.extraction.layer_major import ModelWeights, find_blocks
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.figures.pca_selection import select_pca_types
from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import write_table
from ctxvar.models import loading
from ctxvar.stats.declarations import sums_files
from ctxvar.stats.geometry import geometry_table
from ctxvar.stats.layers import layers_table
from ctxvar.stats.merge import merge_job, merge_layer_files, merge_partials

TEST_DEVICE = os.environ.get("CTXVAR_TEST_DEVICE", "cpu")


def assert_sums_equal(got: pa.Table, expected: pa.Table) -> None:
    """Bitwise on a CPU; on a GPU to float64 rounding, since CUDA's float64 ``index_add_`` adds in no fixed order."""
    if TEST_DEVICE == "cpu":
        assert got.equals(expected)
        return
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas(), check_exact=False, rtol=1e-12)


PCA = {"layer": None, "seed": 3, "min_chars": 3, "n_bins": 10}  # figures.pca as the paper sets it
PCA_ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}


def run_pipeline(
    tmp, model_dir, texts, n_shards, model_id, batch_tokens=512, sample_size=0, cosine=False, pca_points=False
):
    """Shard (batches planned with ``batch_tokens``), extract (with Σ x/‖x‖ if ``cosine``), merge; return (tokens
    DataFrame, layers DataFrame, stats path). With ``sample_size``, the TwoNN sample of that size too, merged into
    ``tmp / "sample.parquet"``. With ``pca_points``, the Fig. 1 types of :data:`PCA` chosen before extraction
    (``tmp / "types.csv"``) and their points collected by each shard's job (``tmp / "points{i}.parquet"``)."""
    write_table(pa.table({"sentence_id": np.arange(len(texts)), "text": texts}), tmp / "sentences.parquet")
    shards = [tmp / f"shard{i}.parquet" for i in range(n_shards)]
    split_corpus(tmp / "sentences.parquet", shards, {"id": model_id}, str(model_dir), batch_tokens)
    if pca_points:
        job = ExtractionSettings(model={"id": model_id}, source=str(model_dir))
        write_csv(select_pca_types(shards, job, PCA, PCA_ANALYSIS), tmp / "types.csv")
    partials, samples = [], []
    for i, shard in enumerate(shards):
        settings = ExtractionSettings(
            model={"id": model_id},
            source=str(model_dir),
            device=TEST_DEVICE,
            batch_tokens=batch_tokens,
            geometry=GeometryOptions(cosine=cosine, sample_size=sample_size),
            shard=i,
            progress=False,
            config_hash="test",
        )
        pca_paths = (tmp / "types.csv", tmp / f"points{i}.parquet") if pca_points else None
        extract_shard(shard, tmp / f"partial{i}.parquet", settings, pca_paths=pca_paths)
        samples.append(tmp / f"partial{i}.sample.parquet")
        partials.append(tmp / f"partial{i}.parquet")
    run = merge_partials(partials, tmp / "stats.parquet", tmp / "tokens.parquet")
    if sample_size:
        merge_layer_files("sample", samples, tmp / "sample.parquet", run)
    return pd.read_parquet(tmp / "tokens.parquet"), layers_table(tmp / "stats.parquet", 1, 5), tmp / "stats.parquet"


def run_geometry_pipeline(tmp, model_dir, texts, n_shards: int, options: GeometryOptions) -> dict:
    """Shard, extract every sum ``options`` asks for and merge them as the workflow's jobs do; return the merged
    files by name (``stats``, ``tokens`` and those of ``moments``, ``sample``, ``words``, ``sentences`` asked for)."""
    write_table(pa.table({"sentence_id": np.arange(len(texts)), "text": texts}), tmp / "sentences.parquet")
    shards = [tmp / f"shard{i}.parquet" for i in range(n_shards)]
    split_corpus(tmp / "sentences.parquet", shards, {"id": "tiny"}, str(model_dir), batch_tokens=512)
    kinds = list(sums_files("", options))
    inputs = {name: [] for name in ("partials", *kinds)}
    for i, shard in enumerate(shards):
        settings = ExtractionSettings(
            model={"id": "tiny"},
            source=str(model_dir),
            device=TEST_DEVICE,
            batch_tokens=512,
            shard=i,
            progress=False,
            config_hash="test",
            geometry=options,
        )
        files = {kind: tmp / f"{kind}{i}.parquet" for kind in kinds}
        extract_shard(shard, tmp / f"sums{i}.parquet", settings, files)
        for kind, path in {"partials": tmp / f"sums{i}.parquet", **files}.items():
            inputs[kind].append(path)
    outputs = {name: tmp / f"{name}.parquet" for name in ("stats", "tokens", *kinds)}
    merge_job(inputs, outputs)
    return outputs


GEOMETRY_OPTIONS = GeometryOptions(covariance=True, cosine=True, sample_size=600)  # every geometry sum but the words
GEOMETRY_SPECTRUM_K = 5


def run_geometry(tmp, model_dir, texts, n_shards):
    """Shard, extract with every geometry sum, merge; return (geometry table, merged sample path)."""
    merged = run_geometry_pipeline(tmp, model_dir, texts, n_shards, GEOMETRY_OPTIONS)
    table = geometry_table(merged["stats"], merged["moments"], merged["sample"], GEOMETRY_SPECTRUM_K, 0, 1, 5)
    return table, merged["sample"]


def shard_of(tmp_path, texts, name="shard.parquet"):
    """One shard of ``texts`` in one chunk (extraction batches over all of it), for any model, damaged ones too."""
    table = pa.table(
        {
            "sentence_id": np.arange(len(texts)),
            "text": pa.array(texts, pa.string()),
            "chunk": pa.array(np.zeros(len(texts), dtype=np.int64)),
        }
    )
    write_table(table, tmp_path / name)
    return tmp_path / name


def extract(model_dir, shard_path, out, entry=None, **options) -> dict:
    """One extraction job of ``model_dir`` on ``shard_path`` into ``out``, on the test device, with ``options`` (model
    id ``m`` unless ``entry``); its metadata."""
    settings = ExtractionSettings(
        model=entry or {"id": "m"},
        source=str(model_dir),
        device=TEST_DEVICE,
        progress=False,
        config_hash="h",
        **options,
    )
    return extract_shard(shard_path, out, settings)


def sentence_offsets(model_dir, texts) -> np.ndarray:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lengths = [len(tokenizer.tokenize(t)) + 2 for t in texts]
    return np.concatenate([[0], np.cumsum(lengths)])


def tiny_job_settings(model_dir, dtype: str = "float32", **settings) -> ExtractionSettings:
    """The settings of the tests' extraction jobs on a tiny model: batches of 128 tokens on the test device, and
    ``settings``."""
    return ExtractionSettings(
        model={"id": "tiny"},
        source=str(model_dir),
        dtype=dtype,
        device=TEST_DEVICE,
        batch_tokens=128,
        progress=False,
        config_hash="test",
        **settings,
    )


def streaming_budget_mb(model_dir, dtype: str = "float32") -> float:
    """The least ``max_device_mb`` under which a job streams the model in ``model_dir``: the weights outside its
    blocks and two blocks (:meth:`ctxvar.extraction.layer_major.ModelWeights.resident`), and a few bytes for the
    megabytes' rounding; a lower budget is refused."""
    model = loading.empty_model({"id": "tiny"}, str(model_dir), dtype)
    return (ModelWeights.of(model, find_blocks(model)).resident(streamed=True) + 16) / 1e6


def both_orders(folder, shard, model_dir, dtype, options: GeometryOptions) -> tuple[dict, dict]:
    """The files of one shard's extraction job by kind, ``(layer-major, whole-model)``, run on one loaded model
    (config ``extraction_order``, :mod:`ctxvar.extraction.layer_major`)."""
    settings = tiny_job_settings(model_dir, dtype, geometry=options)
    job = prepare_shard(shard, settings)
    files = []
    for order in ("layer_major", "whole_model"):
        prefix = folder / f"{order}-{shard.stem}"
        paths = {"sums": f"{prefix}.parquet", **sums_files(prefix, options)}
        run_and_write(
            dataclasses.replace(job),  # each run frees its copy's model when done
            dataclasses.replace(settings, extraction_order=order),
            paths.pop("sums"),
            paths,
        )
        paths["sums"] = f"{prefix}.parquet"
        files.append({kind: pq.read_table(path) for kind, path in paths.items()})
    return files[0], files[1]


def geometry_partial_files(folder, model_dir, texts) -> dict:
    """One extraction of ``texts`` into ``folder`` that writes every sums file: the sums with Σ x/‖x‖, the moments
    and the sample; their paths by kind (``sums``, ``moments``, ``sample``)."""
    settings = ExtractionSettings(
        model={"id": "m"},
        source=str(model_dir),
        device=TEST_DEVICE,
        progress=False,
        config_hash="h",
        geometry=GeometryOptions(covariance=True, cosine=True, sample_size=64),
    )
    paths = {
        "sums": folder / "0.parquet",
        "moments": folder / "0.moments.parquet",
        "sample": folder / "0.sample.parquet",
    }
    extract_shard(shard_of(folder, texts), paths["sums"], settings)
    return paths
