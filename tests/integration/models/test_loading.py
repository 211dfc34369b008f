"""Loading a model directory as a user has it (ctxvar.models.loading): an encoder-decoder is refused; a
pickled checkpoint is read weights-only, giving the sums and weight hash of its safetensors twin, and one that
would run code is refused; custom code runs only with ``trust_remote_code``, and custom tokenizer code left unrun
is warned of."""

from __future__ import annotations

import json
import logging
import shutil

import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoTokenizer

from ctxvar.errors import ModelLoadError
from ctxvar.models.loading import load_tokenizer

from support.model_files import RunsCode, user_copy
from support.pipeline_runs import extract, shard_of


def test_encoder_decoder_model_is_refused(tmp_path, tiny_models, corpus_texts):
    from transformers import T5Config, T5Model

    model_dir = tmp_path / "t5"
    T5Model(T5Config(vocab_size=300, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2)).save_pretrained(model_dir)
    AutoTokenizer.from_pretrained(tiny_models["bert"]).save_pretrained(model_dir)
    with pytest.raises(ModelLoadError, match="is an encoder-decoder"):
        extract(model_dir, shard_of(tmp_path, corpus_texts[:5]), tmp_path / "p.parquet")


def test_pickled_weights_are_read_weights_only_and_a_pickle_that_runs_code_is_refused(
    tmp_path, tiny_models, corpus_texts
):
    """A checkpoint saved before safetensors (pytorch_model.bin alone) is read as transformers reads it, by torch's
    weights-only unpickler: its sums and weight hash are those of the same weights in safetensors. A file holding an
    object whose unpickling would run code (create a folder) stops the job in one line, and nothing runs."""
    from safetensors.torch import load_file

    shard = shard_of(tmp_path, corpus_texts[:5])
    whole = extract(tiny_models["bert"], shard, tmp_path / "safetensors.parquet")
    model_dir = tmp_path / "pickled"
    shutil.copytree(tiny_models["bert"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    tensors = load_file(model_dir / "model.safetensors")
    (model_dir / "model.safetensors").unlink()
    torch.save(tensors, model_dir / "pytorch_model.bin")
    pickled = extract(model_dir, shard, tmp_path / "pickled.parquet")
    assert pickled["weights_sha256"] == whole["weights_sha256"]
    assert pq.read_table(tmp_path / "pickled.parquet").equals(pq.read_table(tmp_path / "safetensors.parquet"))
    marker = tmp_path / "code-ran"
    torch.save({**tensors, "payload": RunsCode(str(marker))}, model_dir / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as error:
        extract(model_dir, shard, tmp_path / "p.parquet")
    assert "\n" not in str(error.value) and "weights-only" in str(error.value) and not marker.exists()


def test_remote_code_does_not_run_unless_the_config_allows_it(tmp_path, tiny_models, corpus_texts):
    model_dir = tmp_path / "custom"
    shutil.copytree(tiny_models["bert"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    marker = tmp_path / "code-ran"
    (model_dir / "custom_model.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom transformers import BertModel\nclass CustomModel(BertModel):\n "
        "   pass\n"
    )
    config = json.loads((model_dir / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "custom_model.CustomModel"}
    (model_dir / "config.json").write_text(json.dumps(config))
    shard = shard_of(tmp_path, corpus_texts[:5])
    extract(model_dir, shard, tmp_path / "p.parquet")  # falls back to the built-in BertModel
    assert not marker.exists()
    extract(model_dir, shard, tmp_path / "p.parquet", entry={"id": "m", "trust_remote_code": True})
    assert marker.exists()


def test_custom_tokenizer_code_without_trust_remote_code_warns_of_the_fallback(tmp_path, tiny_models, caplog):
    model_dir = user_copy(tiny_models, tmp_path)
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    config["auto_map"] = {"AutoTokenizer": [None, "custom.CustomTokenizerFast"]}
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING):
        load_tokenizer({"id": "m"}, str(model_dir))
    assert "tokenizer_config.json names custom code" in caplog.text and "trust_remote_code: true" in caplog.text
