"""Model loading: Hub ids that cannot be had fail at once with one line that helps."""

import time

import pytest
import torch

from ctxvar.errors import ModelLoadError
from ctxvar.models import loading as models

ENTRY = {"id": "bert-base-uncased", "name": "bert-base-uncased"}


def test_uncached_model_offline_fails_fast_naming_model_and_demo(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(ModelLoadError) as error:
        models.load(ENTRY, "bert-base-uncased", "float32", torch.device("cpu"))
    message = str(error.value)
    assert "'bert-base-uncased'" in message and "HF_HUB_OFFLINE" in message and "config/demo.yaml" in message
    assert "\n" not in message and time.monotonic() - start < 20


def test_unreachable_hub_fails_fast(monkeypatch, hub_online):
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")  # discard port: refused
    start = time.monotonic()
    with pytest.raises(ModelLoadError, match="cannot be reached.*config/demo.yaml"):
        models.load(ENTRY, "bert-base-uncased", "float32", torch.device("cpu"))
    assert time.monotonic() - start < 20


def test_local_directory_without_weights_is_named(tmp_path):
    with pytest.raises(ModelLoadError, match="directory has no loadable"):
        models.load({"id": "mine"}, str(tmp_path), "float32", torch.device("cpu"))


def test_local_directory_loads_with_requested_dtype(tiny_models):
    tokenizer, model = models.load({"id": "tiny"}, tiny_models["gpt2"], "bfloat16", torch.device("cpu"))
    assert next(model.parameters()).dtype == torch.bfloat16 and not model.training
    assert models.pad_id(tokenizer) == tokenizer.eos_token_id


def test_max_positions_accounts_for_roberta_padding_offset(tiny_models):
    _, model = models.load({"id": "tiny"}, tiny_models["roberta"], "float32", torch.device("cpu"))
    assert models.max_positions(model.config) == 512


def test_weights_hash_changes_with_any_weight(tiny_models):
    _, model = models.load({"id": "tiny"}, tiny_models["bert"], "float32", torch.device("cpu"))
    before = models.weights_sha256(model)
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] += 1e-3
    assert models.weights_sha256(model) != before
