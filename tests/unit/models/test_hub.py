"""The Hugging Face Hub as ctxvar asks it (ctxvar.models.hub), on a cache laid out by hand: offline mode as set now,
a failed connection standing for the Hub's answer for a while; a model's files found in its directory or in the
cache; the commit a revision names, from the Hub when it can be asked, else from what a run recorded, else from the
cache's refs."""

from __future__ import annotations

import json

import pytest
from huggingface_hub import constants

from ctxvar.models import hub

from support.hf_cache import add_ref, add_snapshot

COMMIT, OTHER = "a" * 40, "b" * 40


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An HF cache of its own holding org/m at COMMIT (config.json, a JSON list) as its main."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    files = tmp_path / "files"
    files.mkdir()
    (files / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (files / "list.json").write_text("[1, 2]")
    add_snapshot(tmp_path / "hub", "org/m", COMMIT, files, revision="main")
    return tmp_path / "hub"


def test_offline_mode_is_read_as_it_is_set_now(hub_online, monkeypatch):
    assert not hub.offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.offline()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "yes")
    assert hub.offline()
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    assert not hub.offline()


def test_a_failed_connection_stands_for_the_hubs_answer_for_a_while(hub_online, monkeypatch):
    tries, now = [], [1000.0]
    monkeypatch.setattr(hub, "unreachable_since", None)
    monkeypatch.setattr(hub.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(hub, "hub_reachable", lambda: tries.append(now[0]) or len(tries) > 1)
    assert hub.unavailable_reason() == "the Hugging Face Hub cannot be reached"
    now[0] += hub.UNREACHABLE_KEPT_S - 1
    assert hub.unavailable_reason() == "the Hugging Face Hub cannot be reached" and tries == [1000.0]
    now[0] += 2
    assert hub.unavailable_reason() is None and len(tries) == 2 and hub.unreachable_since is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.unavailable_reason() == "HF_HUB_OFFLINE is set" and len(tries) == 2


def test_a_models_file_is_found_in_its_directory_or_in_the_cache(cache, tmp_path):
    local = tmp_path / "local"
    local.mkdir()
    (local / "config.json").write_text("{}")
    assert hub.model_file(str(local), "config.json") == str(local / "config.json")
    in_cache = hub.model_file("org/m", "config.json")
    assert in_cache.startswith(str(cache / "models--org--m" / "snapshots" / COMMIT))
    assert hub.model_file("org/m", "tokenizer.json") is None
    assert hub.model_file("not a repo id//", "config.json") is None
    assert hub.model_json("org/m", "config.json") == {"model_type": "bert"}
    assert hub.model_json("org/m", "list.json") is None, "not a JSON object"
    assert hub.model_json("org/m", "missing.json") is None


def test_the_cache_names_a_revisions_commit(cache):
    assert hub.repo_folder("org/m") == str(cache / "models--org--m")
    assert hub.repo_folder("org/texts", "dataset", cache="/elsewhere") == "/elsewhere/datasets--org--texts"
    assert hub.cached_commit("org/m") == COMMIT
    assert hub.cached_commit("org/m", OTHER) == OTHER, "a commit names itself"
    assert hub.cached_commit("org/m", "v2") is None
    add_ref(cache, "org/m", "v3", "not a commit")
    assert hub.cached_commit("org/m", "v3") is None


def test_offline_a_revision_resolves_to_the_recorded_commit_else_the_caches(cache, monkeypatch):
    monkeypatch.setattr(hub, "unavailable_reason", lambda: "HF_HUB_OFFLINE is set")
    assert hub.resolved_commit("org/m", "main", recorded=OTHER) == OTHER
    assert hub.resolved_commit("org/m", "main", recorded="not a commit") == COMMIT
    assert hub.resolved_commit("org/m", "main") == COMMIT
    assert hub.resolved_commit("org/m", "v2") is None
    assert hub.resolved_commit("org/gone", OTHER) == OTHER
