"""The embedding-matrix job reads transformers' loading report: an output matrix that is not the files' own (of
another width, so initialised at random, or missing from files that name a head) is refused in one line
naming the tensor and its shapes, never measured. An output matrix of another row count than the vocabulary (a head
padded to a multiple of 64) is the files' own: read alone, it is measured as the files hold it, every row, and
said so; where only the whole model could be loaded, which cannot hold it, it is refused with both shapes and why."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from ctxvar.errors import ModelLoadError
from ctxvar.files.atomic import read_csv
from ctxvar.files.parquet import read_metadata, read_table
from ctxvar.models import embedding_weights
from ctxvar.stats.embedding_matrices import embedding_matrix_statistics

from support.embedding_matrix_reference import check_table, reference_rows
from support.tiny_models import pickled, untied_gpt2

pytestmark = pytest.mark.integration

VOCABULARY, PADDED, DIM = 300, 320, 16  # the tiny GPT-2's vocabulary, padded to a multiple of 64


def rewrite_weights(source: str, change) -> None:
    """``change(tensors)`` applied to the saved model's one safetensors file, in place."""
    path = f"{source}/model.safetensors"
    tensors = load_file(path)
    change(tensors)
    save_file(tensors, path, metadata={"format": "pt"})


def refusal(source: str, tmp_path) -> str:
    with pytest.raises(ModelLoadError) as error:
        embedding_matrix_statistics({"id": "m"}, source, "float32", tmp_path / "m.csv", tmp_path / "p.parquet")
    assert "\n" not in str(error.value) and not (tmp_path / "m.csv").exists()
    return str(error.value)


def padded_head(tiny_models, tmp_path) -> str:
    """The untied tiny GPT-2 whose saved head has :data:`PADDED` rows for its :data:`VOCABULARY` tokens: its rows
    and, past them, rows of zeros and of small random values (the padding of real heads is either)."""
    source = untied_gpt2(tmp_path / "model", tiny_models["gpt2"])

    def pad(tensors):
        head = tensors["lm_head.weight"]
        assert head.shape == (VOCABULARY, DIM)
        extra = PADDED - VOCABULARY
        random = 0.02 * torch.randn(extra // 2, DIM, generator=torch.Generator().manual_seed(3))
        tensors["lm_head.weight"] = torch.cat([head, torch.zeros(extra - extra // 2, DIM), random])

    rewrite_weights(source, pad)
    return source


def refuse(*args):
    raise embedding_weights.Unresolved("refused by the test")


@pytest.mark.parametrize("saved", ["safetensors", "pytorch_model.bin"])
def test_an_output_matrix_padded_past_the_vocabulary_is_measured_as_the_files_hold_it(
    tiny_models, tmp_path, caplog, saved
):
    source = padded_head(tiny_models, tmp_path)
    stored = load_file(f"{source}/model.safetensors")  # the padded matrix, from the file
    if saved == "pytorch_model.bin":
        pickled(source)
    csv, projection = tmp_path / "m.csv", tmp_path / "p.parquet"
    with caplog.at_level(logging.WARNING, logger="ctxvar.models.embedding_weights"):
        embedding_matrix_statistics({"id": "m"}, source, "float32", csv, projection)
    w_in = stored["transformer.wte.weight"].double().numpy()
    w_out = stored["lm_head.weight"].double().numpy()
    table = read_csv(csv)
    check_table(table, reference_rows("input", w_in, False) + reference_rows("output", w_out, False))
    assert list(table["rows"]) == [VOCABULARY, VOCABULARY, PADDED, PADDED]
    assert list(table["zero_rows"]) == [0, 0, (PADDED - VOCABULARY) // 2, 0]
    points = read_table(projection).to_pandas()
    assert (points["matrix"] == "output").sum() == 2 * PADDED
    weights = read_metadata(projection)["weights"]
    assert weights["tensors"]["lm_head.weight"]["shape"] == f"{PADDED},{DIM}"
    assert weights["tensors"]["lm_head.weight"]["built_shape"] == f"{VOCABULARY},{DIM}"
    assert "built_shape" not in weights["tensors"]["transformer.wte.weight"]
    assert f"lm_head.weight has {PADDED} rows in the files, another row count than the {VOCABULARY}" in caplog.text


def test_a_padded_output_matrix_the_whole_model_cannot_hold_is_refused_with_both_shapes_and_why(
    tiny_models, tmp_path, monkeypatch
):
    """Where the matrices cannot be read alone (here the test refuses it), the whole model is loaded, which holds
    the head config.json builds and would fill it at random: refused, the files not blamed."""
    source = padded_head(tiny_models, tmp_path)
    monkeypatch.setattr(embedding_weights, "read_matrices", refuse)
    message = refusal(source, tmp_path)
    assert f"output embedding matrix lm_head.weight is ({PADDED}, {DIM}) in the files, ({VOCABULARY}, {DIM})" in message
    assert "another row count than its vocabulary" in message and "(refused by the test)" in message
    assert "restore" not in message


@pytest.mark.parametrize("alone", [True, False], ids=["read alone", "whole model"])
def test_an_output_matrix_of_another_width_is_refused_with_its_shapes(tiny_models, tmp_path, monkeypatch, alone):
    source = untied_gpt2(tmp_path / "model", tiny_models["gpt2"])
    rewrite_weights(source, lambda tensors: tensors.update({"lm_head.weight": torch.randn(VOCABULARY, DIM + 1)}))
    if not alone:
        monkeypatch.setattr(embedding_weights, "read_matrices", refuse)
    message = refusal(source, tmp_path)
    assert f"lm_head.weight ({VOCABULARY}, {DIM + 1}) in the files, ({VOCABULARY}, {DIM}) in config.json" in message
    assert "initialised at random" in message and "restore the files" in message


def test_an_output_matrix_missing_from_files_that_name_a_head_is_refused(tiny_models, tmp_path):
    source = untied_gpt2(tmp_path / "model", tiny_models["gpt2"])
    rows = load_file(f"{source}/model.safetensors")["lm_head.weight"].shape[0]
    rewrite_weights(source, lambda tensors: tensors.pop("lm_head.weight"))
    message = refusal(source, tmp_path)
    assert f"its output embedding matrix lm_head.weight ({rows}, 16) is not in its weight files" in message


def test_the_padded_rows_change_the_numbers(tiny_models, tmp_path):
    """The rows past the vocabulary are measured: the same head without them gives other numbers."""
    source = padded_head(tiny_models, tmp_path)
    embedding_matrix_statistics({"id": "m"}, source, "float32", tmp_path / "a.csv", tmp_path / "a.parquet")
    rewrite_weights(source, lambda t: t.update({"lm_head.weight": t["lm_head.weight"][:VOCABULARY].clone()}))
    embedding_matrix_statistics({"id": "m"}, source, "float32", tmp_path / "b.csv", tmp_path / "b.parquet")
    padded, unpadded = read_csv(tmp_path / "a.csv"), read_csv(tmp_path / "b.csv")
    assert list(unpadded["rows"]) == [VOCABULARY] * 4
    assert not np.allclose(padded["isotropy"][2:], unpadded["isotropy"][2:])
