"""The model a job runs is the model the user named, whole: checkpoints saved with heads and without a pooler
run in any number of shards; incomplete, ambiguous or mismatched model folders are refused with one line.

Each model folder here is a copy of a tiny random-init model (randomised LayerNorms), damaged or re-saved the
way real checkpoints are.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

from ctxvar.errors import ModelLoadError
from ctxvar.files.atomic import MANIFEST
from ctxvar.models import hashing, loading
from ctxvar.models.completeness import own_tensor_names, structure
from ctxvar.models.files import directory_fingerprint
from ctxvar.run.job_log import job_log

from support.pipeline_runs import TEST_DEVICE, run_pipeline

CPU = torch.device("cpu")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # what save_pretrained writes for the tiny models


def one_line_error(model_dir: Path, match: str, load=loading.load) -> str:
    with pytest.raises(ModelLoadError, match=match) as error:
        load({"id": "m"}, str(model_dir), "float32", CPU)
    message = str(error.value)
    assert "\n" not in message and "look at the above report" not in message, message
    return message


def copy_model(source: str, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(MANIFEST))
    return target


def weights_hash(folder: Path, model) -> str:
    return hashing.weights_sha256(hashing.weight_files({"id": "m"}, str(folder), model))


def head_checkpoint(tiny_models, arch: str, target: Path) -> Path:
    """The tiny model re-saved as its masked-LM class saves it (the Hub's bert-base-uncased and roberta-base):
    tensors under ``bert.``/``roberta.``, a ``cls.*``/``lm_head.*`` head, and no pooler."""
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(tiny_models[arch])
    model.save_pretrained(target)
    for name in TOKENIZER_FILES:
        shutil.copy(Path(tiny_models[arch]) / name, target / name)
    saved = load_file(target / "model.safetensors")
    assert not any("pooler" in key for key in saved) and any(key.startswith(("cls.", "lm_head.")) for key in saved)
    return target


def without_tensor(model_dir: Path, name: str) -> None:
    weights = load_file(model_dir / "model.safetensors")
    del weights[name]
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})


def sharded(tiny_models, target: Path) -> Path:
    """The tiny BERT saved in several safetensors files with their index."""
    _, model = loading.load({"id": "m"}, tiny_models["bert"], "float32", CPU)
    model.save_pretrained(target, max_shard_size="40KB")
    for name in TOKENIZER_FILES:
        shutil.copy(Path(tiny_models["bert"]) / name, target / name)
    assert len(list(target.glob("model-*.safetensors"))) >= 3
    return target


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_a_head_checkpoint_without_pooler_over_3_shards_equals_the_base_model(
    tmp_path, tiny_models, corpus_texts, arch
):
    checkpoint = head_checkpoint(tiny_models, arch, tmp_path / "masked-lm")
    base_tokens, _, base_stats = run_pipeline(tmp_path / "base", tiny_models[arch], corpus_texts, 3, "m")
    head_tokens, _, head_stats = run_pipeline(tmp_path / "head", checkpoint, corpus_texts, 3, "m")
    pd.testing.assert_frame_equal(head_tokens, base_tokens, check_exact=TEST_DEVICE == "cpu", rtol=1e-12)
    assert pd.read_parquet(head_stats).equals(pd.read_parquet(base_stats)) or TEST_DEVICE != "cpu"


def test_the_weights_hash_covers_the_pooler_it_does_not_build_too(tmp_path, tiny_models):
    """The hash is of every tensor in the files loaded, those that do not feed the hidden states included: the
    pooler ctxvar does not build changes it as a layer's weight does."""
    folder = copy_model(tiny_models["bert"], tmp_path / "m")
    model = loading.load_model({"id": "m"}, str(folder), "float32", CPU)
    assert not hasattr(model, "pooler") or model.pooler is None
    hashes = []
    for name in (None, "pooler.dense.weight", "encoder.layer.0.output.LayerNorm.weight"):
        if name:
            tensors = load_file(folder / "model.safetensors")
            save_file({**tensors, name: tensors[name] + 1}, folder / "model.safetensors", {"format": "pt"})
        hashes.append(weights_hash(folder, model))
    assert len(set(hashes)) == 3


@pytest.mark.parametrize(
    "setting, value", [("layer_norm_eps", 1e-3), ("hidden_act", "relu"), ("num_attention_heads", 4)]
)
def test_a_config_setting_that_no_tensor_shows_changes_the_config_hash(tmp_path, tiny_models, setting, value):
    """The same tensors under another config.json give other hidden states, which weights_sha256 cannot see;
    model_config_sha256 (in merge.MUST_MATCH, so partials of the two refuse to merge) does. Where the model sits
    does not count."""
    first, second = (copy_model(tiny_models["bert"], tmp_path / name) for name in ("a", "b"))
    hashes = {}
    for folder in (first, second):
        _, model = loading.load({"id": "m"}, str(folder), "float32", CPU)
        hashes[folder] = (weights_hash(folder, model), hashing.model_config_sha256(model.config))
    assert hashes[first] == hashes[second]
    config = json.loads((second / "config.json").read_text())
    config[setting] = value
    (second / "config.json").write_text(json.dumps(config))
    _, model = loading.load({"id": "m"}, str(second), "float32", CPU)
    assert weights_hash(second, model) == hashes[first][0]
    assert hashing.model_config_sha256(model.config) != hashes[first][1]


def test_no_pooler_is_built_where_the_class_allows(tmp_path, tiny_models):
    _, model = loading.load({"id": "m"}, str(head_checkpoint(tiny_models, "bert", tmp_path / "m")), "float32", CPU)
    assert model.pooler is None and not any(name.startswith("pooler") for name, _ in model.named_parameters())


def test_a_missing_layer_norm_weight_is_refused_by_name(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    without_tensor(model_dir, "encoder.layer.1.output.LayerNorm.weight")
    message = one_line_error(model_dir, "1 tensor\\(s\\) of the model are not in its weight files")
    assert "encoder.layer.1.output.LayerNorm.weight" in message and "restore the files" in message


def test_a_missing_tensor_of_a_head_checkpoint_is_refused(tmp_path, tiny_models):
    model_dir = head_checkpoint(tiny_models, "roberta", tmp_path / "m")
    without_tensor(model_dir, "roberta.encoder.layer.0.attention.self.query.bias")
    one_line_error(model_dir, "encoder.layer.0.attention.self.query.bias")


@pytest.mark.parametrize(
    "layers, match", [(2, "holds 6 tensor\\(s\\)|of layers config.json does not build"), (4, "not in its weight files")]
)
def test_config_with_other_layer_counts_than_the_weights_is_refused(tmp_path, tiny_models, layers, match):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    config = json.loads((model_dir / "config.json").read_text())
    assert config["num_hidden_layers"] == 3
    (model_dir / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers}))
    message = one_line_error(model_dir, match)
    assert ("encoder.layer.2." if layers == 2 else "encoder.layer.3.") in message


