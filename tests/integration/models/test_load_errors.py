"""Why a damaged model directory does not load (ctxvar.models.load_errors): a truncated or edited weights,
config or tokenizer file is named in one line with its remedy."""

from __future__ import annotations

import pytest

from ctxvar.errors import ModelLoadError
from ctxvar.models.loading import load_model, load_tokenizer

from support.messages import one_line
from support.model_files import user_copy


@pytest.mark.parametrize(
    "file, damage, load",
    [
        ("model.safetensors", "truncate", "model"),
        ("model.safetensors", "header", "model"),
        ("config.json", "truncate", "model"),
        ("config.json", "latin-1", "model"),
        ("tokenizer.json", "truncate", "tokenizer"),
        ("tokenizer_config.json", "truncate", "tokenizer"),
    ],
)
def test_a_damaged_model_file_is_named(tmp_path, tiny_models, file, damage, load):
    model_dir = user_copy(tiny_models, tmp_path)
    path = model_dir / file
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "header":  # safetensors' JSON header starts after its 8-byte length
        path.write_bytes(data[:8] + b"#" + data[9:])
    else:
        path.write_bytes(data.replace(b"{", b'{"name": "caf\xe9", ', 1))
    entry = {"id": "m"}
    with pytest.raises(ModelLoadError, match=f"{path} is damaged .*restore it") as error:
        load_model(
            entry, str(model_dir), "float32", __import__("torch").device("cpu")
        ) if load == "model" else load_tokenizer(entry, str(model_dir))
    one_line(error)
