"""Model loading (ctxvar.models.loading): Hub ids that cannot be had fail at once with one line that helps; sharded
checkpoints; a final norm at the end of a model is recognised."""

import os
import shutil
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
    with pytest.raises(ModelLoadError, match=f"no config.json in {tmp_path}; save the model there"):
        models.load({"id": "mine"}, str(tmp_path), "float32", torch.device("cpu"))


def test_local_directory_loads_with_requested_dtype(tiny_models):
    tokenizer, model = models.load({"id": "tiny"}, tiny_models["gpt2"], "bfloat16", torch.device("cpu"))
    assert next(model.parameters()).dtype == torch.bfloat16 and not model.training
    assert models.pad_id(tokenizer) == tokenizer.eos_token_id


def test_max_positions_accounts_for_roberta_padding_offset(tiny_models):
    _, model = models.load({"id": "tiny"}, tiny_models["roberta"], "float32", torch.device("cpu"))
    assert models.max_positions(model.config) == 512


def test_a_sharded_checkpoint_loads_as_the_whole_one(tmp_path, tiny_models):
    """Hub checkpoints of large models come as model-0000k-of-0000n.safetensors with an index."""
    source = tiny_models["bert"]
    _, whole = models.load({"id": "tiny"}, source, "float32", torch.device("cpu"))
    sharded = tmp_path / "sharded"
    whole.save_pretrained(sharded, max_shard_size="40KB")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(source, name), sharded)
    assert len(list(sharded.glob("model-0000*-of-0000*.safetensors"))) > 2
    assert (sharded / "model.safetensors.index.json").is_file() and not (sharded / "model.safetensors").exists()
    tokenizer, loaded = models.load({"id": "tiny"}, str(sharded), "float32", torch.device("cpu"))
    inputs = tokenizer(["a b c d"], return_tensors="pt")
    with torch.inference_mode():
        assert torch.equal(loaded(**inputs).last_hidden_state, whole(**inputs).last_hidden_state)


def test_a_damaged_shard_or_index_of_a_sharded_checkpoint_is_named(tmp_path, tiny_models):
    _, whole = models.load({"id": "tiny"}, tiny_models["bert"], "float32", torch.device("cpu"))
    whole.save_pretrained(tmp_path, max_shard_size="40KB")
    second = sorted(tmp_path.glob("model-*.safetensors"))[1]
    data = second.read_bytes()
    second.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match=f"{second.name} is damaged \\(unreadable safetensors"):
        models.load_model({"id": "tiny"}, str(tmp_path), "float32", torch.device("cpu"))
    second.write_bytes(data)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(index.read_text()[:-20])
    with pytest.raises(ModelLoadError, match="model.safetensors.index.json is damaged \\(not valid JSON"):
        models.load_model({"id": "tiny"}, str(tmp_path), "float32", torch.device("cpu"))


def test_loading_initialises_no_weight_it_then_overwrites(tiny_models, monkeypatch):
    """Weights go from the files to the device: random initialisation, if any, runs on meta tensors only."""
    real = []
    for name in ("normal_", "uniform_"):
        original = getattr(torch.Tensor, name)

        def recording(self, *args, _original=original, **kwargs):
            if self.device.type != "meta":
                real.append(tuple(self.shape))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, recording)
    models.load({"id": "tiny"}, tiny_models["bert"], "float32", torch.device("cpu"))
    assert real == []


@pytest.mark.integration
def test_a_pickled_hub_checkpoint_starts_no_safetensors_conversion(tmp_path, tiny_models, monkeypatch, hub_online):
    """A Hub id whose commit holds pytorch_model.bin alone (Pythia's older steps), read online: transformers
    would start its conversion bot (Hub API calls with the user's token, a pull request on the repository) on a
    thread of the job; it is never started, and the variable that stops it is as it was after the load."""
    import huggingface_hub
    import transformers.modeling_utils

    from support.hf_cache import add_snapshot
    from support.tiny_models import DECODERS, pickled, tiny_model

    folder = pickled(tiny_model(tmp_path / "neox", "gpt_neox", tiny_models["gpt2"], 0, **DECODERS["gpt_neox"]))
    add_snapshot(tmp_path / "hub", "org/tiny", "c" * 40, folder, "step1000")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(transformers.modeling_utils, "is_offline_mode", lambda: False)
    monkeypatch.delenv("DISABLE_SAFETENSORS_CONVERSION", raising=False)
    started = []
    monkeypatch.setattr(
        transformers.modeling_utils, "auto_conversion", lambda *a, **k: started.append(k) or (None,) * 3
    )
    entry = {"id": "tiny", "name": "org/tiny", "revision": "step1000"}
    model = models.load_model(entry, "org/tiny", "float32", torch.device("cpu"))
    assert model is not None and started == [] and "DISABLE_SAFETENSORS_CONVERSION" not in os.environ


@pytest.mark.parametrize(
    "config_cls, model_cls, expected",
    [
        ("GPT2Config", "GPT2Model", True),
        ("BertConfig", "BertModel", False),
        ("GPTNeoXConfig", "GPTNeoXModel", True),
        ("LlamaConfig", "LlamaModel", True),
    ],
)
def test_final_norm_is_recognised(config_cls, model_cls, expected):
    import transformers

    sizes = {
        "num_hidden_layers": 1,
        "hidden_size": 8,
        "num_attention_heads": 2,
        "intermediate_size": 8,
        "n_layer": 1,
        "n_embd": 8,
        "n_head": 2,
    }
    model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**sizes))
    assert models.ends_in_final_norm(model) is expected
