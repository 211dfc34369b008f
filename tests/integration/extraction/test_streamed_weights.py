"""Integration tier: a model whose weights exceed the job's device budget runs layer-major with each block read
from its safetensors files (:mod:`ctxvar.extraction.streamed_weights`), and its files are bit for bit the whole
model's; a checkpoint it cannot read block by block without a guess is loaded whole, and the log says why."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file, save_file

from ctxvar.errors import DeviceMemoryError, ModelLoadError
from ctxvar.extraction.extract import extract_shard, prepare_shard, run_and_write
from ctxvar.extraction.layer_major import parameter_bytes
from ctxvar.extraction.streamed_weights import StreamedWeights
from ctxvar.files.atomic import MANIFEST
from ctxvar.models import loading
from ctxvar.stats.merge import MUST_MATCH

from support.pipeline_runs import assert_sums_equal, shard_of, streaming_budget_mb, tiny_job_settings
from support.tiny_models import DECODERS, pickled, tiny_model
from support.workflow_runs import REPO

STREAMED = "read from the files one at a time"
TINY_BUDGET_MB = (
    0.001  # below any tiny model's weights: a job that can stream them is refused, one that cannot loads whole
)


def llama_checkpoint(tiny_models, folder: Path, shard_size: str, **sizes) -> Path:
    """A random-init Llama of the tests' decoder sizes (:data:`support.tiny_models.DECODERS`), ``sizes`` replacing
    them, saved as ``LlamaForCausalLM`` (keys under ``model.``, with a head) in safetensors files of at most
    ``shard_size``, with the tiny GPT-2's tokenizer."""
    tiny_model(
        folder, "llama", tiny_models["gpt2"], 3, head=True, shard_size=shard_size, **{**DECODERS["llama"], **sizes}
    )
    return folder


@pytest.fixture(scope="module")
def llama(tmp_path_factory, tiny_models) -> str:
    """A tiny Llama in several shard files."""
    folder = llama_checkpoint(tiny_models, tmp_path_factory.mktemp("streamed") / "llama", "30KB")
    assert len(list(folder.glob("model-*.safetensors"))) >= 3
    return str(folder)


def job(tmp_path, shard, model_dir: str, dtype: str, budget_mb: float, name: str, order: str = "auto"):
    """``(sums table, metadata)`` of one extraction job with ``max_device_mb=budget_mb``."""
    settings = tiny_job_settings(model_dir, dtype, max_device_mb=budget_mb, extraction_order=order)
    metadata = extract_shard(shard, tmp_path / f"{name}.parquet", settings)
    return pq.read_table(tmp_path / f"{name}.parquet"), metadata


def streamed_and_whole(tmp_path, shard, streamed_dir: str, whole_dir: str, dtype: str, caplog, order="auto"):
    """The sums and metadata of ``streamed_dir`` under the least budget that streams its weights, then of
    ``whole_dir`` with no budget; the log of the first."""
    budget = streaming_budget_mb(streamed_dir, dtype)
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction"):
        streamed = job(tmp_path, shard, streamed_dir, dtype, budget, "streamed", order)
    log = caplog.text
    caplog.clear()
    return streamed, job(tmp_path, shard, whole_dir, dtype, 0, "whole"), log


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
def test_streamed_weights_give_the_whole_models_sums_bit_for_bit(
    tmp_path, llama, tiny_models, corpus_texts, family, dtype, caplog
):
    """Llama from a sharded ``*ForCausalLM`` checkpoint (keys under ``model.``, a head the job ignores), GPT-2 and
    BERT from single files; the same metadata a merge compares (weight and config hashes included)."""
    model_dir = llama if family == "llama" else tiny_models[family]
    shard = shard_of(tmp_path, corpus_texts[:15])
    (sums, metadata), (whole, whole_metadata), log = streamed_and_whole(
        tmp_path, shard, model_dir, model_dir, dtype, caplog
    )
    assert STREAMED in log and "streamed from the files" in log and "runs whole-model" not in log
    assert sums.num_rows > 0
    assert_sums_equal(sums, whole)
    # a run's shards may stream or not (a GPU's free memory varies): their partials must merge
    assert {key: metadata.get(key) for key in MUST_MATCH} == {key: whole_metadata.get(key) for key in MUST_MATCH}
    assert metadata["attn_implementation"] == whole_metadata["attn_implementation"]
    # the streamed job reads the model's flags, the whole one runs it if it has none: the same kind
    assert metadata["attention"] == whole_metadata["attention"] == ("bidirectional" if family == "bert" else "causal")


