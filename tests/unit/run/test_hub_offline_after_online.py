"""A Hub revision resolved while the Hub answered is still known offline. ctxvar downloads a model or dataset by
the commit its revision named at start-up, which writes no ``refs/<revision>`` into the HF cache; an offline
start then resolved the revision to nothing, which changed every job's params (all of the model's results
re-ran) and loaded ``main``, which the cache could not serve."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from huggingface_hub import HfApi, constants

from ctxvar.models import hub
from ctxvar.run.inputs import corpus_inputs, model_inputs

COMMIT = "c" * 40


@pytest.fixture
def hub_answers(tmp_path, monkeypatch):
    """An HF cache in ``tmp_path`` and a Hub that can be reached and names COMMIT for every revision."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub, "unavailable_reason", lambda: None)
    monkeypatch.setattr(HfApi, "repo_info", lambda self, repo_id, **options: SimpleNamespace(sha=COMMIT))
    return tmp_path


def go_offline(monkeypatch):
    monkeypatch.setattr(hub, "unavailable_reason", lambda: "HF_HUB_OFFLINE is set")


def test_a_model_revision_resolved_online_is_known_offline(hub_answers, monkeypatch):
    entry = {"id": "m", "name": "org/model", "revision": "v1"}
    online = model_inputs(entry)
    assert online == {"commit": COMMIT}
    assert (hub_answers / "models--org--model" / "refs" / "v1").read_text() == COMMIT
    go_offline(monkeypatch)
    assert model_inputs(entry) == online


def test_a_dataset_revision_resolved_online_is_known_offline(hub_answers, monkeypatch):
    corpus = {"source": "hf", "name": "org/texts", "revision": None}
    online = corpus_inputs(corpus)
    go_offline(monkeypatch)
    assert corpus_inputs(corpus) == online == {"commit": COMMIT}


def test_a_cache_that_cannot_be_written_is_left_alone(hub_answers, monkeypatch):
    (hub_answers / "models--org--model").mkdir()
    os.chmod(hub_answers / "models--org--model", 0o500)
    try:
        assert hub.resolved_commit("org/model") == COMMIT
    finally:
        os.chmod(hub_answers / "models--org--model", 0o700)


def test_a_commit_writes_no_ref(hub_answers):
    assert hub.resolved_commit("org/model", "d" * 40) == "d" * 40
    assert not (hub_answers / "models--org--model").exists()
