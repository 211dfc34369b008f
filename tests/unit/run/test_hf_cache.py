"""Hub checkpoints leave the HF cache after use (ctxvar.run.hf_cache): whose a snapshot is, the user's or the run's,
is decided once, at the run's first start, and kept across starts; a snapshot the run downloaded is removed with the
blobs no other snapshot links to, one the user had stays, and a release run again removes nothing more."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub import constants, scan_cache_dir

from ctxvar.errors import ConfigError
from ctxvar.files.atomic import read_json, write_json
from ctxvar.run.hf_cache import LEDGER, hub_snapshots, read_ledger, record_cache_ledger, release_snapshot

from support.hf_cache import add_ref, add_snapshot, blobs_of, repo_folder

REPO = "org/tiny"
COMMITS = {"step0": "0" * 40, "step1": "1" * 40, "step2": "2" * 40}
TOKENIZER = b'{"model": "the same tokenizer at every step"}'


def entry(revision: str) -> dict:
    """A Hub model's entry as the workflow holds it: its commit resolved at start-up (ctxvar.run.inputs)."""
    return {"id": f"org--tiny@{revision}", "name": REPO, "revision": revision, "inputs": {"commit": COMMITS[revision]}}


def models(*revisions: str) -> dict[str, dict]:
    return {f"org--tiny@{revision}": entry(revision) for revision in revisions}