def test_a_weight_file_changed_after_the_job_began_is_refused_when_a_block_is_read(tmp_path, llama, corpus_texts):
    """The hash names the files' state before any block is read; a file written to since stops the read."""
    model_dir = copy_model(llama, tmp_path / "llama")
    settings = tiny_job_settings(model_dir, max_device_mb=streaming_budget_mb(model_dir))
    job_run = prepare_shard(shard_of(tmp_path, corpus_texts[:10]), settings, hash_weights=False)
    assert job_run.streamed is not None
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    changed = model_dir / index["weight_map"]["model.layers.2.mlp.down_proj.weight"]
    with open(changed, "ab") as handle:
        handle.write(b" ")
    with pytest.raises(ModelLoadError, match=f"{changed} was replaced or written to after the job loaded the model"):
        run_and_write(job_run, settings, tmp_path / "sums.parquet", {})


def copy_model(source: str, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(MANIFEST))
    return target


def rewritten(model_dir: Path, rename) -> None:
    """``model.safetensors`` with each tensor under ``rename(name)`` (dropped where it gives None)."""
    weights = load_file(model_dir / "model.safetensors")
    kept = {rename(name): tensor for name, tensor in weights.items() if rename(name) is not None}
    save_file(kept, model_dir / "model.safetensors", metadata={"format": "pt"})


def test_keys_that_transformers_renames_load_the_whole_model_and_the_log_says_why(
    tmp_path, tiny_models, corpus_texts, caplog
):
    """A BERT checkpoint with the legacy ``LayerNorm.gamma``/``beta`` names, which transformers renames on
    loading: not streamed (no guess at a renaming), loaded whole, the original model's sums."""
    model_dir = copy_model(tiny_models["bert"], tmp_path / "legacy")
    rewritten(model_dir, lambda name: name.replace("LayerNorm.weight", "LayerNorm.gamma"))
    shard = shard_of(tmp_path, corpus_texts[:12])
    (sums, _), (whole, _), log = streamed_and_whole(
        tmp_path, shard, str(model_dir), tiny_models["bert"], "float32", caplog
    )
    assert STREAMED not in log
    assert "cannot be read block by block" in log and "are not in the files under their names" in log
    assert "LayerNorm.weight" in log
    assert_sums_equal(sums, whole)


def refused_probe(monkeypatch) -> list[int]:
    """Every probe runs and refuses the layer-major path (its verdict faked), and no job loads a model from the files:
    the list the indices of the blocks read from the files are appended to."""
    from ctxvar.extraction import layer_major

    probe = layer_major.probe_mismatch  # run, reading every block, then refused
    monkeypatch.setattr(layer_major, "probe_mismatch", lambda *args: (probe(*args)[0], "a refused probe"))
    monkeypatch.setattr(loading, "load_model", lambda *args: pytest.fail("the model was loaded a second time"))
    read, read_block = [], StreamedWeights._read_block
    monkeypatch.setattr(
        StreamedWeights, "_read_block", lambda self, index: read.append(index) or read_block(self, index)
    )
    return read


def test_a_model_whose_probe_is_refused_is_loaded_whole_each_block_read_once(
    tmp_path, llama, corpus_texts, caplog, monkeypatch
):
    """Under a budget that holds every weight but not one layer's sums and batch beside them, a probe that refuses
    the layer-major path leaves the model whole: the blocks it read stay, each block is read from the files once
    and the model is not loaded again; its sums are the whole model's."""
    shard = shard_of(tmp_path, corpus_texts[:12])
    whole, _ = job(tmp_path, shard, llama, "float32", 0, "whole")
    model = loading.empty_model({"id": "tiny"}, llama, "float32")
    read = refused_probe(monkeypatch)
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction"):
        sums, _ = job(tmp_path, shard, llama, "float32", (parameter_bytes(model) + 8) / 1e6, "streamed")
    assert STREAMED in caplog.text and "the whole model is held, each block read once" in caplog.text
    assert sorted(read) == list(range(model.config.num_hidden_layers))
    assert_sums_equal(sums, whole)


def test_a_refused_probe_under_a_budget_below_the_weights_holds_the_model_whole_without_loading_it_again(
    tmp_path, llama, corpus_texts, caplog, monkeypatch
):
    """Refused, a model must run whole; weights beyond ``max_device_mb`` are held whole beyond it on a CPU, as a
    checkpoint that cannot be streamed is (on a GPU, where its memory holds them): each block is read again after
    the probe's two passes freed it, and the model is not loaded a second time; its sums are the whole model's."""
    shard = shard_of(tmp_path, corpus_texts[:12])
    whole, _ = job(tmp_path, shard, llama, "float32", 0, "whole")
    read = refused_probe(monkeypatch)
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction"):
        sums, _ = job(tmp_path, shard, llama, "float32", streaming_budget_mb(llama), "streamed")
    assert "the whole model is held, beyond the device budget, its blocks read again" in caplog.text
    blocks = loading.empty_model({"id": "tiny"}, llama, "float32").config.num_hidden_layers
    assert sorted(read) == sorted(3 * list(range(blocks)))  # the probe's two passes, then the whole model's
    assert_sums_equal(sums, whole)


