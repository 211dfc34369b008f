"""The embedding-matrix job reads transformers' loading report: an output matrix that is not the files' own (of
another row count, so initialised at random, or missing from files that name a head) is refused in one line
naming the tensor and its shapes, never measured."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from ctxvar.errors import ModelLoadError
from ctxvar.stats.embedding_matrices import embedding_matrix_statistics

from support.tiny_models import untied_gpt2

pytestmark = pytest.mark.integration


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


def test_an_output_matrix_of_another_row_count_is_refused_with_its_shapes(tiny_models, tmp_path):
    source = untied_gpt2(tmp_path / "model", tiny_models["gpt2"])
    rows = load_file(f"{source}/model.safetensors")["lm_head.weight"].shape[0]

    def more_rows(tensors):
        tensors["lm_head.weight"] = torch.randn(rows + 7, 16)

    rewrite_weights(source, more_rows)
    message = refusal(source, tmp_path)
    assert f"lm_head.weight ({rows + 7}, 16) in the files, ({rows}, 16) in config.json" in message
    assert "initialised at random" in message and "restore the files" in message


def test_an_output_matrix_missing_from_files_that_name_a_head_is_refused(tiny_models, tmp_path):
    source = untied_gpt2(tmp_path / "model", tiny_models["gpt2"])
    rows = load_file(f"{source}/model.safetensors")["lm_head.weight"].shape[0]
    rewrite_weights(source, lambda tensors: tensors.pop("lm_head.weight"))
    message = refusal(source, tmp_path)
    assert f"its output embedding matrix lm_head.weight ({rows}, 16) is not in its weight files" in message
