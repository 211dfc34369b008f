"""The models a run makes (ctxvar.models.build): each kind's builder called with the entry, the folder, the corpus and
the run's type keying; a kind the run does not make refused in one line; the Gaussian null built over a tokenizer
trained on the corpus, its hidden size and seed the entry's, and its manifest written."""

from __future__ import annotations

import json

import pytest

from ctxvar.errors import ConfigError
from ctxvar.files.atomic import MANIFEST, verify_manifest
from ctxvar.models import build


def test_each_kind_goes_to_its_builder_with_the_corpus_and_the_type_keying(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setitem(build.BUILDERS, "random", lambda *arguments: calls.append(arguments))
    entry = {"id": "r", "init": "random", "arch": "gpt2"}
    build.build_model(entry, tmp_path / "r", ["a b", "c d"], merge_markers=False)
    assert calls == [(entry, tmp_path / "r", ["a b", "c d"], False)]


def test_a_kind_the_run_does_not_make_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^models\[\]: entry 'p': init: pretrained is not made in the run"):
        build.build_model({"id": "p", "name": "gpt2"}, tmp_path / "p")
    assert not (tmp_path / "p").exists()


@pytest.mark.integration  # builds a model
def test_the_gaussian_null_is_built_over_the_corpus_with_the_entrys_sizes(tmp_path, corpus_texts):
    entry = {"id": "g", "init": "gaussian", "hidden_size": 16, "vocab_size": 200, "seed": 3}
    build.build_model(entry, tmp_path / "g", corpus_texts[:200])
    verify_manifest(tmp_path / "g")
    assert (tmp_path / "g" / MANIFEST).is_file()
    config = json.loads((tmp_path / "g" / "config.json").read_text())
    assert (config["model_type"], config["hidden_size"], config["seed"]) == ("ctxvar-gaussian", 16, 3)
    assert config["vocab_size"] <= 200
