"""Integration tier: a layer-major extraction job writes the whole-model job's files bit for bit, for every tested
family, in float32 and bfloat16, on 1 and 3 shards, with the paper's sums alone and with every geometry switch on."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pyarrow as pa
import pytest
import torch

from ctxvar.corpus.shards import split_corpus
from ctxvar.errors import ModelLoadError
from ctxvar.extraction.accumulator import NO_GEOMETRY, GeometryOptions
from ctxvar.extraction.extract import prepare_shard
from ctxvar.extraction.layer_major import choose_blocks, find_blocks
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.files.parquet import write_table

from support.pipeline_runs import TEST_DEVICE, both_orders
from support.tiny_models import DECODERS, ENCODERS, tiny_model

EVERY_SWITCH = GeometryOptions(covariance=True, cosine=True, sample_size=40, ethayarajh=True)
FAMILIES = ["bert", "roberta", "gpt2", *DECODERS, *ENCODERS]


@pytest.fixture(scope="module")
def family_models(tmp_path_factory, tiny_models):
    """Directories of tiny random-init models by family: the session's BERT, RoBERTa and GPT-2, and decoders of
    :data:`support.tiny_models.DECODERS` with the GPT-2 model's tokenizer and randomised norms."""
    folders = {family: tiny_models[family] for family in ("bert", "roberta", "gpt2")}
    for seed, family in enumerate(FAMILIES[3:]):
        folder = tmp_path_factory.mktemp("families") / family
        sizes = {**DECODERS, **ENCODERS}[family]
        folders[family] = tiny_model(folder, family, tiny_models["gpt2"], seed, norms_seed=seed, **sizes)
    return folders


def shards_of(folder, texts, model_dir: str, n_shards: int):
    write_table(pa.table({"sentence_id": np.arange(len(texts)), "text": texts}), folder / "sentences.parquet")
    shards = [folder / f"shard{i}.parquet" for i in range(n_shards)]
    split_corpus(folder / "sentences.parquet", shards, {"id": "tiny"}, model_dir, batch_tokens=128)
    return shards


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_layer_major_files_are_the_whole_model_files_bit_for_bit(
    tmp_path, family_models, corpus_texts, family, dtype, caplog
):
    """1 shard with the paper's sums alone, 3 shards with every geometry switch on (covariance, cosine, the
    position sample, Ethayarajh's word and sentence sums)."""
    model_dir = family_models[family]
    runs = [(1, NO_GEOMETRY), (3, EVERY_SWITCH)]
    for n_shards, options in runs:
        folder = tmp_path / f"{n_shards}"
        folder.mkdir()
        for shard in shards_of(folder, corpus_texts[:30], model_dir, n_shards):
            with caplog.at_level(logging.INFO, logger="ctxvar.extraction"):
                layer_major, whole = both_orders(folder, shard, model_dir, dtype, options)
            assert "memory plan: weights" in caplog.text and "whole-model: one pass; sums of layers" in caplog.text
            assert layer_major.keys() == whole.keys()
            for kind, table in whole.items():
                assert table.num_rows > 0, kind
                assert layer_major[kind].equals(table), f"{family} {dtype}: {kind} of {shard.name} differs"


def test_a_layout_without_blocks_runs_whole_model_and_the_log_says_why(tmp_path, family_models, caplog):
    """``auto`` falls back with the reason in the log; ``layer_major`` forced is a one-line error."""
    from ctxvar.extraction.passes import forward_options

    from support.pipeline_runs import shard_of

    settings = ExtractionSettings(
        model={"id": "tiny"}, source=family_models["llama"], device=TEST_DEVICE, progress=False, config_hash="t"
    )
    job = prepare_shard(shard_of(tmp_path, ["a short sentence here", "and another one"]), settings, False)
    batches = job.padded().to(job.device)
    assert find_blocks(job.model).name == "layers"
    assert forward_options(job.model) == {"use_cache": False}
    job.model.layers = torch.nn.Sequential(*job.model.layers)  # no ModuleList: a layout the driver cannot find
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction.layer_major"):
        assert choose_blocks(job.model, batches, "auto", "tiny") is None
    assert "'tiny' (llama) runs whole-model, not layer-major: LlamaModel has no ModuleList of blocks" in caplog.text
    with pytest.raises(ModelLoadError, match=r"'tiny' \(llama\) cannot run layer-major: LlamaModel has no ModuleList"):
        choose_blocks(job.model, batches, "layer_major", "tiny")


