"""The embedding matrices read alone from a model's safetensors files: only the files holding them are opened
(and, from the HF cache, only they need be there), the matrices are the whole model's bit for bit, tied and untied
heads alike, what was read is recorded with its hashes, and what cannot be resolved loads the whole model. A
checkpoint saved before safetensors (pytorch_model.bin, or its shards) is unpickled weights-only, giving the numbers
and hashes of the same weights as safetensors; what keeps its matrices from being read alone stops the job in one
line, since no whole model is loaded from a pickle. A pickle
that would run code is refused in one line, and nothing runs."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import safetensors
import torch
from safetensors.torch import load_file

from ctxvar.errors import ModelLoadError
from ctxvar.files.atomic import read_csv
from ctxvar.files.parquet import read_metadata, read_table
from ctxvar.models import embedding_weights
from ctxvar.stats.embedding_matrices import embedding_matrix_statistics, read_matrices, whole_model_matrices

from support.model_files import RunsCode
from support.tiny_models import pickled, tiny_model

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


@pytest.mark.parametrize("index", ["model.safetensors.index.json", "pytorch_model.bin.index.json"])
def test_a_hub_snapshot_needs_only_the_index_and_the_shards_holding_the_matrices(
    tmp_path, tiny_models, monkeypatch, index
):
    """From the HF cache (offline), at the commit the entry resolved: a snapshot holding config.json, the index
    and the shard files of the two matrices, and none of the others, is enough; safetensors or pickled shards."""
    from huggingface_hub import constants

    source = sharded(tmp_path / "neox", tiny_models)
    whole, _ = whole_model_matrices({"id": "m"}, source, "float32")
    if index.startswith("pytorch_model"):
        source = pickled(source)
    weight_map = json.loads((Path(source) / index).read_text())["weight_map"]
    needed = {"config.json", index}
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
    assert_same_matrices(matrices, whole)


def test_a_damaged_pickled_checkpoint_is_refused_in_one_line_naming_it(tmp_path, tiny_models):
    source = sharded(tmp_path / "neox", tiny_models)
    for path in Path(source).glob("model*.safetensors*"):
        path.unlink()
    (Path(source) / "pytorch_model.bin").write_bytes(b"not a pickle")
    message = refusal({"id": "m"}, source)
    assert f"{source}/pytorch_model.bin cannot be read by torch's weights-only unpickler" in message
    assert "restore it" in message and "convert it to safetensors" in message


def refusal(entry: dict, source: str) -> str:
    """The one line the embedding-matrix job stops with."""
    with pytest.raises(ModelLoadError) as error:
        read_matrices(entry, source, "float32")
    assert "\n" not in str(error.value)
    return str(error.value)


@pytest.fixture
def unpickled(monkeypatch) -> list[tuple[str, dict]]:
    """``(file name, options)`` of each ``torch.load`` while the test runs."""
    calls: list[tuple[str, dict]] = []
    real = torch.load

    def recording(path, *args, **kwargs):
        calls.append((Path(path).name, kwargs))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(torch, "load", recording)
    return calls


@pytest.mark.parametrize("layout", ["one file", "shards", "torch's older format"])
def test_a_pickled_checkpoint_gives_the_numbers_and_hashes_of_the_same_weights_as_safetensors(
    tmp_path, tiny_models, unpickled, layout
):
    """A checkpoint saved before safetensors (pytorch_model.bin, or pytorch_model.bin.index.json's shards), run
    through the forward: false job's function: unpickled weights-only, memory-mapped (torch's zip format), only the
    files holding the matrices; the tables are those of the same weights as safetensors, and what was read records
    the same tensors with the same hashes."""
    if layout == "shards":
        saved = sharded(tmp_path / "safetensors", tiny_models)
    else:
        saved = tiny_model(tmp_path / "safetensors", "gpt_neox", tiny_models["gpt2"], 0, head=True, **NEOX)
    source = pickled(shutil.copytree(saved, tmp_path / "pickled"), zip_format=layout != "torch's older format")
    assert not list(Path(source).glob("*.safetensors"))
    tables = {}
    for name, folder in (("safetensors", saved), ("pickled", source)):
        csv, projection = tmp_path / name / "m.csv", tmp_path / name / "p.parquet"
        embedding_matrix_statistics({"id": "m"}, folder, "float32", csv, projection)
        tables[name] = read_csv(csv), read_table(projection), read_metadata(projection)["weights"]
    assert tables["pickled"][0].equals(tables["safetensors"][0])
    assert tables["pickled"][1].equals(tables["safetensors"][1])
    assert list(tables["pickled"][0]["matrix"]) == ["input", "input", "output", "output"]
    record, reference = tables["pickled"][2], tables["safetensors"][2]
    assert record["read"] == "tensors" and record["weights_sha256"] == reference["weights_sha256"]
    for key, entry in record["tensors"].items():
        assert {k: v for k, v in entry.items() if k != "file"} == {
            k: v for k, v in reference["tensors"][key].items() if k != "file"
        }
    if layout == "shards":
        weight_map = json.loads((Path(source) / "pytorch_model.bin.index.json").read_text())["weight_map"]
        holding = {weight_map["gpt_neox.embed_in.weight"], weight_map["embed_out.weight"]}
        assert set(record["files"]) == holding | {"pytorch_model.bin.index.json"}
        assert len(set(weight_map.values())) > len(holding)
    else:
        holding = {"pytorch_model.bin"}
        assert set(record["files"]) == holding
    assert {name for name, _ in unpickled} == holding
    mapped = layout != "torch's older format"
    assert all(
        options == {"map_location": "cpu", "weights_only": True, **({"mmap": True} if mapped else {})}
        for _, options in unpickled
    )


def test_a_pickled_checkpoint_whose_matrices_cannot_be_read_alone_is_loaded_whole_and_refused_there(
    tmp_path, tiny_models
):
    """What stops the read alone is logged, and the whole model, read by transformers with the same weights-only
    unpickler, refuses the matrix of another width in one line naming it."""
    source = pickled(tiny_model(tmp_path / "neox", "gpt_neox", tiny_models["gpt2"], 0, head=True, **NEOX))
    tensors = torch.load(Path(source) / "pytorch_model.bin", weights_only=True)
    tensors["embed_out.weight"] = torch.randn(tensors["embed_out.weight"].shape[0], 7)
    torch.save(tensors, Path(source) / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as error:
        read_matrices({"id": "m"}, source, "float32")
    assert "\n" not in str(error.value) and "have other shapes than config.json says" in str(error.value)


def test_a_pickled_checkpoint_of_custom_code_loads_the_whole_model_with_the_same_matrices(tmp_path, tiny_models):
    """trust_remote_code loads the whole model; transformers reads the pickled file weights-only."""
    source = pickled(tiny_model(tmp_path / "neox", "gpt_neox", tiny_models["gpt2"], 0, head=True, **NEOX))
    matrices, record = read_matrices({"id": "m", "trust_remote_code": True}, source, "float32")
    alone, _ = read_matrices({"id": "m"}, source, "float32")
    assert record["read"] == "model"
    assert_same_matrices(alone, matrices)


def test_a_folder_with_both_pickled_checkpoints_is_refused(tmp_path, tiny_models):
    source = pickled(sharded(tmp_path / "neox", tiny_models))
    shard = json.loads((Path(source) / "pytorch_model.bin.index.json").read_text())["weight_map"]["embed_out.weight"]
    shutil.copy(Path(source) / shard, Path(source) / "pytorch_model.bin")
    assert "holds two checkpoints" in refusal({"id": "m"}, source)


def test_a_missing_pickled_shard_is_refused_naming_it(tmp_path, tiny_models):
    source = pickled(sharded(tmp_path / "neox", tiny_models))
    shard = json.loads((Path(source) / "pytorch_model.bin.index.json").read_text())["weight_map"]["embed_out.weight"]
    (Path(source) / shard).unlink()
    message = refusal({"id": "m"}, source)
    assert f"{shard}, which pytorch_model.bin.index.json maps embed_out.weight to, is not there" in message


def test_a_torch_whose_weights_only_unpickler_is_unsafe_reads_no_pickle(tmp_path, tiny_models, monkeypatch):
    source = pickled(tiny_model(tmp_path / "neox", "gpt_neox", tiny_models["gpt2"], 0, head=True, **NEOX))
    monkeypatch.setattr(torch, "__version__", "2.5.1+cpu")
    message = refusal({"id": "m"}, source)
    assert "torch 2.5.1+cpu's weights-only unpickler is not safe (CVE-2025-32434)" in message


def test_custom_model_code_loads_the_whole_model_with_the_same_matrices(tmp_path, tiny_models, opened, caplog):
    source = sharded(tmp_path / "neox", tiny_models)
    entry = {"id": "m", "trust_remote_code": True}
    with caplog.at_level(logging.INFO, logger="ctxvar.models.embedding_weights"):
        matrices, record = read_matrices(entry, source, "float32")
    assert "trust_remote_code" in caplog.text and record["read"] == "model"
    assert set(opened) >= shard_names(source)
    alone, _ = read_matrices({"id": "m"}, source, "float32")
    assert_same_matrices(alone, matrices)


def test_a_pickle_read_for_the_embedding_matrices_runs_no_code(tmp_path, tiny_models):
    """A forward: false model without safetensors has its pytorch_model.bin unpickled weights-only: a file holding
    an object whose unpickling would run code (here, create a folder; plain pickle does) is refused in one line
    naming what it would import, and nothing runs."""
    from safetensors.torch import load_file

    from ctxvar.stats.embedding_matrices import read_matrices

    model_dir = tmp_path / "pickled"
    shutil.copytree(tiny_models["gpt2"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    tensors = load_file(model_dir / "model.safetensors")
    (model_dir / "model.safetensors").unlink()
    marker = tmp_path / "code-ran"
    torch.save({**tensors, "payload": RunsCode(str(marker))}, model_dir / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as error:
        read_matrices({"id": "m"}, str(model_dir), "float32")
    assert "pytorch_model.bin cannot be read by torch's weights-only unpickler" in str(error.value)
    assert "os.makedirs" in str(error.value) and "\n" not in str(error.value) and not marker.exists()
