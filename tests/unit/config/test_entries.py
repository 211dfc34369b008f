"""A config's model entries (ctxvar.config.entries): the model id, from the entry's name and revision."""

from __future__ import annotations

from ctxvar.config.entries import model_id


def test_model_id_derived_from_name_and_revision():
    assert model_id({"name": "EleutherAI/pythia-70m"}) == "EleutherAI--pythia-70m"
    assert model_id({"name": "EleutherAI/pythia-70m", "revision": "step1000"}) == "EleutherAI--pythia-70m@step1000"
    assert model_id({"name": "gpt2", "revision": "main"}) == "gpt2"
    assert model_id({"id": "mine", "name": "gpt2"}) == "mine"