def test_config_with_other_shapes_than_the_weights_is_refused_with_the_shapes(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["gpt2"], tmp_path / "m")
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, "n_inner": config["n_inner"] * 2}))
    message = one_line_error(model_dir, "have other shapes than config.json says")
    assert "mlp.c_fc.weight (32, 64) in the files, (32, 128) in config.json" in message


def test_a_shard_file_lacking_a_tensor_is_refused(tmp_path, tiny_models):
    model_dir = sharded(tiny_models, tmp_path / "m")
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    name, file = next((n, f) for n, f in index["weight_map"].items() if n.endswith(".bias") and "encoder" in n)
    shard = load_file(model_dir / file)
    del shard[name]
    save_file(shard, model_dir / file, metadata={"format": "pt"})
    assert name in one_line_error(model_dir, "not in its weight files")


def test_an_index_that_leaves_out_a_shard_files_tensors_is_refused(tmp_path, tiny_models):
    model_dir = sharded(tiny_models, tmp_path / "m")
    path = model_dir / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    dropped = sorted(set(index["weight_map"].values()))[1]
    index["weight_map"] = {n: f for n, f in index["weight_map"].items() if f != dropped}
    path.write_text(json.dumps(index))
    one_line_error(model_dir, "tensor\\(s\\) of the model are not in its weight files")


def test_a_missing_shard_file_is_named(tmp_path, tiny_models):
    model_dir = sharded(tiny_models, tmp_path / "m")
    missing = sorted(model_dir.glob("model-*.safetensors"))[1]
    missing.unlink()
    message = one_line_error(model_dir, "weight file\\(s\\) that .*model.safetensors.index.json lists are missing")
    assert missing.name in message and "trust_remote_code" not in message


def test_a_single_file_beside_a_sharded_checkpoint_is_refused_naming_both(tmp_path, tiny_models):
    model_dir = sharded(tiny_models, tmp_path / "m")
    shutil.copy(Path(tiny_models["roberta"]) / "model.safetensors", model_dir / "model.safetensors")
    message = one_line_error(model_dir, "holds two checkpoints")
    assert str(model_dir / "model.safetensors") in message and "model.safetensors.index.json" in message


