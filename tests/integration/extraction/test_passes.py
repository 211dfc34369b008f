"""Integration tier: what a job's forward passes wait for and hold, on tiny random-init models; hidden
states that hold NaN or Inf stop the job before it writes."""

from __future__ import annotations

import shutil
import threading
import weakref

import pyarrow.parquet as pq
import pytest
import torch

from ctxvar.errors import StatisticsError
from ctxvar.extraction import passes
from ctxvar.extraction.accumulator import EmbeddingSums
from ctxvar.extraction.budget import state_bytes
from ctxvar.extraction.extract import extract_shard, prepare_shard
from ctxvar.extraction.passes import run_batches
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.files.parquet import read_metadata
from ctxvar.models import hashing
from ctxvar.models import loading as models
from ctxvar.run.job_log import job_log

from support.pipeline_runs import TEST_DEVICE, extract, shard_of

HASH_PATIENCE_S = 30  # how long the held-back hash waits for a forward pass before it gives up: a deadlock's bound


@pytest.fixture(scope="module")
def shard(tmp_path_factory, corpus_texts):
    folder = tmp_path_factory.mktemp("shard")
    return shard_of(folder, corpus_texts)


def settings_for(model_dir: str, **options) -> ExtractionSettings:
    return ExtractionSettings(
        model={"id": "tiny"}, source=model_dir, device=TEST_DEVICE, progress=False, config_hash="test", **options
    )


def test_the_first_forward_pass_does_not_wait_for_the_weights_hash(tmp_path, monkeypatch, shard, tiny_models):
    """The hash is held back until a forward pass starts: a job that waited for it before its batches would
    never start one (the hash gives up after HASH_PATIENCE_S). The hash still lands in the metadata."""
    forward_started = threading.Event()
    hash_saw = []
    hash_weights = hashing.weights_sha256

    def held_back_hash(files, threads=1):
        hash_saw.append("a forward pass" if forward_started.wait(HASH_PATIENCE_S) else "no forward pass")
        return hash_weights(files, threads)

    monkeypatch.setattr(hashing, "weights_sha256", held_back_hash)
    hook = torch.nn.modules.module.register_module_forward_pre_hook(lambda *_: forward_started.set())
    try:
        metadata = extract_shard(shard, tmp_path / "partial.parquet", settings_for(tiny_models["gpt2"]))
    finally:
        hook.remove()
    assert hash_saw == ["a forward pass"]
    model = models.load_model({"id": "tiny"}, tiny_models["gpt2"], "float32", torch.device(TEST_DEVICE))
    expected = hash_weights(hashing.weight_files({"id": "m"}, tiny_models["gpt2"], model))
    assert metadata["weights_sha256"] == read_metadata(tmp_path / "partial.parquet")["weights_sha256"] == expected


class RecordingModel(torch.nn.Module):
    """``model``, recording per call whether ``use_cache`` was False and whether the previous call's hidden
    states were still alive when this call began."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config
        self.calls: list[dict] = []
        self._previous = None

    def forward(self, **inputs):
        previous_alive = self._previous is not None and self._previous() is not None
        output = self.model(**inputs)
        self.calls.append({"use_cache": inputs.get("use_cache"), "previous_output_alive": previous_alive})
        self._previous = weakref.ref(output.hidden_states[-1])
        return output


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_forward_passes_build_no_cache_and_never_overlap_the_previous_output(shard, tiny_models, arch):
    """Decoders would return every layer's keys and values (≈ 1.9× the hidden states at 24–32 layers), and a batch's
    outputs, rebound only once the next forward pass returns, would live through it."""
    job = prepare_shard(shard, settings_for(tiny_models[arch], batch_tokens=256), hash_weights=False)
    padded = job.padded()
    assert len(padded) >= 3
    model = RecordingModel(job.model)
    sums = EmbeddingSums(range(job.n_layers), job.n_layers, len(job.types), job.d, job.device)
    run_batches(model, sums, padded, job.device, progress=False)
    assert len(model.calls) == len(padded)
    assert all(call["use_cache"] is False for call in model.calls)
    assert not any(call["previous_output_alive"] for call in model.calls)


def test_sums_beyond_the_cap_go_to_host_memory_in_one_pass_with_a_console_warning(
    tmp_path, capsys, monkeypatch, shard, tiny_models
):
    """A cap of two layers' sums on the whole-model path: the tiny model's other two hidden states keep their sums
    in host memory, and the model still runs once per batch (no second pass); the console (the job's stderr, as
    Snakemake shows it) gets one line with the cost and the remedy; the sums are those of the job without a cap,
    bit for bit. The host's sums are on ``cpu:0``, another device than the batch's ``cpu`` to torch, so each of
    their layers is copied there as on a GPU."""
    monkeypatch.setattr(passes, "HOST", torch.device("cpu", 0))
    copied = []
    monkeypatch.setattr(passes.CopiedLayers, "__getitem__", recording(passes.CopiedLayers.__getitem__, copied))
    probe = prepare_shard(shard, settings_for(tiny_models["gpt2"]), hash_weights=False)
    n_batches = len(probe.padded())
    cap_mb = state_bytes(2, len(probe.types), probe.d) / 1e6
    calls = []
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda module, *_: calls.append(1) if module.__class__.__name__ == "GPT2Model" else None
    )
    try:
        with job_log(tmp_path / "job.log"):
            extract_shard(
                shard,
                tmp_path / "capped.parquet",
                settings_for(tiny_models["gpt2"], max_state_mb=cap_mb, extraction_order="whole_model"),
            )
    finally:
        hook.remove()
    assert len(calls) == n_batches
    assert set(copied) >= {2, 3}  # the host's layers, through the copies
    console = capsys.readouterr().err
    assert f"ctxvar warning: model 'tiny' on {TEST_DEVICE}" in console
    assert "so those of layers 2–3 are kept in host memory" in console and "still one forward pass" in console
    assert "raise max_state_mb if the device has room" in console
    assert "of layers 2–3 in host memory" in (tmp_path / "job.log").read_text()
    extract_shard(shard, tmp_path / "whole.parquet", settings_for(tiny_models["gpt2"], extraction_order="whole_model"))
    assert pq.read_table(tmp_path / "capped.parquet").equals(pq.read_table(tmp_path / "whole.parquet"))


def recording(method, calls: list):
    """``method``, appending each call's index argument to ``calls``."""

    def recorded(self, index):
        calls.append(index)
        return method(self, index)

    return recorded


def test_non_finite_hidden_states_fail_without_writing(tmp_path, tiny_models, corpus_texts):
    from transformers import AutoModel

    model_dir = tmp_path / "overflow"
    shutil.copytree(tiny_models["gpt2"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    model = AutoModel.from_pretrained(model_dir)
    with torch.no_grad():
        model.h[0].mlp.c_fc.weight.mul_(1e38)  # overflows float32 in the first block
    model.save_pretrained(model_dir)
    with pytest.raises(
        StatisticsError, match="NaN or Inf with dtype float32; nothing was written: the model's weights"
    ):
        extract(model_dir, shard_of(tmp_path, corpus_texts[:20]), tmp_path / "p.parquet")
    assert not (tmp_path / "p.parquet").exists()
