"""The embedding matrices read alone from a model's safetensors files: only the files holding them are opened
(and, from the HF cache, only they need be there), the matrices are the whole model's bit for bit, tied and untied
heads alike, what was read is recorded with its hashes, and what cannot be resolved loads the whole model."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import safetensors
from safetensors.torch import load_file

from ctxvar.files.atomic import read_csv
from ctxvar.files.parquet import read_table
from ctxvar.models import embedding_weights
from ctxvar.stats.embedding_matrices import embedding_matrix_statistics, read_matrices, whole_model_matrices

from support.tiny_models import tiny_model

pytestmark = pytest.mark.integration

SHARD_SIZE = "20KB"  # small enough that the tiny models below are saved in several shard files
NEOX = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The files ``safetensors.safe_open`` opens while the test runs (the readers of weights import it at call
    time)."""
    paths: list[str] = []
    real = safetensors.safe_open

    def counting(path, *args, **kwargs):
        paths.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(safetensors, "safe_open", counting)
    return paths


def sharded(folder, tiny_models, family: str = "gpt_neox", **sizes) -> str:
    """A tiny random-init causal LM of ``family`` saved in several shard files with their index."""
    source = tiny_model(folder, family, tiny_models["gpt2"], 0, head=True, shard_size=SHARD_SIZE, **(sizes or NEOX))
    assert len(shard_names(source)) >= 3
    return source


def shard_names(source) -> set[str]:
    return set(json.loads((Path(source) / "model.safetensors.index.json").read_text())["weight_map"].values())


def assert_same_matrices(read: dict, whole: dict) -> None:
    assert list(read) == list(whole)
    for name in whole:
        assert read[name].dtype == whole[name].dtype == np.float64
        assert np.array_equal(read[name], whole[name]), name


def test_an_untied_sharded_model_opens_only_the_files_holding_its_matrices(tmp_path, tiny_models, opened):
    source = sharded(tmp_path / "neox", tiny_models)
    weight_map = json.loads((Path(source) / "model.safetensors.index.json").read_text())["weight_map"]
    holding = {weight_map["gpt_neox.embed_in.weight"], weight_map["embed_out.weight"]}
    matrices, record = read_matrices({"id": "m"}, source, "float32")
    assert set(opened) == holding and holding < shard_names(source)
    assert list(matrices) == ["input", "output"] and record["read"] == "tensors"
    assert set(record["files"]) == holding | {"model.safetensors.index.json"}
    stored = {key: load_file(Path(source) / weight_map[key])[key] for key in weight_map if "emb" in key}
    assert set(record["tensors"]) == set(stored) == {"gpt_neox.embed_in.weight", "embed_out.weight"}
    for key, tensor in stored.items():
        entry = record["tensors"][key]
        assert (entry["file"], entry["dtype"], entry["shape"]) == (
            weight_map[key],
            "F32",
            ",".join(map(str, tensor.shape)),
        )
    opened.clear()
    whole, whole_record = whole_model_matrices({"id": "m"}, source, "float32")
    assert set(opened) >= shard_names(source) and whole_record["read"] == "model"
    assert_same_matrices(matrices, whole)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_tied_sharded_model_reads_its_one_matrix_as_the_whole_model_holds_it(tmp_path, tiny_models, opened, dtype):
    sizes = dict(n_embd=32, n_layer=2, n_head=2)  # GPT-2 ties its output matrix to its input matrix
    source = sharded(tmp_path / "gpt2", tiny_models, "gpt2", **sizes)
    weight_map = json.loads((Path(source) / "model.safetensors.index.json").read_text())["weight_map"]
    matrices, record = read_matrices({"id": "m"}, source, dtype)
    assert list(matrices) == ["tied"] and list(record["tensors"]) == ["transformer.wte.weight"]
    assert set(opened) == {weight_map["transformer.wte.weight"]}
    whole, _ = whole_model_matrices({"id": "m"}, source, dtype)
    assert_same_matrices(matrices, whole)


