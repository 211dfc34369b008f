"""A config's model entries (ctxvar.config.entries): the model id, from the entry's name and revision."""

from __future__ import annotations

from ctxvar.config.entries import model_id


def test_model_id_derived_from_name_and_revision():
    assert model_id({"name": "EleutherAI/pythia-70m"}) == "EleutherAI--pythia-70m"
    assert model_id({"name": "EleutherAI/pythia-70m", "revision": "step1000"}) == "EleutherAI--pythia-70m@step1000"
    assert model_id({"name": "gpt2", "revision": "main"}) == "gpt2"
    assert model_id({"id": "mine", "name": "gpt2"}) == "mine"


def test_the_default_id_of_a_local_directory_is_its_name(tmp_path):
    directory = tmp_path / "checkpoints" / "my-model"
    directory.mkdir(parents=True)
    assert model_id({"name": str(directory)}) == "my-model"
    assert model_id({"name": str(directory) + "/"}) == "my-model"
    assert model_id({"name": "./models/my-model"}) == "my-model"
    assert model_id({"name": "EleutherAI/pythia-70m", "revision": "step1"}) == "EleutherAI--pythia-70m@step1"
