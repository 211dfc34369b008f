"""Integration tier: extraction + merge on tiny random-init models against brute force.

The oracle keeps every embedding in memory, one unpadded sentence at a time,
and computes the statistics by definition (V as the mean squared distance to
the type mean, not as Q − M).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from ctxvar.corpus.sources import synthetic_sentences
from ctxvar.errors import IntegrityError, StatisticsError
from ctxvar.extraction.budget import device_layers, state_bytes
from ctxvar.extraction.extract import extract_shard, prepare_shard
from ctxvar.extraction.passes import forward_options
from ctxvar.extraction.pca_points import merge_points, projected_points, read_types
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.shard import chunk_batches
from ctxvar.figures.pca_plots import point_summary
from ctxvar.figures.pca_selection import select_pca_tokens
from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import read_metadata, read_table, vector_rows, write_table
from ctxvar.models import hashing
from ctxvar.models.batching import BATCH_TOKENS
from ctxvar.models.tokens import encode
from ctxvar.stats.merge import merge_partials
from ctxvar.stats.sums import SumsFile
from ctxvar.versions import device_name

from support.oracle import assert_tokens_match, brute_force_tokens
from support.pipeline_runs import PCA, PCA_ANALYSIS, TEST_DEVICE, assert_sums_equal, run_pipeline
from support.tiny_models import random_model
from support.workflow_runs import DEMO


@pytest.fixture(scope="module", params=["bert", "roberta", "gpt2"])
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def one_shard(tmp_path_factory, tiny_models, corpus_texts, arch):
    return run_pipeline(
        tmp_path_factory.mktemp(f"one-{arch}"), tiny_models[arch], corpus_texts, 1, f"tiny-{arch}", pca_points=True
    )


@pytest.fixture(scope="module")
def four_shards(tmp_path_factory, tiny_models, corpus_texts, arch):
    return run_pipeline(
        tmp_path_factory.mktemp(f"four-{arch}"), tiny_models[arch], corpus_texts, 4, f"tiny-{arch}", pca_points=True
    )


def test_tokens_match_brute_force(one_shard, oracle):
    tokens = one_shard[0]
    assert_tokens_match(tokens, brute_force_tokens(*oracle))
    by_layer = tokens.groupby("layer")["Q"]
    assert (by_layer.std() / by_layer.mean()).min() > 0.01, "Q nearly constant: the test would be blind"


def test_layers_match_brute_force(one_shard, oracle):
    keys, X = oracle
    layers = one_shard[1]
    names, counts = np.unique(keys, return_counts=True)
    kept = set(names[(counts >= 10) & (counts <= 100_000)])
    mask = np.array([k in kept for k in keys])
    assert 5 < len(kept) < len(names), "the filter must matter in this test"
    for layer in range(X.shape[0]):
        x = X[layer, mask]
        mu = x.mean(0)
        means = {k: X[layer, keys == k].mean(0) for k in kept}
        row = layers.iloc[layer]
        assert row["n"] == mask.sum() and row["n_types"] == len(kept)
        assert row["Q"] == pytest.approx((x**2).sum(1).mean(), rel=1e-6)
        assert row["M"] == pytest.approx((mu**2).sum(), rel=1e-6, abs=1e-6 * row["Q"])
        assert row["V"] == pytest.approx(((x - mu) ** 2).sum(1).mean(), rel=1e-6)
        within = np.mean([((X[layer, i] - means[keys[i]]) ** 2).sum() for i in np.flatnonzero(mask)])
        assert row["V_W"] == pytest.approx(within, rel=1e-6)
        assert row["V_B"] == pytest.approx(row["V"] - within, rel=1e-6, abs=1e-9 * row["Q"])


def test_four_shards_equal_one_shard(one_shard, four_shards):
    (t1, l1, _), (t4, l4, _) = one_shard, four_shards
    assert t1[["layer", "token", "n"]].equals(t4[["layer", "token", "n"]])
    for column in ("Q", "M", "V"):
        np.testing.assert_allclose(t4[column], t1[column], rtol=1e-9, atol=1e-12 * t1["Q"].max())
    numeric = l1.columns.drop(["layer", "config_hash"])
    np.testing.assert_allclose(l4[numeric].to_numpy(float), l1[numeric].to_numpy(float), rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def demo_sized(tmp_path_factory):
    """The demo's corpus (6,000 generated sentences) and a tiny BERT with a tokenizer trained on it."""
    texts = [t for t in synthetic_sentences(DEMO["corpus"]["synthetic"], DEMO["corpus"]["seed"]) if len(t.split()) < 64]
    model_dir = tmp_path_factory.mktemp("demo-sized") / "bert"
    random_model(model_dir, "bert", texts, seed=1, vocab_size=2000, num_layers=2)
    return texts, model_dir


