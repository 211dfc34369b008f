"""A locally built model's manifest (ctxvar.files.atomic's ``verify_manifest``): a flipped byte in any of its
files is found and named in one line."""

from __future__ import annotations

import shutil

import pytest

from ctxvar.errors import IntegrityError
from ctxvar.files.atomic import MANIFEST, verify_manifest

from support.byte_flips import flip
from support.messages import one_line


@pytest.mark.parametrize("file", ["model.safetensors", "tokenizer.json", "config.json"])
def test_a_flipped_byte_in_a_locally_built_model_is_found(tmp_path, tiny_models, file):
    model_dir = tmp_path / "built"
    shutil.copytree(tiny_models["bert"], model_dir)
    verify_manifest(model_dir)
    flip(model_dir / file, (model_dir / file).stat().st_size // 2)
    with pytest.raises(IntegrityError, match=f"{file}: does not match its SHA-256 in {MANIFEST}") as error:
        verify_manifest(model_dir)
    one_line(error)
