"""Geometry metrics (Σxxᵀ, Σ x/‖x‖, the TwoNN sample) against brute force on tiny models, and merging.

The oracle keeps every embedding in memory and computes each metric by its
definition: the covariance with numpy, IsoScore by Rudman et al.'s algorithm
(not the closed form), cosines from all pairs, TwoNN by scikit-dimension.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import skdim

from ctxvar.errors import StatisticsError
from ctxvar.extraction.position_sample import token_keys
from ctxvar.files.parquet import FOOTER_READ_BYTES
from ctxvar.stats.merge import merge_job, merge_layer_files, merge_partials
from ctxvar.stats.merge_io import run_io
from ctxvar.stats.sample_file import points
from ctxvar.stats.twonn import distinct_points

from support.effective_rank_reference import rankme, roy_vetterli_effective_rank
from support.pipeline_runs import GEOMETRY_OPTIONS as OPTIONS
from support.pipeline_runs import GEOMETRY_SPECTRUM_K as SPECTRUM_K
from support.pipeline_runs import run_geometry, sentence_offsets

RTOL = 1e-6
# √λ turns the fp32 Gram product's ~ε₃₂λ₁ rounding of a zero eigenvalue (LayerNorm outputs have one) into
# ~√(ε₃₂λ₁): the singular-value ranks match to about 10⁻⁵ (see stats.geometry.rank_metrics); their formulas
# are checked to 10⁻⁶ on float64 moments in tests/unit/stats/test_geometry_spectrum.py.
SINGULAR_VALUE_RANKS = ("effective_rank", "rankme")
SINGULAR_VALUE_RTOL = 1e-4


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def one_shard(tmp_path_factory, tiny_models, corpus_texts, arch):
    return run_geometry(tmp_path_factory.mktemp(f"geo1-{arch}"), tiny_models[arch], corpus_texts, 1)


@pytest.fixture(scope="module")
def three_shards(tmp_path_factory, tiny_models, corpus_texts, arch):
    return run_geometry(tmp_path_factory.mktemp(f"geo3-{arch}"), tiny_models[arch], corpus_texts, 3)


def isoscore_by_algorithm(x: np.ndarray) -> float:
    """IsoScore as Rudman et al. (2022) define it: variances in the PCA basis, normalised to norm √d, the
    defect δ from the identity's diagonal, k = (d − δ²(d − √d))², φ = k/d², score (dφ − 1)/(d − 1)."""
    d = x.shape[1]
    centred = x - x.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    variance = (centred @ vt.T).var(axis=0)
    variance = np.pad(variance, (0, d - len(variance)))
    normalised = np.sqrt(d) * variance / np.linalg.norm(variance)
    defect = np.linalg.norm(normalised - np.ones(d)) / np.sqrt(2 * (d - np.sqrt(d)))
    k = (d - defect**2 * (d - np.sqrt(d))) ** 2
    return (d * (k / d**2) - 1) / (d - 1)


def mean_cosine_rows(unit: np.ndarray, rows: np.ndarray) -> float:
    """Σ cos(x_i, x_j) over j ≠ i for the ``rows`` i: every pair's cosine, a block of rows at a time (all N × N of
    them at once, 10⁴ tokens, would be a gigabyte)."""
    cos = unit[rows] @ unit.T
    return cos.sum() - cos[np.arange(len(rows)), rows].sum()


