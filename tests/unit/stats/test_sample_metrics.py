"""Sample batches (geometry.batches): blocks of the position hash's ranking, and the per-batch metrics.

The study's TwoNN variant and anisotropy are checked against reference implementations written here
from Razzhigaev et al.'s public code: repository AIRI-Institute/LLM-Microscope, file
LLM_microscope.ipynb, functions ``intrinsic_dimension`` and ``calculate_anisotropy_torch``, commit
b6db939b2696845ce1f88cf69cddc41e808eea17. Facco et al.'s TwoNN per batch is checked against
scikit-dimension. The batches themselves are checked against a brute-force ranking of every position,
and against a sharded run.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import skdim
import torch

from ctxvar.config.hashes import extraction_config_hash, extraction_geometry
from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.budget import state_bytes
from ctxvar.extraction.position_sample import token_keys
from ctxvar.run.disk import sums_bytes
from ctxvar.run.resources import ModelShape
from ctxvar.stats.geometry import geometry_columns, geometry_table
from ctxvar.stats.sample_file import points
from ctxvar.stats.sample_metrics import PARTITION_COLUMNS, batch_anisotropy, batch_twonn, sample_batches
from ctxvar.stats.twonn import distinct_points

from support.pipeline_runs import run_geometry_pipeline

RTOL = 1e-6
BATCH = 300  # k, points per batch in the pipeline runs
BATCHES = 4
SPECTRUM_K = 3


# --- reference implementations, written from LLM-Microscope's notebook (commit above) -------------------------


def reference_anisotropy(x: np.ndarray) -> float:
    """Their ``calculate_anisotropy_torch`` (fast=False): centre on the mean, SVD, eigenvalues S²/(n − 1),
    largest over their sum."""
    centred = torch.as_tensor(x, dtype=torch.float64)
    centred = centred - centred.mean(dim=0, keepdim=True)
    singular = torch.linalg.svdvals(centred)
    variances = singular**2 / (centred.shape[0] - 1)
    return float(variances.max() / variances.sum())


def reference_intrinsic_dimension(x: np.ndarray) -> float:
    """Their ``intrinsic_dimension`` (reduction_factor=5): float64, centred, divided by the mean norm; per point
    the two smallest distances to the others; r₁ < 1e-8 marks a point (μ = −1); sorted μ; the u leading μ ≤ 1 + 1e-8
    leave the fit but not N; F = (u + 1 … u + m)/N; slope through the origin over the first min(m // 5, m − 1)."""
    eps = 1e-8
    emb = torch.as_tensor(x, dtype=torch.float64)
    emb = emb - emb.mean(dim=0, keepdim=True)
    emb = emb / emb.norm(dim=1).mean()
    distances = (emb[:, None, :] - emb[None, :, :]).norm(dim=2)
    distances.fill_diagonal_(float("inf"))
    nearest = distances.sort(dim=1).values
    r1, r2 = nearest[:, 0].clone(), nearest[:, 1].clone()
    bad = r1 < eps
    r1[bad], r2[bad] = eps, eps
    mu = r2 / r1
    mu[bad] = -1
    mu = mu.sort().values
    useless = int((mu <= 1 + eps).sum())
    mu = mu[useless:]
    m = len(mu)
    f_emp = torch.arange(1 + useless, m + 1 + useless, dtype=torch.float64) / (m + useless)
    used = min(m // 5, m - 1)
    log_mu, y = torch.log(mu)[:used], -torch.log(1 - f_emp)[:used]
    return float((log_mu * y).sum() / (log_mu * log_mu).sum())


def point_sets() -> dict[str, np.ndarray]:
    """Points in general position, on a plane, with exact duplicates, and with ties r₁ = r₂."""
    rng = np.random.default_rng(5)
    gaussian = rng.standard_normal((700, 12)) * np.linspace(0.2, 3, 12) + 40.0
    plane = rng.standard_normal((600, 2)) @ rng.standard_normal((2, 20))
    duplicated = np.vstack([gaussian[:500], gaussian[:40], gaussian[:5], np.repeat(gaussian[600:601], 30, axis=0)])
    grid = np.stack(np.meshgrid(np.arange(20.0), np.arange(20.0)), axis=-1).reshape(-1, 2)  # r₁ = r₂ everywhere
    ties = np.vstack([grid, rng.standard_normal((100, 2)) * 7])
    return {"gaussian": gaussian, "plane": plane, "duplicated": duplicated, "ties": ties}


@pytest.mark.parametrize("name", list(point_sets()))
def test_study_estimator_and_anisotropy_equal_their_code(name):
    x = point_sets()[name]
    assert batch_twonn(x)["twonn_razzhigaev"] == pytest.approx(reference_intrinsic_dimension(x), rel=RTOL)
    assert batch_anisotropy(x) == pytest.approx(reference_anisotropy(x), rel=RTOL)


def test_the_study_estimator_is_not_facco_s():
    """On the same points the variant reads otherwise: the test above would not tell them apart otherwise."""
    duplicated = point_sets()["duplicated"]
    row = batch_twonn(duplicated)
    assert row["twonn_points"] < len(duplicated)
    assert abs(row["twonn_razzhigaev"] / row["twonn_batch"] - 1) > 0.1


def test_batches_are_blocks_and_a_short_later_block_is_left_out():
    x = np.arange(23.0)[:, None]
    blocks = sample_batches(x, 5, 6)
    assert [b[:, 0].tolist() for b in blocks] == [list(range(b * 5, b * 5 + 5)) for b in range(4)]
    assert len(sample_batches(x[:3], 5, 6)) == 1 and len(sample_batches(x[:3], 5, 6)[0]) == 3  # batch 0 always


# --- cost -------------------------------------------------------------------------------------------------


def test_batches_multiply_the_sample_s_memory_disk_and_enter_the_hash_above_one():
    geometry = {
        "covariance": False,
        "cosine": False,
        "twonn": True,
        "sample_size": 4096,
        "seed": 0,
        "ethayarajh": False,
    }
    one, four = GeometryOptions.from_config(geometry), GeometryOptions.from_config({**geometry, "batches": 4})
    assert (one.sample_size, four.sample_size) == (4096, 4 * 4096)
    core = state_bytes(13, 1000, 768)
    assert state_bytes(13, 1000, 768, four) - core == 4 * 13 * 4 * 4096 * 768
    shape = ModelShape(n_layers=13, d=768, vocab_size=30000)
    sample = sums_bytes(10**6, shape, {**geometry, "batches": 4}) - sums_bytes(10**6, shape, {**geometry, "twonn": 0})
    assert sample == 13 * 4 * 4096 * (4 * 768 + 48)
    config = {"corpus": {}, "shards": 1, "dtype": "float32", "tokens": {}}
    hashes = [
        extraction_config_hash({**config, "geometry": {**geometry, "spectrum_k": 10, "batches": b}}, {"id": "m"}, [])
        for b in (1, 4)
    ]
    assert "batches" not in extraction_geometry({"geometry": {**geometry, "batches": 1}})
    assert hashes[0] != hashes[1]


# --- the pipeline on tiny models --------------------------------------------------------------------------


def run_batches(tmp, model_dir, texts, n_shards: int, batches: int):
    """Shard, extract with every geometry sum and a sample of ``batches`` × BATCH points, merge; return
    (geometry table, merged sample path)."""
    options = GeometryOptions(covariance=True, cosine=True, sample_size=batches * BATCH)
    merged = run_geometry_pipeline(tmp, model_dir, texts, n_shards, options)
    paths = (merged["stats"], merged["moments"], merged["sample"])
    table = geometry_table(*paths, SPECTRUM_K, 0, 1, 5, batch_size=BATCH, batches=batches)
    return table, merged["sample"]


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_models, corpus_texts, arch):
    """``{(shards, batches): (table, sample path)}`` for one shard with 1 and BATCHES batches, three with BATCHES."""
    return {
        (n_shards, batches): run_batches(
            tmp_path_factory.mktemp(f"batches-{arch}-{n_shards}-{batches}"),
            tiny_models[arch],
            corpus_texts,
            n_shards,
            batches,
        )
        for n_shards, batches in ((1, 1), (1, BATCHES), (3, BATCHES))
    }


@pytest.mark.integration
def test_batches_change_no_existing_column(runs):
    one, four = runs[(1, 1)][0], runs[(1, BATCHES)][0]
    columns = geometry_columns(SPECTRUM_K)
    existing = columns[: columns.index("twonn_gaussian") + 1]
    for column in existing:
        np.testing.assert_array_equal(one[column].to_numpy(), four[column].to_numpy(), err_msg=column)
    assert (one["sample_batches"] == 1).all() and one["twonn_batch_std"].isna().all()
    assert (four["sample_batches"] == BATCHES).all() and (four["twonn_batch_std"] > 0).all()
    np.testing.assert_array_equal(one["twonn_batch_mean"].to_numpy(), one["twonn"].to_numpy())


@pytest.mark.integration
def test_batches_do_not_depend_on_the_sharding(runs):
    one, three = (pq.read_table(runs[key][1]) for key in ((1, BATCHES), (3, BATCHES)))
    assert one.equals(three), "the sample batches depend on the sharding"
    columns = geometry_columns(SPECTRUM_K)
    # the sums' columns merge to float64 rounding; config_hash names the shard count
    from_sample = columns[columns.index("twonn_points") : columns.index(PARTITION_COLUMNS[-1]) + 1]
    one_table, three_table = runs[(1, BATCHES)][0], runs[(3, BATCHES)][0]
    np.testing.assert_array_equal(one_table[from_sample].to_numpy(), three_table[from_sample].to_numpy())


@pytest.mark.integration
def test_batches_are_blocks_of_the_brute_force_ranking(runs, oracle, tiny_models, corpus_texts, arch):
    from support.pipeline_runs import sentence_offsets

    keys, X = oracle
    offsets = sentence_offsets(tiny_models[arch], corpus_texts)
    all_keys = token_keys(np.arange(len(corpus_texts)), np.zeros(len(corpus_texts)), offsets, seed=0)
    ranking = np.argsort(all_keys, kind="stable")
    assert len(ranking) >= BATCHES * BATCH
    sample = pq.ParquetFile(runs[(1, BATCHES)][1])
    for layer in range(X.shape[0]):
        table = sample.read_row_group(layer)
        rows = offsets[table.column("sentence_id").to_numpy()] + table.column("position").to_numpy()
        for b in range(BATCHES):
            block = slice(b * BATCH, (b + 1) * BATCH)
            np.testing.assert_array_equal(rows[block], ranking[block])
            np.testing.assert_array_equal(table.column("key").to_numpy()[block], all_keys[ranking[block]])
            np.testing.assert_allclose(
                points(table)[block], X[layer, ranking[block]], rtol=0, atol=1e-5 * np.abs(X[layer]).max()
            )


@pytest.mark.integration
def test_batch_columns_equal_the_references_on_each_batch(runs):
    table, sample_path = runs[(1, BATCHES)]
    for layer in range(len(table)):
        x = points(pq.ParquetFile(sample_path).read_row_group(layer)).astype(np.float64)
        blocks = [x[b * BATCH : (b + 1) * BATCH] for b in range(BATCHES)]
        expected = {
            "twonn_batch": [skdim.id.TwoNN().fit(distinct_points(block)).dimension_ for block in blocks],
            "twonn_razzhigaev": [reference_intrinsic_dimension(block) for block in blocks],
            "anisotropy_batch": [reference_anisotropy(block) for block in blocks],
        }
        for metric, values in expected.items():
            got = table.loc[layer, [f"{metric}_mean", f"{metric}_std"]].to_numpy(dtype=float)
            want = [np.mean(values), np.std(values, ddof=1)]
            np.testing.assert_allclose(got, want, rtol=RTOL, err_msg=f"layer {layer} {metric}")