def test_a_probe_that_raises_anything_falls_back_to_the_whole_model_in_one_line(
    tmp_path, family_models, monkeypatch, caplog
):
    """Whatever a family's own code raises while the blocks are probed (here: a block that indexes what a stub
    returns), ``auto`` runs the whole model and logs the family and the reason in one line; ``layer_major`` forced
    is one line of error before any work. A file changed under the job or the device's memory still stops it."""
    from ctxvar.errors import IntegrityError
    from ctxvar.extraction import layer_major

    from support.pipeline_runs import shard_of

    settings = ExtractionSettings(
        model={"id": "tiny"}, source=family_models["falcon"], device=TEST_DEVICE, progress=False, config_hash="t"
    )
    job = prepare_shard(shard_of(tmp_path, ["a short sentence here", "and another one"]), settings, False)
    batches = job.padded().to(job.device)

    def fails(*args, **kwargs):
        raise RuntimeError("Given normalized_shape=[32], expected input with shape [*, 32]\nsecond line")

    monkeypatch.setattr(layer_major, "batch_states", fails)
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction.layer_major"):
        assert choose_blocks(job.model, batches, "auto", "tiny") is None
    (line,) = [record.getMessage() for record in caplog.records if "runs whole-model" in record.getMessage()]
    assert line == (
        "model 'tiny' (falcon) runs whole-model, not layer-major: its probe failed: RuntimeError: Given "
        "normalized_shape=[32], expected input with shape [*, 32]"
    )
    with pytest.raises(ModelLoadError) as raised:
        choose_blocks(job.model, batches, "layer_major", "tiny")
    assert "\n" not in str(raised.value) and "(falcon) cannot run layer-major: its probe failed" in str(raised.value)
    for error in (IntegrityError("a file changed"), torch.cuda.OutOfMemoryError("CUDA out of memory")):
        monkeypatch.setattr(layer_major, "batch_states", lambda *args, error=error: (_ for _ in ()).throw(error))
        with pytest.raises(type(error)):
            choose_blocks(job.model, batches, "auto", "tiny")


def test_shared_layers_run_their_block_once_per_layer_in_order(family_models):
    """ALBERT's one block, run for each of its layers: the driver finds the innermost list and the order."""
    from ctxvar.models.loading import load_model

    model = load_model({"id": "albert"}, family_models["albert"], "float32", torch.device("cpu"))
    blocks = find_blocks(model)
    assert blocks.name == "encoder.albert_layer_groups.0.albert_layers" and blocks.order == (0, 0, 0)
    assert blocks.shared and blocks.of_layer(2) is blocks.modules[0]


def test_hidden_states_held_in_host_memory_give_the_same_bits(tmp_path, monkeypatch, family_models, corpus_texts):
    """A plan that puts the shard's hidden states in host memory (moved per batch) changes no bit."""
    from ctxvar.extraction import order

    planned = order.memory_plan
    monkeypatch.setattr(order, "memory_plan", lambda *args: dataclasses.replace(planned(*args), states_on_host=True))
    (shard,) = shards_of(tmp_path, corpus_texts[:20], family_models["qwen2"], 1)
    layer_major, whole = both_orders(tmp_path, shard, family_models["qwen2"], "float32", EVERY_SWITCH)
    for kind, table in whole.items():
        assert layer_major[kind].equals(table), kind


def fake_gpu_job(family_models, monkeypatch, free_bytes: int, tmp_path, texts):
    """A CPU job that reads as one on a GPU with ``free_bytes`` free of 80 GB (torch.cuda.mem_get_info faked)."""
    from support.pipeline_runs import shard_of

    settings = ExtractionSettings(
        model={"id": "tiny"}, source=family_models["llama"], device="cpu", progress=False, config_hash="t"
    )
    job = prepare_shard(shard_of(tmp_path, texts), settings, False)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (free_bytes, 80 * 10**9))
    job.device = torch.device("cuda", 0)
    return job, settings