def test_every_shard_works_and_results_are_the_same_for_1_3_and_8_shards(tmp_path_factory, demo_sized):
    """At the workflow's default batch budget, every sentence meets the same batch-mates whatever the shard
    count: the sampled hidden states are bitwise equal, and the sums differ only by the order of float64
    additions (far below the 10⁻⁷ of a float32 forward pass with other batch-mates)."""
    texts, model_dir = demo_sized
    runs = {}
    for n_shards in (1, 3, 8):
        tmp = tmp_path_factory.mktemp(f"demo-sized-{n_shards}")
        runs[n_shards] = run_pipeline(tmp, model_dir, texts, n_shards, "demo-bert", BATCH_TOKENS, sample_size=600)
        sizes = [pq.read_metadata(tmp / f"shard{i}.parquet").num_rows for i in range(n_shards)]
        assert min(sizes) > 0 and sum(sizes) == len(texts), f"{n_shards} shards: {sizes}"
    one = runs[1][0]
    for n_shards in (3, 8):
        tokens, sample = runs[n_shards][0], runs[n_shards][2].with_name("sample.parquet")
        assert pq.read_table(sample).equals(pq.read_table(runs[1][2].with_name("sample.parquet")))
        assert tokens[["layer", "token", "n"]].equals(one[["layer", "token", "n"]])
        for column in ("Q", "M", "V"):
            np.testing.assert_allclose(tokens[column], one[column], rtol=1e-12, atol=1e-12 * one["Q"].max())


def test_merged_sums_over_1_3_and_8_shards_are_bitwise_equal_where_float64_adds_exactly(
    tmp_path, tiny_models, corpus_texts
):
    """Every sentence's hidden states are the same bits whatever the sharding (chunks are never split), so n and Σx,
    sums of float32 values that float64 adds exactly here, are bitwise the same for 1, 3 and 8 shards, through
    each shard's partial file and the merge. Σ‖x‖² and Σ x/‖x‖ add float64 values that were rounded (‖x‖², 1/‖x‖),
    so their sums depend on how shards group the additions, by float64 rounding only."""
    merged = {}
    for shards in (1, 3, 8):
        (tmp_path / str(shards)).mkdir()
        stats = run_pipeline(
            tmp_path / str(shards), tiny_models["bert"], corpus_texts, shards, "tiny-bert", cosine=True
        )[2]
        merged[shards] = SumsFile(stats)
    for layer in range(merged[1].n_layers):
        one = merged[1].layer(layer)
        for shards in (3, 8):
            other = merged[shards].layer(layer)
            assert np.array_equal(other.types, one.types) and np.array_equal(other.count, one.count)
            assert other.sum.tobytes() == one.sum.tobytes(), f"Σx of layer {layer} differs with {shards} shards"
            np.testing.assert_allclose(other.sum_sq, one.sum_sq, rtol=1e-14)
            np.testing.assert_allclose(other.sum_unit, one.sum_unit, rtol=0, atol=1e-14 * one.count.max())


def test_merge_is_bitwise_independent_of_input_order(tmp_path, four_shards):
    stats = four_shards[2]
    partials = sorted(stats.parent.glob("partial?.parquet"))
    merge_partials(partials[::-1], tmp_path / "stats.parquet", tmp_path / "tokens.parquet")
    assert pq.read_table(tmp_path / "tokens.parquet").equals(pq.read_table(stats.parent / "tokens.parquet"))
    assert pq.read_table(tmp_path / "stats.parquet").equals(pq.read_table(stats))


def test_metadata_records_provenance(one_shard):
    metadata = read_metadata(one_shard[2])
    assert metadata["n_layers"] == 4 and metadata["d"] == 32 and metadata["shards"] == [0]
    assert len(metadata["weights_sha256"]) == 64 and metadata["versions"]["torch"] == torch.__version__
    assert metadata["versions"]["cuda"] == (torch.version.cuda or "none") and "cudnn" in metadata["versions"]
    device = torch.device(TEST_DEVICE)
    assert metadata["devices"] == [torch.cuda.get_device_name(device) if device.type == "cuda" else device_name(device)]
    cuda_kernels = "flash_attention, efficient_attention, math"
    assert metadata["attention_kernels"] == [cuda_kernels if device.type == "cuda" else "torch's default"]
    assert metadata["config_hash"] == "test" and metadata["dtype"] == "float32"