def brute_force_geometry(keys: np.ndarray, x: np.ndarray) -> dict:
    """Every metric of one layer from all N embeddings ``x`` (N, d) by definition."""
    c = np.cov(x.T, bias=True)
    eigenvalues = np.sort(np.linalg.eigvalsh(c))[::-1]
    p = eigenvalues / eigenvalues.sum()
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    n = len(x)
    cos_sum = sum(mean_cosine_rows(unit, rows) for rows in np.array_split(np.arange(n), -(-n // 1024)))
    mean_cos = cos_sum / (n * (n - 1))
    names, counts = np.unique(keys, return_counts=True)
    self_sims = []
    for name in names[(counts >= 10) & (counts <= 100_000)]:
        of_type = unit[keys == name]
        block = of_type @ of_type.T
        m = len(block)
        self_sims.append((block.sum() - np.trace(block)) / (m * (m - 1)))
    row = {
        "anisotropy": p[0],
        "participation_ratio": eigenvalues.sum() ** 2 / (eigenvalues**2).sum(),
        "isoscore": isoscore_by_algorithm(x),
        "effective_rank": roy_vetterli_effective_rank(x - x.mean(0)),
        "effective_rank_covariance": np.exp(-np.sum(p * np.log(p))),
        "rankme": rankme(x),
        "mean_cosine": mean_cos,
        "self_similarity": np.mean(self_sims),
        "n_types": len(self_sims),
    }
    row.update({f"explained_{i + 1}": p[i] for i in range(SPECTRUM_K)})
    row["self_similarity_adjusted"] = row["self_similarity"] - mean_cos
    return row


def test_every_metric_matches_brute_force(one_shard, oracle):
    table, _ = one_shard
    keys, X = oracle
    assert len(table) == X.shape[0]
    for layer in range(X.shape[0]):
        expected = brute_force_geometry(keys, X[layer])
        got = table.loc[layer]
        assert got["n"] == X.shape[1]
        for name, value in expected.items():
            rtol = SINGULAR_VALUE_RTOL if name in SINGULAR_VALUE_RANKS else RTOL
            np.testing.assert_allclose(got[name], value, rtol=rtol, err_msg=f"layer {layer} {name}")
    assert table["anisotropy"].std() > 0 and table["mean_cosine"].std() > 0, "metrics constant: the test would be blind"


def test_merged_shards_equal_one_shard(one_shard, three_shards):
    pd.testing.assert_frame_equal(one_shard[0], three_shards[0], rtol=1e-9)
    one, three = (pq.read_table(path) for path in (one_shard[1], three_shards[1]))
    assert one.equals(three), "the bottom-k sample depends on the sharding"


def merge_all(inputs: dict, out: dict, tokens=None) -> dict:
    """Merge ``inputs`` {sums, moments, sample: [paths]} into ``out`` {sums, moments, sample: path}, as a job does."""
    run = merge_partials(inputs["sums"], out["sums"], tokens)
    merge_layer_files("moments", inputs["moments"], out["moments"], run)
    merge_layer_files("sample", inputs["sample"], out["sample"], run)
    return run


def test_a_running_merge_gives_the_sums_of_one_merge(three_shards, tmp_path):
    """incremental_merge: shard 1 added to shard 0, then shard 2 to that, gives what one merge of all three gave,
    byte for byte: the sums, the token table, the moments and the sample, with their metadata."""
    folder = three_shards[1].parent
    partials = {name: [folder / f"{name}{i}.parquet" for i in range(3)] for name in ("sums", "moments", "sample")}
    through = [{name: tmp_path / f"through{k}-{name}.parquet" for name in partials} for k in (1, 2)]
    merge_all({name: paths[:2] for name, paths in partials.items()}, through[0])
    previous_and_last = {name: [through[0][name], paths[2]] for name, paths in partials.items()}
    run = merge_all(previous_and_last, through[1], tmp_path / "tokens.parquet")
    assert run["shards"] == [0, 1, 2]
    at_once = {"sums": "stats", "moments": "moments", "sample": "sample"}
    for name, stem in {**at_once, "tokens": "tokens"}.items():
        chained = through[1].get(name, tmp_path / "tokens.parquet")
        assert chained.read_bytes() == (folder / f"{stem}.parquet").read_bytes(), name


def sizes(paths) -> int:
    return sum(path.stat().st_size for path in paths)


def test_merges_read_every_file_once_and_count_what_was_written(three_shards, tmp_path):
    """The I/O that run.json reports, in both merge modes, as the workflow's jobs do it (docs/performance.md):
    every input file is read once (its bytes, and its footer again on opening), each partial and running merge
    counts once as written, the merged files by their size."""
    folder = three_shards[1].parent
    partials = {name: [folder / f"{name}{i}.parquet" for i in range(3)] for name in ("sums", "moments", "sample")}

    def inputs(sums, moments, sample):
        return {"partials": sums, "moments": moments, "sample": sample}

    def outputs(prefix, tokens=True):
        files = {"stats": tmp_path / f"{prefix}.parquet", "moments": tmp_path / f"{prefix}.moments.parquet"}
        files |= {"sample": tmp_path / f"{prefix}.sample.parquet"}
        return files | ({"tokens": tmp_path / f"{prefix}.tokens.parquet"} if tokens else {})

    written = sizes(path for paths in partials.values() for path in paths)
    # incremental_merge: true: shards 0 + 1, then 2 added to that sum
    through = outputs("through1", tokens=False)
    _, first = merge_job(inputs(*(paths[:2] for paths in partials.values())), through)
    last = outputs("chained")
    _, record = merge_job(
        inputs(*([through[kind], partials[name][2]] for kind, name in zip(through, partials))), last, before=first
    )
    chained = run_io(record, last.values())
    running = sizes(through.values())
    assert (chained["partial_files"], chained["running_merge_files"], chained["merged_files"]) == (9, 3, 4)
    assert (chained["partial_bytes"], chained["running_merge_bytes"]) == (written, running)
    assert chained["merged_bytes"] == sizes(last.values())
    assert chained["bytes_written"] == written + running + chained["merged_bytes"]
    assert chained["files_opened"] == 12
    assert 0 <= chained["bytes_read"] - (written + running) <= FOOTER_READ_BYTES * chained["files_opened"]
    # incremental_merge: false: all at once
    at_once = outputs("at-once")
    _, record = merge_job(inputs(*partials.values()), at_once)
    one = run_io(record, at_once.values())
    assert (one["partial_files"], one["running_merge_files"], one["files_opened"]) == (9, 0, 9)
    assert one["partial_bytes"] == written and one["bytes_written"] == written + sizes(at_once.values())
    assert 0 <= one["bytes_read"] - written <= FOOTER_READ_BYTES * one["files_opened"]


def test_a_merge_refuses_a_shard_twice_or_files_of_other_shards(three_shards, tmp_path):
    folder = three_shards[1].parent
    merge_partials([folder / "sums0.parquet", folder / "sums1.parquet"], tmp_path / "through1.parquet")
    with pytest.raises(StatisticsError, match="shard numbers repeat"):
        merge_partials([tmp_path / "through1.parquet", folder / "sums1.parquet"], tmp_path / "s.parquet")
    run = merge_partials([tmp_path / "through1.parquet", folder / "sums2.parquet"], tmp_path / "s.parquet")
    with pytest.raises(StatisticsError, match=r"files of shards \[0, 1\] given for sums of shards \[0, 1, 2\]"):
        two = [folder / "moments0.parquet", folder / "moments1.parquet"]
        merge_layer_files("moments", two, tmp_path / "m.parquet", run)
    with pytest.raises(StatisticsError, match="both hold shards"):
        repeated = [folder / f"moments{i}.parquet" for i in (0, 1, 2, 2)]
        merge_layer_files("moments", repeated, tmp_path / "m.parquet", run)


def test_sample_is_the_bottom_k_positions_with_their_embeddings(one_shard, oracle, tiny_models, corpus_texts, arch):
    _, sample_path = one_shard
    keys, X = oracle
    offsets = sentence_offsets(tiny_models[arch], corpus_texts)
    assert offsets[-1] == X.shape[1]
    all_keys = token_keys(np.arange(len(corpus_texts)), np.zeros(len(corpus_texts)), offsets, seed=0)
    expected = np.sort(all_keys)[: OPTIONS.sample_size]
    for layer in range(X.shape[0]):
        table = pq.ParquetFile(sample_path).read_row_group(layer)
        np.testing.assert_array_equal(table.column("key").to_numpy(), expected)
        rows = offsets[table.column("sentence_id").to_numpy()] + table.column("position").to_numpy()
        np.testing.assert_array_equal(table.column("token").to_numpy(zero_copy_only=False), keys[rows])
        np.testing.assert_allclose(points(table), X[layer, rows], rtol=0, atol=1e-5 * np.abs(X[layer]).max())


def test_twonn_matches_the_reference_estimator(one_shard):
    table, sample_path = one_shard
    for layer in range(len(table)):
        distinct = distinct_points(points(pq.ParquetFile(sample_path).read_row_group(layer))).astype(np.float64)
        assert table.loc[layer, "twonn_points"] == len(distinct)
        reference = skdim.id.TwoNN().fit(distinct).dimension_
        np.testing.assert_allclose(table.loc[layer, "twonn"], reference, rtol=RTOL)


def test_gaussian_null_model_through_the_pipeline(tmp_path, corpus_texts):
    """The Gaussian null (no per-type means): mean cosine ≈ 0, anisotropy ≈ (1 + √(d/n))²/d, the
    Marchenko–Pastur edge over the mean eigenvalue; its LayerNorm layer is flagged as a final norm."""
    from ctxvar.models.build import build_model

    d = 32
    build_model(
        {"id": "null", "init": "gaussian", "hidden_size": d, "mean_scale": 0.0, "seed": 3},
        tmp_path / "null",
        corpus_texts,
    )
    table, _ = run_geometry(tmp_path, str(tmp_path / "null"), corpus_texts, 2)
    n = table.loc[0, "n"]
    assert table.loc[0, "anisotropy"] == pytest.approx((1 + np.sqrt(d / n)) ** 2 / d, rel=0.05)
    assert abs(table.loc[0, "mean_cosine"]) < 3 / np.sqrt(n * d)
    assert abs(table.loc[0, "self_similarity_adjusted"]) < 0.01  # occurrences of a type share nothing but noise
    assert list(table["final_norm"]) == [False, True]