def test_the_memory_plan_names_its_parts_and_a_device_too_small_is_one_line(
    tmp_path, monkeypatch, family_models, corpus_texts
):
    from ctxvar.errors import DeviceMemoryError
    from ctxvar.extraction.budget import reserve_bytes
    from ctxvar.extraction.layer_major import memory_plan

    job, settings = fake_gpu_job(family_models, monkeypatch, 10**12, tmp_path, corpus_texts[:20])
    blocks = find_blocks(job.model)
    padded = job.padded()
    plan = memory_plan(settings, job, blocks, padded)
    block = sum(p.numel() * 4 for p in job.model.layers[0].parameters())
    assert plan.block_weights == block and plan.weights == sum(p.numel() * 4 for p in job.model.parameters())
    assert plan.hidden_states == int(padded.grid[-1]) * 32 * 4 and not plan.states_on_host
    assert plan.describe().startswith(f"weights {plan.weights / 1e9:.3f} GB ({block / 1e9:.3f} GB per block)")
    room = reserve_bytes(80 * 10**9) + plan.layer_sums + plan.transients
    assert plan.hand_over_beside and "beside the next layer's batches" in plan.describe()
    job, settings = fake_gpu_job(
        family_models, monkeypatch, room + plan.hidden_states + plan.layer_sums - 1, tmp_path, corpus_texts[:20]
    )
    second_short = memory_plan(settings, job, blocks, padded)  # one byte short of a second layer's sums
    assert not second_short.states_on_host and not second_short.hand_over_beside
    assert "between the layers" in second_short.describe()
    job, settings = fake_gpu_job(family_models, monkeypatch, room + plan.hidden_states - 1, tmp_path, corpus_texts[:20])
    assert memory_plan(settings, job, blocks, padded).states_on_host  # one byte short: the states go to the host
    job, settings = fake_gpu_job(family_models, monkeypatch, room - 1, tmp_path, corpus_texts[:20])
    with pytest.raises(DeviceMemoryError) as raised:
        memory_plan(settings, job, blocks, padded)
    message = str(raised.value)
    assert "\n" not in message and "cannot hold one layer's sums" in message
    assert "use dtype: bfloat16, a lower batch_tokens, more shards" in message


def test_stubbed_blocks_get_their_own_forward_back():
    """A forward set on a block's instance (accelerate's hooks set one) is put back after the recording."""
    from ctxvar.extraction.layer_major import Blocks, _stubbed

    hooked, plain = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)

    def wrapper(x):
        return "hooked"

    hooked.forward = wrapper
    blocks = Blocks("layers", torch.nn.ModuleList([hooked, plain]))
    with _stubbed(blocks, lambda layer, module: lambda x: (layer, module)):
        assert (hooked(None), plain(None), hooked(None)) == ((0, 0), (1, 1), (2, 0))
    assert hooked.forward is wrapper and "forward" not in plain.__dict__
    assert plain(torch.ones(2)).shape == (2,)


def test_a_projected_last_layer_is_measured_at_its_own_width(tmp_path, tiny_models, corpus_texts):
    """An OPT whose ``project_out`` makes its last hidden state 16 wide of 32 (facebook/opt-350m: 512 of 1024):
    both paths write the same files, Q, M, V per type equal brute force at each layer's own width, and the last
    layer's spectrum counts its own 16 dimensions."""
    from ctxvar.stats.geometry import covariance, spectrum_metrics
    from ctxvar.stats.sample_file import points, read_sample_layer
    from ctxvar.stats.sample_metrics import partition_metrics
    from ctxvar.stats.twonn import gaussian_twonn

    from support.oracle import assert_tokens_match, brute_force_embeddings, brute_force_tokens
    from support.pipeline_runs import GEOMETRY_SPECTRUM_K, run_geometry, run_pipeline

    sizes = {**DECODERS["opt"], "word_embed_proj_dim": 16}
    folder = tiny_model(tmp_path / "opt", "opt", tiny_models["gpt2"], 5, norms_seed=5, **sizes)
    texts = corpus_texts[:30]
    for n_shards, options in [(1, NO_GEOMETRY), (3, EVERY_SWITCH)]:
        run = tmp_path / f"orders{n_shards}"
        run.mkdir()
        for shard in shards_of(run, texts, folder, n_shards):
            layer_major, whole = both_orders(run, shard, folder, "float32", options)
            assert all(layer_major[kind].equals(table) for kind, table in whole.items())
    keys, X = brute_force_embeddings(folder, texts)
    assert [x.shape[1] for x in X] == [32, 32, 32, 16]
    (tmp_path / "merged").mkdir()
    tokens = run_pipeline(tmp_path / "merged", folder, texts, 3, "tiny-opt")[0]
    assert_tokens_match(tokens, brute_force_tokens(keys, X))
    (tmp_path / "geometry").mkdir()
    geometry, sample_path = run_geometry(tmp_path / "geometry", folder, texts, 2)
    last = X[-1]
    expected = spectrum_metrics(covariance(len(last), last.sum(0), last.T @ last), GEOMETRY_SPECTRUM_K)
    assert geometry.iloc[-1]["isoscore"] == pytest.approx(expected["isoscore"], rel=1e-6)
    # the sample's metrics at the same width: its points held with zeros past 16, cut to 16 for the Gaussian
    # reference's dimensions and I(W)'s eigenvectors
    sample = points(read_sample_layer(sample_path, 3))
    assert sample.shape[1] == 32 and not sample[:, 16:].any()
    row = geometry.iloc[-1]
    assert row["twonn_gaussian"] == gaussian_twonn(int(row["twonn_points"]), 16, 3)
    expected = partition_metrics(sample[:, :16])
    assert row["partition_isotropy_centred"] == pytest.approx(expected["partition_isotropy_centred"], rel=1e-9)