def test_an_empty_shard_runs_no_block_and_loads_nothing_more(tmp_path, llama, caplog):
    """A shard with no sequence (more shards than sentences) runs no forward pass: its weights beyond the budget
    are not loaded whole for it (on a GPU that cannot hold them, that would run out of memory)."""
    shard = shard_of(tmp_path, [], "empty.parquet")
    (sums, _), (whole, _), log = streamed_and_whole(tmp_path, shard, llama, llama, "float32", caplog)
    assert STREAMED in log and "the whole model is loaded" not in log
    assert sums.num_rows == 0 and sums.schema.equals(whole.schema)


def test_a_whole_model_order_loads_the_model_whole_and_reads_no_block(tmp_path, llama, corpus_texts, caplog):
    """``extraction_order: whole_model`` never runs block by block: its weights are not streamed at all."""
    shard = shard_of(tmp_path, corpus_texts[:12])
    (sums, _), (whole, _), log = streamed_and_whole(tmp_path, shard, llama, llama, "float32", caplog, "whole_model")
    assert STREAMED not in log and "extraction_order: whole_model runs every block at once" in log
    assert_sums_equal(sums, whole)


@pytest.mark.parametrize(
    "damage, logged, refused",
    [
        (
            "missing",
            "1 of its tensors are not in the files under their names: layers.1.mlp.up_proj.weight",
            "are not in its weight files and would be initialised at random",
        ),
        ("pickled", "pytorch_model.bin) hold 0 numbers", "are not in its weight files and would be initialised"),
    ],
)
def test_a_checkpoint_streaming_cannot_read_is_loaded_whole_and_refused_there(
    tmp_path, tiny_models, corpus_texts, caplog, damage, logged, refused
):
    """A block tensor missing from the files, or a pickled checkpoint of no tensors: the log says why the weights
    are not streamed, and the whole model's loading refuses the files in one line, as without a budget."""
    model_dir = llama_checkpoint(tiny_models, tmp_path / "llama", "10MB")
    if damage == "missing":
        rewritten(model_dir, lambda name: None if name == "model.layers.1.mlp.up_proj.weight" else name)
    else:
        (model_dir / "model.safetensors").unlink()
        torch.save({}, model_dir / "pytorch_model.bin")
    shard = shard_of(tmp_path, corpus_texts[:10])
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction"), pytest.raises(ModelLoadError) as raised:
        job(tmp_path, shard, str(model_dir), "float32", TINY_BUDGET_MB, "refused")
    assert "cannot be read block by block" in caplog.text and logged in caplog.text
    assert refused in str(raised.value) and "\n" not in str(raised.value)


def test_a_pickled_checkpoint_beyond_the_budget_is_loaded_whole_with_the_same_sums(
    tmp_path, tiny_models, corpus_texts, caplog
):
    """pytorch_model.bin alone (a checkpoint saved before safetensors, as Pythia's older steps are): its tensors are
    not read one block at a time, so a budget below its weights loads it whole, and the log says why."""
    model_dir = llama_checkpoint(tiny_models, tmp_path / "llama", "10MB")
    safetensors = llama_checkpoint(tiny_models, tmp_path / "safetensors", "10MB")
    pickled(model_dir)
    shard = shard_of(tmp_path, corpus_texts[:10])
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction"):
        (sums, metadata) = job(tmp_path, shard, str(model_dir), "float32", TINY_BUDGET_MB, "pickled")
    assert "its checkpoint is pickled (pytorch_model.bin)" in caplog.text and STREAMED not in caplog.text
    (whole, whole_metadata) = job(tmp_path, shard, str(safetensors), "float32", 0, "whole")
    assert_sums_equal(sums, whole)
    assert metadata["weights_sha256"] == whole_metadata["weights_sha256"]


def test_a_gpu_too_small_for_weights_that_cannot_be_streamed_is_one_line_before_loading(
    tmp_path, tiny_models, monkeypatch
):
    """A block tensor missing from the files on a GPU (faked: torch.cuda.mem_get_info) whose free memory cannot
    hold the weights: one line naming the numbers, why they are not streamed and the remedy, before any load."""
    from ctxvar.extraction.budget import reserve_bytes
    from ctxvar.extraction.streamed_weights import load_for_job

    model_dir = llama_checkpoint(tiny_models, tmp_path / "llama", "10MB")
    rewritten(model_dir, lambda name: None if name == "model.layers.1.mlp.up_proj.weight" else name)
    total = 80 * 10**9
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (reserve_bytes(total) + 1000, total))
    with pytest.raises(DeviceMemoryError) as raised:
        load_for_job(tiny_job_settings(model_dir), torch.device("cuda", 0))
    message = str(raised.value)
    assert "\n" not in message and "do not fit the 4.00 GB free less a reserve of 4.00 GB" in message
    assert "(1 of its tensors are not in the files under their names: layers.1.mlp.up_proj.weight)" in message
    assert "use dtype: bfloat16, a GPU with more memory, or save the model again with save_pretrained" in message


