"""The weights hash names the weight files a job's model was loaded from, read from the files (never from the
model's tensors): one byte of a weight changes it, a file changed between two shards' jobs stops the merge, and
the files hashed are the ones transformers loaded."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ctxvar.errors import ModelLoadError, StatisticsError
from ctxvar.extraction.extract import extract_shard, prepare_shard
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.files.atomic import MANIFEST
from ctxvar.models import hashing, loading
from ctxvar.stats.merge import MUST_MATCH, merge_partials

from support.pipeline_runs import TEST_DEVICE, shard_of

CPU = torch.device("cpu")


def copy_model(source: str, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(MANIFEST))
    return target


def files_hash(folder: Path, dtype: str = "float32") -> str:
    model = loading.load_model({"id": "m"}, str(folder), dtype, CPU)
    return hashing.weights_sha256(hashing.weight_files({"id": "m"}, str(folder), model))


def flip_weight_byte(path: Path, name: str | None = None) -> str:
    """Flip the lowest bit of the first byte of the tensor ``name`` (default: the file's largest) in place;
    its name."""
    with open(path, "rb") as handle:
        start, tensors = hashing.safetensors_header(handle, str(path))
    name = name or max(tensors, key=lambda n: tensors[n][3] - tensors[n][2])
    with open(path, "r+b") as handle:
        handle.seek(start + tensors[name][2])
        byte = handle.read(1)[0]
        handle.seek(start + tensors[name][2])
        handle.write(bytes([byte ^ 0x01]))
    return name


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_the_hash_is_taken_from_the_files_with_the_model_on_the_meta_device(tmp_path, tiny_models, corpus_texts):
    """A job whose model holds no numbers at all (every tensor on the meta device) still gets its hash: the
    weights are never read back from the model."""
    settings = ExtractionSettings(model={"id": "m"}, source=tiny_models["bert"], device="meta", progress=False)
    job = prepare_shard(shard_of(tmp_path, corpus_texts[:20]), settings)
    assert next(job.model.parameters()).device.type == "meta"
    assert job.weights_hash.result() == files_hash(Path(tiny_models["bert"]))


def test_the_hash_is_the_documented_digest_of_the_file_tensors_in_any_dtype(tiny_models):
    """Per tensor of the file: SHA-256 of its bytes; then SHA-256 of ``name\\tdtype\\tshape\\tdigest`` lines sorted
    by name. The job's dtype does not enter it (MUST_MATCH holds the dtype on its own)."""
    path = Path(tiny_models["gpt2"]) / "model.safetensors"
    with open(path, "rb") as handle:
        start, tensors = hashing.safetensors_header(handle, str(path))
    data = path.read_bytes()
    lines = [
        f"{name}\t{dtype}\t{','.join(map(str, shape))}\t{hashlib.sha256(data[start + b : start + e]).hexdigest()}\n"
        for name, (dtype, shape, b, e) in sorted(tensors.items())
    ]
    expected = hashlib.sha256("".join(lines).encode()).hexdigest()
    assert files_hash(path.parent, "bfloat16") == files_hash(path.parent, "float32") == expected
    assert "dtype" in MUST_MATCH
    fed = hashing.WeightsDigest("model 'm'")  # as a reader that loads tensor by tensor feeds it, in another order
    with safe_open(path, "pt") as weights:
        for name in sorted(weights.keys(), reverse=True):
            fed.add_tensor(name, weights.get_tensor(name), str(path))
    assert fed.hexdigest() == expected


def test_one_weight_byte_changes_the_hash_of_a_single_or_sharded_checkpoint(tmp_path, tiny_models):
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    model = loading.load_model({"id": "m"}, tiny_models["bert"], "float32", CPU)
    model.save_pretrained(single)
    model.save_pretrained(sharded, max_shard_size="40KB")
    shards = sorted(sharded.glob("model-*-of-*.safetensors"))
    assert len(shards) > 2
    before = files_hash(single)
    assert files_hash(sharded) == before, "the same tensors hash the same however the files are cut"
    files = hashing.weight_files({"id": "m"}, str(sharded), model)
    assert {hashing.weights_sha256(files, threads) for threads in (1, 3, 64)} == {before}, "nor by how many threads"
    assert hashing.hash_threads(CPU) == 1  # beside a CPU's forward pass, which has the cores
    assert hashing.hash_threads(torch.device("cuda", 0)) == min(hashing.HASH_THREADS, len(os.sched_getaffinity(0)))
    reference = hashing.WeightsDigest("m")  # one tensor after another, as the streamed reader feeds them
    for path in shards:
        for name, tensor in load_file(path).items():
            reference.add_tensor(name, tensor, str(path))
    assert reference.hexdigest() == before
    flip_weight_byte(single / "model.safetensors")
    flip_weight_byte(shards[1])
    assert files_hash(single) != before and files_hash(sharded) != before


def test_a_bin_beside_the_safetensors_is_neither_loaded_nor_hashed(tmp_path, tiny_models):
    folder = copy_model(tiny_models["bert"], tmp_path / "m")
    before = files_hash(folder)
    tensors = {name: tensor + 1 for name, tensor in load_file(folder / "model.safetensors").items()}
    torch.save(tensors, folder / "pytorch_model.bin")
    model = loading.load_model({"id": "m"}, str(folder), "float32", CPU)
    assert hashing.weight_files({"id": "m"}, str(folder), model).paths == (str(folder / "model.safetensors"),)
    assert files_hash(folder) == before


def test_the_file_config_json_names_is_the_one_hashed(tmp_path, tiny_models):
    """transformers loads the file config.json's ``transformers_weights`` names, not model.safetensors beside it."""
    folder = copy_model(tiny_models["bert"], tmp_path / "m")
    tensors = load_file(folder / "model.safetensors")
    save_file({name: tensor * 2 for name, tensor in tensors.items()}, folder / "other.safetensors", {"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "transformers_weights": "other.safetensors"}))
    model = loading.load_model({"id": "m"}, str(folder), "float32", CPU)
    name = "embeddings.word_embeddings.weight"
    assert torch.equal(model.state_dict()[name], tensors[name] * 2), "transformers loaded other.safetensors"
    files = hashing.weight_files({"id": "m"}, str(folder), model)
    assert list(files.paths) == [str(folder / "other.safetensors")]
    flip_weight_byte(folder / "model.safetensors")
    assert hashing.weights_sha256(hashing.weight_files({"id": "m"}, str(folder), model)) == hashing.weights_sha256(
        files
    )


def test_the_hub_cache_snapshot_of_the_loaded_commit_is_hashed(tmp_path, tiny_models, monkeypatch):
    """A Hub model's files are the HF cache's snapshot (links into its blobs) of the commit it was loaded from."""
    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for file in Path(tiny_models["gpt2"]).iterdir():
        shutil.copy(file, repo / "blobs" / file.name)
        (snapshot / file.name).symlink_to(repo / "blobs" / file.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    model = loading.load_model({"id": "m"}, tiny_models["gpt2"], "float32", CPU)
    files = hashing.weight_files({"id": "m"}, "org/tiny", model)
    assert list(files.paths) == [str(snapshot / "model.safetensors")]
    assert hashing.weights_sha256(files) == files_hash(Path(tiny_models["gpt2"]))


def test_a_tensor_held_twice_with_other_values_is_refused(tmp_path, tiny_models):
    """Where no directory check ran (the HF cache), two files holding one tensor with other values: transformers
    keeps one copy without a word, so the hash refuses."""
    folder = tmp_path / "m"
    model = loading.load_model({"id": "m"}, tiny_models["bert"], "float32", CPU)
    model.save_pretrained(folder, max_shard_size="40KB")
    first, second = sorted(folder.glob("model-*-of-*.safetensors"))[:2]
    moved = load_file(second)
    name = next(iter(load_file(first)))
    save_file({**moved, name: load_file(first)[name] + 1}, second, {"format": "pt"})
    with pytest.raises(
        ModelLoadError,
        match=f"^model 'm' \\({folder}\\): the weight files hold the tensor {name} twice with other values",
    ) as error:
        hashing.weights_sha256(hashing.weight_files({"id": "m"}, str(folder), model))
    one_line(error)


def test_a_file_changed_after_loading_is_refused_not_hashed(tmp_path, tiny_models):
    folder = copy_model(tiny_models["gpt2"], tmp_path / "m")
    model = loading.load_model({"id": "m"}, str(folder), "float32", CPU)
    files = hashing.weight_files({"id": "m"}, str(folder), model)
    flip_weight_byte(folder / "model.safetensors")
    with pytest.raises(
        ModelLoadError,
        match=f"^model 'm' \\({folder}\\): {folder}/model.safetensors was replaced or written to after the job",
    ) as error:
        hashing.weights_sha256(files)
    one_line(error)


def test_files_that_cannot_hold_the_model_are_refused(tiny_models):
    """A backstop for a file choice that differs from transformers': the files must hold at least the model's
    numbers."""
    models = {arch: loading.load_model({"id": "m"}, tiny_models[arch], "float32", CPU) for arch in ("bert", "gpt2")}
    smaller, bigger = sorted(models, key=lambda arch: sum(p.numel() for p in models[arch].parameters()))
    with pytest.raises(ModelLoadError, match="fewer than the .* of the model loaded from them") as error:
        hashing.weight_files({"id": "m"}, tiny_models[smaller], models[bigger])
    one_line(error)


def test_the_merge_refuses_shards_run_before_and_after_a_file_was_edited_in_place(tmp_path, tiny_models, corpus_texts):
    folder = copy_model(tiny_models["gpt2"], tmp_path / "m")
    settings = ExtractionSettings(model={"id": "m"}, source=str(folder), device=TEST_DEVICE, progress=False)
    shards = [shard_of(tmp_path, corpus_texts[i::2][:20], f"shard{i}.parquet") for i in range(2)]
    extract_shard(shards[0], tmp_path / "p0.parquet", settings)
    status = os.stat(folder / "model.safetensors")
    flip_weight_byte(folder / "model.safetensors")
    os.utime(folder / "model.safetensors", ns=(status.st_atime_ns, status.st_mtime_ns))  # size and mtime kept
    extract_shard(shards[1], tmp_path / "p1.parquet", settings)
    with pytest.raises(StatisticsError, match="p1.parquet differs from .*p0.parquet in weights_sha256") as error:
        merge_partials([tmp_path / f"p{i}.parquet" for i in range(2)], tmp_path / "s.parquet", tmp_path / "t.parquet")
    one_line(error)


def test_a_transformers_without_extra_weight_files_hashes_the_same(tmp_path, tiny_models, monkeypatch):
    """Configs name weight files beyond the checkpoint (``extra_files``) only in newer transformers; on an older
    one (a GPU workstation's), the hash is taken from the checkpoint alone, the same as here."""
    from transformers import PretrainedConfig

    model = loading.load_model({"id": "m"}, tiny_models["bert"], "float32", CPU)  # this transformers needs them
    before = hashing.weights_sha256(hashing.weight_files({"id": "m"}, tiny_models["bert"], model))
    monkeypatch.delattr(PretrainedConfig, "extra_files")
    assert hashing.weights_sha256(hashing.weight_files({"id": "m"}, tiny_models["bert"], model)) == before