def test_no_weights_at_all_says_so(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    (model_dir / "model.safetensors").unlink()
    assert "trust_remote_code" not in one_line_error(model_dir, "no safetensors weights in")


def test_pickled_weights_alone_with_an_unsafe_torch_are_named_with_the_remedies(tmp_path, tiny_models, monkeypatch):
    """A torch older than 2.6, whose weights-only unpickler can be made to run code, reads no pickle."""
    from ctxvar.models import hashing

    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    (model_dir / "model.safetensors").unlink()
    torch.save({}, model_dir / "pytorch_model.bin")
    monkeypatch.setattr(hashing, "weights_only_is_safe", lambda: False)
    one_line_error(model_dir, "it has pytorch_model.bin, pickled weights, .* upgrade torch to 2.6 or later, or convert")


def test_no_tokenizer_files_is_one_line(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    for name in TOKENIZER_FILES:
        (model_dir / name).unlink()
    (model_dir / "config.json").write_text(  # BertTokenizer, as for a Hub BERT folder
        json.dumps({**json.loads((model_dir / "config.json").read_text()), "tokenizer_class": "BertTokenizer"})
    )
    one_line_error(model_dir, "no tokenizer files \\(BertTokenizer reads tokenizer.json or vocab.txt\\)")


def test_a_tokenizer_with_ids_past_the_embedding_is_refused(tmp_path, tiny_models):
    from transformers import AutoTokenizer

    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.add_tokens([f"extra{i}" for i in range(20)])
    tokenizer.save_pretrained(model_dir)
    one_line_error(model_dir, "the tokenizer has ids up to 319, but the model's embedding has 300 rows")


def test_a_tokenizer_far_smaller_than_the_embedding_is_refused(tmp_path, tiny_models):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    vocab = {piece: i for i, piece in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefghij"])}
    core = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]").save_pretrained(model_dir)
    one_line_error(model_dir, "the tokenizer has 14 entries for the model's 300 embedding rows")


def test_the_job_log_gets_the_whole_loading_report_and_the_console_none(tmp_path, tiny_models, capfd):
    model_dir = head_checkpoint(tiny_models, "roberta", tmp_path / "m")
    capfd.readouterr()  # building the checkpoint has its own loading report; only the job's console counts
    log_path = tmp_path / "job.log"
    with job_log(log_path):
        loading.load({"id": "m"}, str(model_dir), "float32", CPU)
    console = capfd.readouterr()
    assert "LOAD REPORT" not in console.err + console.out and "lm_head" not in console.err
    text = log_path.read_text()
    assert "5 unexpected keys:" in text and "lm_head.layer_norm.weight" in text and "0 missing keys" in text
    assert "transformers.modeling_utils: " in text and "LOAD REPORT" in text  # transformers' own table too
    logging.getLogger().handlers.clear()


def test_unexpected_tensors_are_the_models_own_only_when_shaped_like_them(tiny_models):
    _, model = loading.load({"id": "m"}, tiny_models["bert"], "float32", CPU)
    assert structure("encoder.layer.12.output.dense.weight") == "encoder.layer.*.output.dense.weight"
    names = ["bert.encoder.layer.7.output.dense.weight", "cls.predictions.bias", "pooler.dense.weight"]
    assert own_tensor_names(model, names) == ["bert.encoder.layer.7.output.dense.weight"]


def test_the_fingerprint_follows_every_change_of_a_file(tmp_path, tiny_models):
    import os

    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    weights = model_dir / "model.safetensors"
    before = directory_fingerprint(str(model_dir))
    assert directory_fingerprint(str(model_dir)) == before and directory_fingerprint(str(tmp_path / "no")) is None
    status = weights.stat()
    weights.write_bytes(weights.read_bytes())  # same bytes, rewritten in place, mtime put back as cp -p does
    os.utime(weights, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert directory_fingerprint(str(model_dir)) != before
    (model_dir / ".git").mkdir()
    (model_dir / ".git" / "index").write_text("x")
    after = directory_fingerprint(str(model_dir))
    (model_dir / ".git" / "index").write_text("y")
    assert directory_fingerprint(str(model_dir)) == after


def test_no_config_json_is_named(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    (model_dir / "config.json").unlink()
    assert "trust_remote_code" not in one_line_error(model_dir, f"no config.json in {model_dir}; save the model")


def test_a_config_that_is_json_but_not_an_object_is_named(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    (model_dir / "config.json").write_text("[]")
    one_line_error(model_dir, "config.json is damaged \\(a JSON list, not an object\\)")


@pytest.mark.parametrize("same_values", [True, False])
def test_a_tensor_in_two_shard_files_is_refused_when_the_copies_differ(tmp_path, tiny_models, same_values):
    model_dir = sharded(tiny_models, tmp_path / "m")
    first, second = sorted(model_dir.glob("model-*.safetensors"))[:2]
    held, other = load_file(first), load_file(second)
    name = next(iter(held))
    other[name] = held[name].clone() if same_values else held[name] * 2  # transformers would load this copy
    save_file(other, second, metadata={"format": "pt"})
    if same_values:
        loading.load({"id": "m"}, str(model_dir), "float32", CPU)
    else:
        message = one_line_error(model_dir, "1 tensor\\(s\\) are in more than one weight file .* with other values")
        assert f"{name} ({first.name}, {second.name})" in message


def test_shard_files_without_their_index_are_named(tmp_path, tiny_models):
    model_dir = sharded(tiny_models, tmp_path / "m")
    (model_dir / "model.safetensors.index.json").unlink()
    message = one_line_error(model_dir, "holds the shard files of a sharded checkpoint .* but not their index")
    assert "trust_remote_code" not in message


@pytest.mark.parametrize("index", [{"metadata": {}}, [], {"weight_map": ["model-00001-of-00005.safetensors"]}])
def test_an_index_without_a_weight_map_is_named_damaged(tmp_path, tiny_models, index):
    model_dir = sharded(tiny_models, tmp_path / "m")
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    one_line_error(model_dir, "model.safetensors.index.json is damaged \\(its weight_map is not an object")


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "model.safetensors"])
def test_a_link_to_a_missing_file_is_named(tmp_path, tiny_models, name):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")  # a Hub cache snapshot whose blob is gone
    (model_dir / name).unlink()
    (model_dir / name).symlink_to(tmp_path / "blobs" / "gone")
    one_line_error(model_dir, f"{name} is damaged \\(a link to .*gone, which does not exist\\)")


def test_a_tokenizer_config_without_a_vocabulary_is_one_line(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    (model_dir / "tokenizer.json").unlink()
    message = one_line_error(model_dir, "no tokenizer vocabulary in .* save the model's tokenizer with it")
    assert "trust_remote_code" not in message


def test_a_tokenizer_json_that_tokenizers_cannot_read_is_named(tmp_path, tiny_models):
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    (model_dir / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "Nope"}}))
    one_line_error(model_dir, "tokenizer.json is damaged \\(not a tokenizers file")


def test_weights_holding_nan_in_float32_are_not_blamed_on_the_dtype(tmp_path, tiny_models, corpus_texts):
    from ctxvar.errors import StatisticsError

    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    weights = load_file(model_dir / "model.safetensors")
    weights["encoder.layer.0.output.LayerNorm.weight"] = torch.full((32,), float("nan"))
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        StatisticsError,
        match="with dtype float32; .* the model's weights hold NaN or Inf, or values that overflow float32",
    ) as error:
        run_pipeline(tmp_path / "run", model_dir, corpus_texts[:20], 1, "m")
    assert "use dtype: float32" not in str(error.value)