def test_merge_refuses_partials_of_another_model(tmp_path, tiny_models, corpus_texts, four_shards):
    partials = sorted(four_shards[2].parent.glob("partial?.parquet"))
    shard = four_shards[2].parent / "shard1.parquet"
    other = "gpt2" if "bert" in str(four_shards[2]) else "bert"
    settings = ExtractionSettings(
        model={"id": "tiny"}, source=tiny_models[other], device=TEST_DEVICE, shard=1, progress=False, config_hash="test"
    )
    extract_shard(shard, tmp_path / "foreign.parquet", settings)
    with pytest.raises(
        StatisticsError, match="foreign.parquet differs from .* in (model_id|d|tokenizer_sha256|weights_sha256)"
    ):
        merge_partials([partials[0], tmp_path / "foreign.parquet"], tmp_path / "s.parquet", tmp_path / "t.parquet")


def test_corrupt_partial_is_reported_by_name(tmp_path):
    bad = tmp_path / "partial3.parquet"
    bad.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(IntegrityError, match="partial3.parquet: not a readable Parquet file.*delete it and re-run"):
        merge_partials([bad], tmp_path / "s.parquet", tmp_path / "t.parquet")


def second_pass_points(shard, settings: ExtractionSettings, types: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, rows)``: what the former second pass over a shard collected for Fig. 1, as float32 rows, in its
    order: the model run again over only the sentences that hold a chosen type, batched within chunks."""
    job = prepare_shard(shard, settings, hash_weights=False)
    layer, wanted = int(types["layer"].iloc[0]), np.isin(job.types, types["token"].to_numpy())
    hits, offsets = np.concatenate([[0], np.cumsum(wanted[job.type_index])]), job.encoded.offsets
    rows = np.flatnonzero(hits[offsets[1:]] > hits[offsets[:-1]])
    batches = [rows[b] for b in chunk_batches(job.encoded.lengths[rows], job.chunk[rows], settings.batch_tokens)]
    tokens, points = [], []
    with torch.inference_mode():
        for batch in job.padded(batches).to(job.device):
            output = job.model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                output_hidden_states=True,
                **forward_options(job.model),
            )
            keep = torch.from_numpy(wanted).to(job.device)[batch.type_index]
            states = output.hidden_states[layer].reshape(-1, job.d)
            points.append(states[batch.positions[keep]].float().cpu().numpy())
            tokens.append(job.types[batch.type_index[keep].cpu().numpy()])
    return np.concatenate(tokens), np.concatenate(points)


@pytest.mark.parametrize("run", ["one_shard", "four_shards"])
def test_extraction_collects_the_points_a_second_pass_would_bit_for_bit(request, run, tiny_models, arch):
    """Fig. 1's points, collected by the extraction's own pass, are the former second pass's rows bit for bit and
    in its order; the selection made before extraction is the one the merged sums make."""
    _, _, stats = request.getfixturevalue(run)
    folder = stats.parent
    types = read_types(folder / "types.csv")
    assert types["layer"].eq(2).all() and len(types) >= 5
    selection, _ = select_pca_tokens(stats, folder / "tokens.parquet", PCA, PCA_ANALYSIS)
    pd.testing.assert_frame_equal(selection[types.columns], types)
    settings = ExtractionSettings(
        model={"id": f"tiny-{arch}"}, source=tiny_models[arch], device=TEST_DEVICE, batch_tokens=512, progress=False
    )
    for i in range(len(list(folder.glob("shard*.parquet")))):
        points = pq.read_table(folder / f"points{i}.parquet")
        tokens, rows = second_pass_points(folder / f"shard{i}.parquet", settings, types)
        assert points.column("token").to_pylist() == tokens.tolist()
        np.testing.assert_array_equal(vector_rows(points.column("x"), "<f4"), rows)


def test_merged_points_project_as_each_shard_s_own_batches(four_shards, tmp_path):
    """pca/points.parquet keeps every shard's rows in order, so its projection is bit for bit the shards' own, one
    product per batch of each shard; points of another layer are refused."""
    folder = four_shards[2].parent
    shards = [folder / f"points{i}.parquet" for i in range(4)]
    merge_points(shards, tmp_path / "points.parquet")
    weights = np.random.default_rng(0).normal(size=(2, read_metadata(shards[0])["d"]))
    alone = []
    for i, shard in enumerate(shards):
        merge_points([shard], tmp_path / f"alone{i}.parquet")
        alone.append(projected_points(tmp_path / f"alone{i}.parquet", weights))
    merged = projected_points(tmp_path / "points.parquet", weights)
    pd.testing.assert_frame_equal(merged, pd.concat(alone, ignore_index=True), check_exact=True)
    assert read_table(tmp_path / "points.parquet").column("shard").to_pylist() == [
        i for i, part in enumerate(alone) for _ in range(len(part))
    ]
    other = read_metadata(shards[1])
    write_table(read_table(shards[1]), tmp_path / "other.parquet", metadata={**other, "layer": other["layer"] + 1})
    with pytest.raises(StatisticsError, match="do not belong with"):
        merge_points([shards[0], tmp_path / "other.parquet"], tmp_path / "refused.parquet")
    assert not (tmp_path / "refused.parquet").exists()


def test_projected_points_average_to_the_merged_sums(four_shards):
    """Counts equal n_t exactly; mean squared norm and mean coordinates equal Q_t and μ_t·W to float64 rounding
    (the points are the pass's own values)."""
    _, _, stats = four_shards
    folder = stats.parent
    selection, components = select_pca_tokens(stats, folder / "tokens.parquet", PCA, PCA_ANALYSIS, folder / "types.csv")
    weights = components.set_index("component").to_numpy(float)
    merge_points([folder / f"points{i}.parquet" for i in range(4)], folder / "points.parquet")
    points = projected_points(folder / "points.parquet", weights)
    summary = point_summary(points).set_index("token").loc[selection["token"]]
    np.testing.assert_array_equal(summary["points"], selection["n"])
    np.testing.assert_allclose(summary["mean_sq_norm"], selection["Q"], rtol=1e-12)
    scale = np.sqrt(selection["Q"].to_numpy())
    np.testing.assert_allclose(summary["mean_pc1"] / scale, selection["pc1"] / scale, atol=1e-12)
    np.testing.assert_allclose(summary["mean_pc2"] / scale, selection["pc2"] / scale, atol=1e-12)


def test_a_selection_other_than_the_one_made_before_extraction_is_refused(tmp_path, four_shards):
    _, _, stats = four_shards
    types = read_types(stats.parent / "types.csv")
    write_csv(types.iloc[1:], tmp_path / "types.csv")
    with pytest.raises(StatisticsError, match="types chosen before extraction"):
        select_pca_tokens(stats, stats.parent / "tokens.parquet", PCA, PCA_ANALYSIS, tmp_path / "types.csv")


def test_a_state_cap_keeps_the_later_layers_in_host_memory_with_bitwise_equal_sums(
    tmp_path, four_shards, tiny_models, arch
):
    shard = four_shards[2].parent / "shard0.parquet"
    uncapped = pq.read_table(four_shards[2].parent / "partial0.parquet")
    types = len(uncapped.filter(pa.compute.equal(uncapped.column("layer"), 0)))
    cap_mb = state_bytes(2, types, 32) / 1e6  # two of the five layers on the device, three in host memory
    capped = ExtractionSettings(
        model={"id": f"tiny-{arch}"},
        source=tiny_models[arch],
        device=TEST_DEVICE,
        batch_tokens=512,
        shard=0,
        progress=False,
        config_hash="test",
        max_state_mb=cap_mb,
        extraction_order="whole_model",  # layer-major jobs hold one layer's sums whatever the cap
    )
    assert device_layers(5, types, 32, cap_mb * 1e6) == 2
    extract_shard(shard, tmp_path / "capped.parquet", capped)
    assert_sums_equal(pq.read_table(tmp_path / "capped.parquet"), uncapped)


def test_the_shards_ids_and_the_background_weight_hash_equal_the_direct_ones(four_shards, tiny_models, arch):
    shard = four_shards[2].parent / "shard0.parquet"
    settings = ExtractionSettings(
        model={"id": f"tiny-{arch}"}, source=tiny_models[arch], device=TEST_DEVICE, progress=False
    )
    job = prepare_shard(shard, settings)
    assert job.weights_hash.result() == hashing.weights_sha256(
        hashing.weight_files(settings.model, settings.source, job.model)
    )
    direct = encode(job.tokenizer, read_table(shard, columns=["text"]).column("text").to_pylist())
    np.testing.assert_array_equal(job.encoded.ids, direct.ids)
    np.testing.assert_array_equal(job.encoded.offsets, direct.offsets)