def checkpoint_files(folder, revision: str, weights: int) -> str:
    """A checkpoint's files: a tokenizer every step shares and ``weights`` bytes of its own."""
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_bytes(TOKENIZER)
    (folder / "model.safetensors").write_bytes(revision.encode() * (weights // len(revision)))
    return str(folder)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An HF cache (offline) holding step0 of org/tiny, the user's, and the ref of step1, which a start that
    reached the Hub wrote before any job downloaded it."""
    folder = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folder))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    add_snapshot(folder, REPO, COMMITS["step0"], checkpoint_files(tmp_path / "files0", "step0", 1000), "step0")
    add_ref(folder, REPO, "step1", COMMITS["step1"])
    return folder


def download(cache, tmp_path, revision: str, weights: int = 3000):
    """What a job loading ``revision`` by its commit leaves in the cache (no ref: ctxvar loads by commit)."""
    files = checkpoint_files(tmp_path / f"files-{revision}", revision, weights)
    return add_snapshot(cache, REPO, COMMITS[revision], files)


def release(tmp_path, revision: str) -> dict:
    snapshot = hub_snapshots(models(revision))[f"org--tiny@{revision}"]
    record_path = tmp_path / "results" / "run" / f"org--tiny@{revision}" / "hf_cache_release.json"
    record = release_snapshot(f"org--tiny@{revision}", snapshot, tmp_path / "results" / "run", record_path)
    assert read_json(record_path) == record
    return record


def verdicts(run_folder) -> dict[str, bool]:
    return {key: entry["in_cache_before_run"] for key, entry in read_ledger(run_folder).items()}


def test_the_ledger_decides_once_whose_each_snapshot_is(cache, tmp_path):
    run = tmp_path / "results" / "run"
    record_cache_ledger(run, models("step0", "step1"))
    first = {f"{REPO}@{COMMITS['step0']}": True, f"{REPO}@{COMMITS['step1']}": False}
    assert verdicts(run) == first
    download(cache, tmp_path, "step1")
    record_cache_ledger(run, models("step0", "step1"))  # a later start finds the run's download there
    assert verdicts(run) == first
    download(cache, tmp_path, "step2")  # a checkpoint the user fetched, added to the config later
    record_cache_ledger(run, models("step0", "step1", "step2"))
    assert verdicts(run) == {**first, f"{REPO}@{COMMITS['step2']}": True}


def test_a_snapshot_the_run_downloaded_leaves_with_the_blobs_no_other_snapshot_links_to(cache, tmp_path):
    record_cache_ledger(tmp_path / "results" / "run", models("step0", "step1"))
    downloaded = download(cache, tmp_path, "step1")
    user = repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"]
    shared, kept = blobs_of(downloaded) & blobs_of(user), blobs_of(user)
    own = blobs_of(downloaded) - shared
    assert len(shared) == 1 and len(own) == 1

    record = release(tmp_path, "step1")
    assert not downloaded.exists() and not any(blob.exists() for blob in own)
    assert all(blob.exists() for blob in kept) and {path.name for path in user.iterdir()} == {
        "tokenizer.json",
        "model.safetensors",
    }
    assert record["bytes_freed"] == 3000 and record["why"] == "downloaded by the run: removed"
    repo = f"models--{REPO.replace('/', '--')}"
    assert record["removed"] == [f"{repo}/snapshots/{COMMITS['step1']}", *(f"{repo}/blobs/{b.name}" for b in own)]
    assert (repo_folder(cache, REPO) / "refs" / "step1").read_text() == COMMITS["step1"]  # offline starts know it


def test_a_small_file_of_the_runs_snapshot_keeps_its_blob_and_its_weights_lose_theirs(cache, tmp_path):
    """A download of another revision links a blob it finds already there without huggingface_hub's lock: only
    the weights' blobs, nearly all of the bytes, are deleted, so a small file the revisions share never loses its
    blob under a download in flight."""
    record_cache_ledger(tmp_path / "results" / "run", models("step0", "step1"))
    files = Path(checkpoint_files(tmp_path / "files-step1", "step1", 3000))
    (files / "config.json").write_text('{"step": 1}')  # a small file of step1's own
    downloaded = add_snapshot(cache, REPO, COMMITS["step1"], files)
    config_blob = Path(os.path.realpath(downloaded / "config.json"))
    weights_blob = Path(os.path.realpath(downloaded / "model.safetensors"))
    record = release(tmp_path, "step1")
    assert not downloaded.exists() and not weights_blob.exists() and config_blob.is_file()
    assert record["bytes_freed"] == 3000


def test_the_users_snapshot_stays(cache, tmp_path):
    record_cache_ledger(tmp_path / "results" / "run", models("step0", "step1"))
    before = blobs_of(repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"])
    record = release(tmp_path, "step0")
    assert record["removed"] == [] and record["bytes_freed"] == 0 and "(the user's): kept" in record["why"]
    assert blobs_of(repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"]) == before


def test_a_release_run_again_removes_nothing_more(cache, tmp_path):
    record_cache_ledger(tmp_path / "results" / "run", models("step0", "step1"))
    download(cache, tmp_path, "step1")
    assert release(tmp_path, "step1")["bytes_freed"] == 3000
    user = blobs_of(repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"])
    again = release(tmp_path, "step1")
    assert again["removed"] == [] and again["bytes_freed"] == 0
    assert again["why"] == "downloaded by the run, not in the HF cache now"
    assert blobs_of(repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"]) == user


def test_a_ref_naming_a_checkpoint_not_downloaded_yet_does_not_stop_the_removal(cache, tmp_path):
    """huggingface_hub's scan_cache_dir skips a repo one of whose refs names a missing snapshot, as a sweep's
    start leaves every checkpoint's ref until the checkpoint is downloaded."""
    record_cache_ledger(tmp_path / "results" / "run", models("step0", "step1", "step2"))
    downloaded = download(cache, tmp_path, "step1")
    add_ref(cache, REPO, "step2", COMMITS["step2"])
    assert not scan_cache_dir(cache).repos, "scan_cache_dir reads such a repo after all"
    assert release(tmp_path, "step1")["bytes_freed"] == 3000 and not downloaded.exists()


def test_without_the_ledgers_word_nothing_is_removed(cache, tmp_path):
    downloaded = download(cache, tmp_path, "step1")
    assert "not in the run's ledger" in release(tmp_path, "step1")["why"]  # no start recorded it
    unresolved = {"repo": REPO, "revision": "step1", "commit": None}  # offline, with no ref: step1 unknown
    record = release_snapshot("m", unresolved, tmp_path / "results" / "run", tmp_path / "m.json")
    assert record["why"].startswith("the commit its revision names was not known at start-up")
    assert downloaded.exists()


def test_only_hub_models_with_a_known_commit_are_recorded(cache, tmp_path):
    run = tmp_path / "results" / "run"
    others = {
        "local": {"id": "local", "name": str(tmp_path), "inputs": {"files": "f"}},
        "zipped": {"id": "zipped", "init": "archive", "inputs": {"archive": "a"}},
        "built": {"id": "built", "init": "random"},
        "unresolved": {**entry("step2"), "inputs": {"commit": None}},
    }
    assert list(hub_snapshots(others)) == ["unresolved"]
    record_cache_ledger(run, others)
    assert not (run / LEDGER).exists()


def test_a_damaged_ledger_stops_the_start_with_one_line(cache, tmp_path):
    run = tmp_path / "results" / "run"
    write_json({"snapshots": {"org/tiny@x": {"in_cache_before_run": "yes"}}}, run / LEDGER)
    with pytest.raises(ConfigError, match=f"^{run / LEDGER}: the record of which Hub checkpoints were in the HF"):
        record_cache_ledger(run, models("step0"))


def test_a_link_out_of_the_repos_blobs_loses_the_link_alone(cache, tmp_path):
    """A snapshot entry that links to a file outside the cache (a user's weights linked in by hand), or to another
    repo's blob, is no blob of this repo: the removal takes the link and never the file it names."""
    record_cache_ledger(tmp_path / "results" / "run", models("step0", "step1"))
    downloaded = download(cache, tmp_path, "step1")
    outside = tmp_path / "home" / "weights.bin"
    outside.parent.mkdir()
    outside.write_bytes(b"the user's own file" * 10)
    other_repo = add_snapshot(cache, "org/other", "9" * 40, checkpoint_files(tmp_path / "files9", "other", 700))
    (downloaded / "absolute.bin").symlink_to(outside)
    (downloaded / "relative.bin").symlink_to(os.path.relpath(outside, downloaded))
    (downloaded / "foreign.safetensors").symlink_to(os.path.realpath(other_repo / "model.safetensors"))

    record = release(tmp_path, "step1")
    assert not downloaded.exists() and record["bytes_freed"] == 3000
    assert outside.read_bytes() == b"the user's own file" * 10
    assert all(blob.exists() for blob in blobs_of(other_repo))
    assert all(path.startswith(f"models--{REPO.replace('/', '--')}/") for path in record["removed"])


def test_a_snapshot_in_another_cache_than_the_ledger_judged_stays(cache, tmp_path, monkeypatch):
    """The ledger judged the cache the start saw; a job that sees another one (HF_HUB_CACHE set by a cluster
    profile or changed since the first start) may hold the user's own copy of the same commit there: kept."""
    record_cache_ledger(tmp_path / "results" / "run", models("step0", "step1"))  # step1: not in this cache
    other = tmp_path / "other-hub"
    users = add_snapshot(other, REPO, COMMITS["step1"], checkpoint_files(tmp_path / "mine", "step1", 3000))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(other))
    record = release(tmp_path, "step1")
    assert record["removed"] == [] and "another HF cache" in record["why"] and users.is_dir()