@pytest.mark.parametrize(
    "change, remedy",
    [
        ({"model_type": None}, "its config.json names no model_type: save the model there with save_pretrained"),
        ({"model_type": "blorp"}, "does not know model_type 'blorp': upgrade transformers, or set trust_remote_code"),
        ({"num_attention_heads": 3}, "a value in its config.json is wrong (the error above names it)"),
        (
            {"model_type": "blorp", "auto_map": {"AutoModel": "modeling_x.XModel"}},
            "names custom code, which runs only with trust_remote_code",
        ),
    ],
)
def test_a_config_json_transformers_cannot_build_from_gets_the_remedy_it_needs(tmp_path, tiny_models, change, remedy):
    """Not every model that fails to build needs trust_remote_code: the line's remedy follows what config.json
    says."""
    model_dir = copy_model(tiny_models["bert"], tmp_path / "m")
    config = json.loads((model_dir / "config.json").read_text())
    config.update(change)
    (model_dir / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    message = one_line_error(model_dir, "has no loadable")
    assert message.endswith(remedy) or remedy in message, message


def test_an_index_naming_a_weight_file_outside_the_folder_is_refused(tmp_path, tiny_models):
    """The folder's fingerprint (what re-runs a changed model) covers the folder only."""
    model_dir = sharded(tiny_models, tmp_path / "m")
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    first = sorted(set(index["weight_map"].values()))[0]
    shutil.move(model_dir / first, tmp_path / first)
    index["weight_map"] = {k: f"../{first}" if v == first else v for k, v in index["weight_map"].items()}
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    one_line_error(model_dir, f"names weight files outside the directory \\(\\.\\./{first}\\)")
