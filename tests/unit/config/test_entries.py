"""A config's model entries (ctxvar.config.entries): the model id, from the entry's name and revision, or a local
directory's name; checkpoint revisions become model ids in step order, grouped in families, and bad revisions are
refused in one line."""

from __future__ import annotations

import pytest

from ctxvar.config.entries import checkpoint_families, model_id, models_by_id
from ctxvar.errors import ConfigError


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


def test_revisions_become_model_ids_in_step_order():
    config = {
        "models": [
            {"name": "EleutherAI/pythia-70m", "revisions": ["step1000", "step0", "step143000"]},
            {"id": "tiny", "init": "random", "arch": "gpt2", "revisions": ["step0", "step5"]},
        ]
    }
    models_ = models_by_id(config)
    assert list(models_) == [
        "EleutherAI--pythia-70m@step1000",
        "EleutherAI--pythia-70m@step0",
        "EleutherAI--pythia-70m@step143000",
        "tiny@step0",
        "tiny@step5",
    ]
    assert models_["tiny@step5"]["revision"] == "step5" and models_["tiny@step5"]["step"] == 5
    families = checkpoint_families(models_)
    assert families["EleutherAI--pythia-70m"] == [
        "EleutherAI--pythia-70m@step0",
        "EleutherAI--pythia-70m@step1000",
        "EleutherAI--pythia-70m@step143000",
    ]


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"id": "t", "init": "random", "arch": "gpt2", "revisions": ["main"]}, "must be stepN"),
        ({"id": "g", "init": "gaussian", "revisions": ["step0"]}, "holds one version"),
        ({"name": "gpt2", "revision": "x", "revisions": ["step0"]}, "both revision and revisions"),
    ],
)
def test_bad_revisions_fail_with_one_line(entry, message):
    with pytest.raises(ConfigError, match=message):
        models_by_id({"models": [entry]})