def test_the_tables_written_from_the_matrices_alone_are_the_whole_models(tmp_path, tiny_models, monkeypatch):
    source = sharded(tmp_path / "neox", tiny_models)
    alone, whole = tmp_path / "alone", tmp_path / "whole"
    embedding_matrix_statistics({"id": "m"}, source, "float32", alone / "m.csv", alone / "p.parquet")
    monkeypatch.setattr(embedding_weights, "read_matrices", refuse)
    embedding_matrix_statistics({"id": "m"}, source, "float32", whole / "m.csv", whole / "p.parquet")
    assert read_csv(alone / "m.csv").equals(read_csv(whole / "m.csv"))
    assert read_table(alone / "p.parquet").equals(read_table(whole / "p.parquet"))


def refuse(*args):
    raise embedding_weights.Unresolved("refused by the test")


def test_what_was_read_follows_the_bytes_of_the_matrices(tmp_path, tiny_models):
    source = sharded(tmp_path / "neox", tiny_models)
    _, before = read_matrices({"id": "m"}, source, "float32")
    weight_map = json.loads((Path(source) / "model.safetensors.index.json").read_text())["weight_map"]
    path = Path(source) / weight_map["embed_out.weight"]
    tensors = load_file(path)
    tensors["embed_out.weight"][3, 5] += 1
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    _, after = read_matrices({"id": "m"}, source, "float32")
    assert after["tensors"]["gpt_neox.embed_in.weight"] == before["tensors"]["gpt_neox.embed_in.weight"]
    assert after["tensors"]["embed_out.weight"]["sha256"] != before["tensors"]["embed_out.weight"]["sha256"]
    assert after["weights_sha256"] != before["weights_sha256"]


def test_a_hub_snapshot_needs_only_the_index_and_the_shards_holding_the_matrices(tmp_path, tiny_models, monkeypatch):
    """From the HF cache (offline), at the commit the entry resolved: a snapshot holding config.json, the index
    and the shard files of the two matrices, and none of the others, is enough."""
    from huggingface_hub import constants

    source = sharded(tmp_path / "neox", tiny_models)
    weight_map = json.loads((Path(source) / "model.safetensors.index.json").read_text())["weight_map"]
    needed = {"config.json", "model.safetensors.index.json"}
    needed |= {weight_map["gpt_neox.embed_in.weight"], weight_map["embed_out.weight"]}
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / commit).mkdir(parents=True)
    for name in needed:
        shutil.copy(Path(source) / name, repo / "blobs" / name)
        (repo / "snapshots" / commit / name).symlink_to(repo / "blobs" / name)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    entry = {"id": "m", "name": "org/tiny", "inputs": {"commit": commit}}
    matrices, record = read_matrices(entry, "org/tiny", "float32")
    assert record["commit"] == commit and set(record["files"]) == needed - {"config.json"}
    whole, _ = whole_model_matrices({"id": "m"}, source, "float32")
    assert_same_matrices(matrices, whole)


def test_pickled_weights_alone_load_the_whole_model_and_say_so(tmp_path, tiny_models, caplog):
    source = sharded(tmp_path / "neox", tiny_models)
    for path in Path(source).glob("model*.safetensors*"):
        path.unlink()
    (Path(source) / "pytorch_model.bin").write_bytes(b"not read")
    with caplog.at_level(logging.INFO, logger="ctxvar.models.embedding_weights"):
        with pytest.raises(embedding_weights.Unresolved):
            embedding_weights.read_embedding_weights({"id": "m"}, source, "float32")
    assert "neither model.safetensors nor model.safetensors.index.json" in caplog.text
    assert "the whole model is loaded" in caplog.text


def test_custom_model_code_loads_the_whole_model_with_the_same_matrices(tmp_path, tiny_models, opened, caplog):
    source = sharded(tmp_path / "neox", tiny_models)
    entry = {"id": "m", "trust_remote_code": True}
    with caplog.at_level(logging.INFO, logger="ctxvar.models.embedding_weights"):
        matrices, record = read_matrices(entry, source, "float32")
    assert "trust_remote_code" in caplog.text and record["read"] == "model"
    assert set(opened) >= shard_names(source)
    alone, _ = read_matrices({"id": "m"}, source, "float32")
    assert_same_matrices(alone, matrices)