@pytest.mark.parametrize("below", [0.5, 1e-3])
def test_a_budget_below_what_streaming_holds_is_one_line_naming_both_numbers(tmp_path, llama, corpus_texts, below):
    """``max_device_mb`` below the weights outside the blocks and two blocks: streamed, the job would hold more than
    it whatever its batches, so it stops before any weight is read, naming the budget, what streaming holds and the
    least budget that does."""

    least = streaming_budget_mb(llama)
    budget = least * below
    with pytest.raises(DeviceMemoryError) as raised:
        job(tmp_path, shard_of(tmp_path, corpus_texts[:5]), llama, "float32", budget, "refused")
    message = str(raised.value)
    assert (
        "\n" not in message
        and f"a device budget of {int(budget * 1e6) / 1e6:.4g} MB (max_device_mb: {budget:g})" in message
    )
    assert f"is below the {least - 16e-6:.4g} MB its weights hold when streamed" in message
    assert f"set max_device_mb to at least {-(-(least * 1e6 - 16) // 1e6):.0f}" in message
    assert not (tmp_path / "refused.parquet").exists()


def test_a_whole_model_order_on_a_gpu_too_small_is_one_line_before_anything_is_read(tmp_path, llama, monkeypatch):
    """``extraction_order: whole_model`` never runs block by block: weights beyond the GPU (faked:
    torch.cuda.mem_get_info) are refused at once with the numbers and the remedy, not read block by block first
    and then loaded whole into a device that cannot hold them."""
    from ctxvar.extraction.budget import reserve_bytes
    from ctxvar.extraction.streamed_weights import load_for_job

    total = 80 * 10**9
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (reserve_bytes(total) + 1000, total))
    with pytest.raises(DeviceMemoryError) as raised:
        load_for_job(tiny_job_settings(llama, extraction_order="whole_model"), torch.device("cuda", 0))
    message = str(raised.value)
    assert "\n" not in message and "(extraction_order: whole_model runs every block at once)" in message
    assert "use dtype: bfloat16, a GPU with more memory, or extraction_order: auto" in message


# A Llama-shaped model of 10 blocks of 12.7 MB (float32): 127 MB of weights, streamed under a budget of 40 MB.
PEAK_SIZES = dict(hidden_size=512, num_attention_heads=8, num_key_value_heads=8, intermediate_size=1376)
PEAK_LAYERS, PEAK_BUDGET_MB = 10, 40
ALLOWANCE_BYTES = 24 * 2**20  # the job's host memory off the device plan: tokenizer, tokens, hash buffer, libraries


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_weights_three_times_the_budget_run_within_the_plan(tmp_path, llama, tiny_models, corpus_texts):
    """tests/support/streamed_peak.py in a fresh process: the job's resident memory grows by at most its memory plan
    (resident weights: the weights outside the blocks and two blocks; hidden states; one layer's sums;
    transients) plus :data:`ALLOWANCE_BYTES`, less than the weights alone, and its sums are the whole model's."""
    model_dir = llama_checkpoint(tiny_models, tmp_path / "llama", "100MB", **PEAK_SIZES, num_hidden_layers=PEAK_LAYERS)
    shard = shard_of(tmp_path, corpus_texts[:5])
    script = REPO / "tests" / "support" / "streamed_peak.py"
    environment = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    run = subprocess.run(
        [
            sys.executable,
            str(script),
            str(shard),
            str(model_dir),
            str(tmp_path / "streamed.parquet"),
            "float32",
            str(PEAK_BUDGET_MB),
            llama,
        ],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
    )
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    assert measured["streamed"] and measured["weights_bytes"] >= 3 * PEAK_BUDGET_MB * 1e6
    assert measured["resident_weights_bytes"] <= PEAK_BUDGET_MB * 1e6
    assert measured["peak_bytes"] <= measured["plan_bytes"] + ALLOWANCE_BYTES < measured["weights_bytes"], measured
    whole, metadata = job(tmp_path, shard, str(model_dir), "float32", 0, "whole")
    assert_sums_equal(pq.read_table(tmp_path / "streamed.parquet"), whole)
    assert measured["weights_sha256"] == metadata["weights_sha256"]
