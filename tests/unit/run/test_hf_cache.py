"""Hub checkpoints leave the HF cache after use (ctxvar.run.hf_cache): whose a snapshot is, the user's or the run's,
is decided at the run's real starts and kept across starts (judged again while only a start that could not download
has judged it); a snapshot the run downloaded is removed with the blobs no other snapshot reaches, one the user had
stays, and a release run again removes nothing more. After a release the user's revisions still load offline and
huggingface_hub's scan_cache_dir reads every repo: no ref names a snapshot that is gone, and a ref the run's commit
took over names the user's commit again. The run writes no ref: a dry run leaves the cache as it was, and an offline
start finds each revision's commit in the ledger."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub import HfApi, constants, scan_cache_dir

from ctxvar.errors import ConfigError
from ctxvar.files.atomic import read_json, write_json
from ctxvar.models import hub
from ctxvar.run.hf_cache import (
    LEDGER,
    hub_snapshots,
    read_ledger,
    read_whole_ledger,
    record_cache_ledger,
    release_snapshot,
)
from ctxvar.run.inputs import corpus_inputs, hub_datasets, model_inputs, with_inputs

from support.hf_cache import add_ref, add_snapshot, blobs_of, cache_tree, loads_offline, repo_folder, scan_warnings

REPO = "org/tiny"
COMMITS = {"step0": "0" * 40, "step1": "1" * 40, "step2": "2" * 40}
TOKENIZER = b'{"model": "the same tokenizer at every step"}'


def entry(revision: str, commit: str | None = None) -> dict:
    """A Hub model's entry as the workflow holds it: its commit resolved at start-up (ctxvar.run.inputs)."""
    commit = commit or COMMITS.get(revision) or revision
    return {"id": f"org--tiny@{revision}", "name": REPO, "revision": revision, "inputs": {"commit": commit}}


def models(*revisions: str) -> dict[str, dict]:
    return {f"org--tiny@{revision}": entry(revision) for revision in revisions}


def checkpoint_files(folder, weights_of: str, weights: int) -> Path:
    """A checkpoint's files: a tokenizer every step shares and ``weights`` bytes that ``weights_of`` names (two
    checkpoints with the same ``weights_of`` share their weights' blob)."""
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_bytes(TOKENIZER)
    (folder / "model.safetensors").write_bytes(weights_of.encode() * (weights // len(weights_of)))
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An HF cache holding step0 of org/tiny, the user's, with ``refs/step0``; offline unless a test's start says
    otherwise (:func:`start`)."""
    folder = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folder))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    add_snapshot(folder, REPO, COMMITS["step0"], checkpoint_files(tmp_path / "files0", "step0", 1000), "step0")
    return folder


@pytest.fixture
def run(tmp_path):
    return tmp_path / "results" / "run"


def start(monkeypatch, run, entries: dict, online: bool = True) -> None:
    """A real start's ``onstart``: ``online``, one that could download (the Hub reachable), else one that could not."""
    monkeypatch.setattr(hub, "unavailable_reason", lambda: None if online else "HF_HUB_OFFLINE is set")
    record_cache_ledger(run, entries)


def download(cache, tmp_path, revision: str, weights: int = 3000, weights_of: str | None = None) -> Path:
    """What a job loading ``revision`` by its commit leaves in the cache (no ref: ctxvar loads by commit)."""
    files = checkpoint_files(tmp_path / f"files-{revision}", weights_of or revision, weights)
    return add_snapshot(cache, REPO, COMMITS[revision], files)


def release(run, revision: str, commit: str | None = None) -> dict:
    snapshot = hub_snapshots({"m": entry(revision, commit)})["m"]
    record_path = run / f"org--tiny@{revision}" / "hf_cache_release.json"
    record = release_snapshot(f"org--tiny@{revision}", snapshot, run, record_path)
    assert read_json(record_path) == record
    return record


def verdicts(run) -> dict[str, bool]:
    return {key: entry["in_cache_before_run"] for key, entry in read_ledger(run).items()}


def users_step0_intact(cache, tmp_path) -> bool:
    """step0 loads offline, by its ref and by its commit, with the files the user had, and the cache is sound."""
    files = tmp_path / "files0"
    return (
        loads_offline(cache, REPO, "step0", files)
        and loads_offline(cache, REPO, COMMITS["step0"], files)
        and not scan_warnings(cache)
    )


def test_the_ledger_decides_once_whose_each_snapshot_is(cache, tmp_path, run, monkeypatch):
    start(monkeypatch, run, models("step0", "step1"))
    first = {f"{REPO}@{COMMITS['step0']}": True, f"{REPO}@{COMMITS['step1']}": False}
    assert verdicts(run) == first
    download(cache, tmp_path, "step1")
    start(monkeypatch, run, models("step0", "step1"))  # a later start finds the run's download there
    start(monkeypatch, run, models("step0", "step1"), online=False)  # and so does an offline one
    assert verdicts(run) == first
    download(cache, tmp_path, "step2")  # a checkpoint the user fetched, added to the config later
    start(monkeypatch, run, models("step0", "step1", "step2"))
    assert verdicts(run) == {**first, f"{REPO}@{COMMITS['step2']}": True}


def test_a_snapshot_the_run_downloaded_leaves_with_the_blobs_no_other_snapshot_links_to(
    cache, tmp_path, run, monkeypatch
):
    start(monkeypatch, run, models("step0", "step1"))
    downloaded = download(cache, tmp_path, "step1")
    user = repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"]
    shared, kept = blobs_of(downloaded) & blobs_of(user), blobs_of(user)
    own = blobs_of(downloaded) - shared
    assert len(shared) == 1 and len(own) == 1

    record = release(run, "step1")
    assert not downloaded.exists() and not any(blob.exists() for blob in own)
    assert all(blob.exists() for blob in kept) and {path.name for path in user.iterdir()} == {
        "tokenizer.json",
        "model.safetensors",
    }
    assert record["bytes_freed"] == 3000 and record["why"] == "downloaded by the run: removed"
    repo = f"models--{REPO.replace('/', '--')}"
    assert record["removed"] == [f"{repo}/snapshots/{COMMITS['step1']}", *(f"{repo}/blobs/{b.name}" for b in own)]
    assert record["refs"] == {} and users_step0_intact(cache, tmp_path)


def test_a_blob_the_user_hard_linked_elsewhere_is_not_counted_as_freed(cache, tmp_path, run, monkeypatch):
    """The run's own weights blob has a hard link outside the cache (the user's copy of the file): the blob goes
    from the cache, its data stays on disk through the user's link, so no byte of it is freed."""
    start(monkeypatch, run, models("step0", "step1"))
    downloaded = download(cache, tmp_path, "step1")
    user = repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"]
    (own,) = blobs_of(downloaded) - blobs_of(user)
    os.link(own, tmp_path / "the users copy")
    record = release(run, "step1")
    assert not own.exists() and (tmp_path / "the users copy").stat().st_size == 3000
    assert record["bytes_freed"] == 0


def test_a_small_file_of_the_runs_snapshot_keeps_its_blob_and_its_weights_lose_theirs(
    cache, tmp_path, run, monkeypatch
):
    """A download of another revision links a blob it finds already there without huggingface_hub's lock: only
    the weights' blobs, nearly all of the bytes, are deleted, so a small file the revisions share never loses its
    blob under a download in flight."""
    start(monkeypatch, run, models("step0", "step1"))
    files = checkpoint_files(tmp_path / "files-step1", "step1", 3000)
    (files / "config.json").write_text('{"step": 1}')  # a small file of step1's own
    downloaded = add_snapshot(cache, REPO, COMMITS["step1"], files)
    config_blob = Path(os.path.realpath(downloaded / "config.json"))
    weights_blob = Path(os.path.realpath(downloaded / "model.safetensors"))
    record = release(run, "step1")
    assert not downloaded.exists() and not weights_blob.exists() and config_blob.is_file()
    assert record["bytes_freed"] == 3000


def test_a_weights_blob_the_users_snapshot_shares_stays(cache, tmp_path, run, monkeypatch):
    """A commit that changed no weight (a README edit) links the user's weights' blob, by relative links as
    huggingface_hub makes them: the release takes the run's snapshot and leaves that blob."""
    start(monkeypatch, run, models("step0", "step1"))
    downloaded = download(cache, tmp_path, "step1", weights=1000, weights_of="step0")
    assert blobs_of(downloaded) == blobs_of(repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"])
    record = release(run, "step1")
    assert not downloaded.exists() and record["bytes_freed"] == 0
    assert users_step0_intact(cache, tmp_path)


def test_the_users_snapshot_stays(cache, tmp_path, run, monkeypatch):
    start(monkeypatch, run, models("step0", "step1"))
    before = cache_tree(cache)
    record = release(run, "step0")
    assert record["removed"] == [] and record["bytes_freed"] == 0 and "(the user's): kept" in record["why"]
    assert cache_tree(cache) == before


def test_a_release_run_again_removes_nothing_more(cache, tmp_path, run, monkeypatch):
    start(monkeypatch, run, models("step0", "step1"))
    download(cache, tmp_path, "step1")
    assert release(run, "step1")["bytes_freed"] == 3000
    before = cache_tree(cache)
    again = release(run, "step1")
    assert again["removed"] == [] and again["bytes_freed"] == 0
    assert again["why"] == "downloaded by the run, not in the HF cache now"
    assert cache_tree(cache) == before


def test_what_appears_while_the_run_cannot_download_is_the_users(cache, tmp_path, run, monkeypatch):
    """An offline start of a commit-pinned revision that is not cached (its job then says to download it) judges it
    absent without the right to: the user downloads it, starts again, and it is theirs; until a start finds it, it
    is kept. A start that could download and still finds it absent makes it the run's."""
    pinned = {"m": entry(COMMITS["step1"])}
    start(monkeypatch, run, pinned, online=False)
    assert verdicts(run) == {f"{REPO}@{COMMITS['step1']}": False}
    files = checkpoint_files(tmp_path / "mine", "step1", 3000)
    users = add_snapshot(cache, REPO, COMMITS["step1"], files)  # hf download org/tiny --revision <commit>
    assert "could not download" in release(run, COMMITS["step1"])["why"]  # released before any other start
    start(monkeypatch, run, pinned, online=False)  # the start after the download, offline too
    assert verdicts(run) == {f"{REPO}@{COMMITS['step1']}": True}
    record = release(run, COMMITS["step1"])
    assert record["removed"] == [] and "(the user's): kept" in record["why"] and users.is_dir()
    assert loads_offline(cache, REPO, COMMITS["step1"], files) and not scan_warnings(cache)

    other = tmp_path / "results" / "other"  # offline, then online with the checkpoint still absent: the run's
    pinned = {"m": entry(COMMITS["step2"])}
    start(monkeypatch, other, pinned, online=False)
    start(monkeypatch, other, pinned, online=True)
    assert verdicts(other) == {f"{REPO}@{COMMITS['step2']}": False}
    downloaded = download(cache, tmp_path, "step2")
    assert release(other, COMMITS["step2"])["why"] == "downloaded by the run: removed" and not downloaded.exists()


def test_what_the_user_fetches_after_an_offline_start_is_theirs_whatever_an_earlier_start_said(
    cache, tmp_path, run, monkeypatch
):
    """A start that could download found step1 absent, and its download failed; the next start, offline, finds it
    absent too and says to download it; the user does: the start after that takes it for theirs. The same after
    the release removed the run's own download: what the user fetches while the run cannot is theirs."""
    start(monkeypatch, run, models("step1"))
    start(monkeypatch, run, models("step1"), online=False)
    files = checkpoint_files(tmp_path / "mine", "step1", 3000)
    users = add_snapshot(cache, REPO, COMMITS["step1"], files)
    start(monkeypatch, run, models("step1"), online=False)
    assert verdicts(run) == {f"{REPO}@{COMMITS['step1']}": True}
    assert "(the user's): kept" in release(run, "step1")["why"] and users.is_dir()
    assert loads_offline(cache, REPO, COMMITS["step1"], files)

    other = tmp_path / "results" / "other"
    start(monkeypatch, other, models("step2"))
    downloaded = download(cache, tmp_path, "step2")
    assert release(other, "step2")["why"] == "downloaded by the run: removed" and not downloaded.exists()
    start(monkeypatch, other, models("step2"), online=False)  # a restart, offline, after the release
    mine = add_snapshot(cache, REPO, COMMITS["step2"], checkpoint_files(tmp_path / "mine2", "step2", 3000))
    start(monkeypatch, other, models("step2"))
    assert "(the user's): kept" in release(other, "step2")["why"] and mine.is_dir() and not scan_warnings(cache)


@pytest.mark.parametrize("linked", ["cache", "blobs"])
def test_links_are_compared_resolved(tmp_path, run, monkeypatch, linked, tiny_bert):
    """The cache reached through a link (``HF_HUB_CACHE`` or a folder above it), or the repo's ``blobs/`` a link
    to another disk, and the user's snapshot linking to its blobs by absolute paths (through the cache's link; by
    the other disk's path): the weights' blob it shares with the run's snapshot (relative links) is one file, and
    stays, the user's model still loads offline, and the run's own weights go."""
    real, cache = tmp_path / "real-hub", tmp_path / "hub"
    real.mkdir()
    if linked == "cache":
        cache.symlink_to(real)
    else:
        cache.mkdir()
        elsewhere = tmp_path / "other-disk" / "blobs"
        elsewhere.mkdir(parents=True)
        repo_folder(cache, REPO).mkdir()
        (repo_folder(cache, REPO) / "blobs").symlink_to(elsewhere)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    add_snapshot(
        cache, REPO, COMMITS["step0"], tiny_bert, "main", links="absolute" if linked == "cache" else "resolved"
    )
    start(monkeypatch, run, models("step1"))
    later = tmp_path / "later"  # the same model at a later commit, with an adapter of its own
    shutil.copytree(tiny_bert, later)
    (later / "adapter.safetensors").write_bytes(b"the run's own weights" * 50)
    downloaded = add_snapshot(cache, REPO, COMMITS["step1"], later)

    record = release(run, "step1")
    assert record["why"] == "downloaded by the run: removed" and not downloaded.exists()
    assert record["bytes_freed"] == len(b"the run's own weights" * 50) and not scan_warnings(cache)
    from transformers import AutoModel

    model = AutoModel.from_pretrained(REPO, revision="main", cache_dir=cache, local_files_only=True)
    assert model.config.hidden_size == 8


def test_a_cache_without_links_loses_the_runs_copies_alone(tmp_path, run, monkeypatch):
    """Where the file system has no links huggingface_hub copies each file into its snapshot: the run's snapshot
    goes with its own copies, and the user's, copies too, loads as before."""
    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mine = checkpoint_files(tmp_path / "files0", "step0", 1000)
    add_snapshot(cache, REPO, COMMITS["step0"], mine, "step0", links=None)
    start(monkeypatch, run, models("step0", "step1"))
    downloaded = add_snapshot(
        cache, REPO, COMMITS["step1"], checkpoint_files(tmp_path / "f1", "step0", 1000), links=None
    )
    record = release(run, "step1")
    assert not downloaded.exists() and record["bytes_freed"] == 1000 + len(TOKENIZER)
    assert loads_offline(cache, REPO, "step0", mine) and not scan_warnings(cache)


def fake_hub(monkeypatch, commits: dict[str, str]) -> None:
    """A Hub that can be reached and names ``commits[revision]`` for each revision."""
    monkeypatch.setattr(hub, "unavailable_reason", lambda: None)
    answer = lambda self, repo_id, revision, **options: SimpleNamespace(sha=commits[revision])  # noqa: E731
    monkeypatch.setattr(HfApi, "repo_info", answer)


def test_main_moved_on_the_hub_leaves_the_users_main_as_it_was(cache, tmp_path, run, monkeypatch):
    """The user's ``main`` is step0; on the Hub it has moved to step1. Resolving it (a dry run, every start)
    writes nothing into the cache; the run downloads step1 by its commit, and a download of ``main`` by its name
    meanwhile points the ref at step1 as huggingface_hub does: the release puts it back to step0, the user's
    ``main`` loads offline, scan_cache_dir reads the repo, and an offline start still resolves ``main`` to the
    commit the run's results were made from (the ledger's), not to the ref's."""
    add_ref(cache, REPO, "main", COMMITS["step0"])
    main = {"id": "org--tiny", "name": REPO, "revision": "main"}
    fake_hub(monkeypatch, {"main": COMMITS["step1"]})
    before = cache_tree(cache)
    resolved = with_inputs({"org--tiny": main}, str(run))  # the parse of any start, a dry run's included
    assert resolved["org--tiny"]["inputs"] == {"commit": COMMITS["step1"]} and cache_tree(cache) == before

    record_cache_ledger(run, resolved)  # the real start's onstart
    assert cache_tree(cache) == before and verdicts(run) == {f"{REPO}@{COMMITS['step1']}": False}
    download(cache, tmp_path, "step1")
    add_ref(cache, REPO, "main", COMMITS["step1"])
    record = release(run, "main", COMMITS["step1"])
    assert record["why"] == "downloaded by the run: removed" and record["refs"] == {"main": COMMITS["step0"]}
    assert users_step0_intact(cache, tmp_path) and loads_offline(cache, REPO, "main", tmp_path / "files0")

    monkeypatch.setattr(hub, "unavailable_reason", lambda: "HF_HUB_OFFLINE is set")
    assert model_inputs(main, str(run)) == {"commit": COMMITS["step1"]}  # the ledger's, not refs/main's
    assert model_inputs(main) == {"commit": COMMITS["step0"]}  # without the run's ledger: the cache's ref


def test_a_ref_naming_the_runs_commit_for_a_revision_the_user_never_had_goes_with_it(cache, tmp_path, run, monkeypatch):
    """A tag the user never had, whose ref (written by a download by its name, or by an earlier ctxvar) names the
    run's commit: once that commit is gone, the ref goes too, and an offline start finds the tag's commit in the
    ledger."""
    tag = {"id": "org--tiny@v1.0", "name": REPO, "revision": "v1.0"}
    fake_hub(monkeypatch, {"v1.0": COMMITS["step1"]})
    add_ref(cache, REPO, "v1.0", COMMITS["step1"])
    record_cache_ledger(run, with_inputs({"v1": tag}, str(run)))
    download(cache, tmp_path, "step1")
    record = release(run, "v1.0", COMMITS["step1"])
    assert record["refs"] == {"v1.0": None} and not (repo_folder(cache, REPO) / "refs" / "v1.0").exists()
    assert users_step0_intact(cache, tmp_path) and scan_cache_dir(cache).repos
    monkeypatch.setattr(hub, "unavailable_reason", lambda: "HF_HUB_OFFLINE is set")
    assert model_inputs(tag, str(run)) == {"commit": COMMITS["step1"]}


def test_a_hub_datasets_revision_is_known_offline_from_the_ledger(tmp_path, run, monkeypatch):
    """The corpus's Hub dataset: its revision resolved online is recorded by the real start, nothing is written
    into the cache, and an offline start of the run resolves it to the same commit."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    corpus = {"source": "hf", "name": "org/texts", "revision": "refs/convert/parquet"}
    fake_hub(monkeypatch, {"refs/convert/parquet": "c" * 40})
    online = corpus_inputs(corpus, str(run))
    record_cache_ledger(run, {}, hub_datasets({**corpus, "inputs": online}))
    monkeypatch.setattr(hub, "unavailable_reason", lambda: "HF_HUB_OFFLINE is set")
    assert corpus_inputs(corpus, str(run)) == online == {"commit": "c" * 40}
    assert corpus_inputs(corpus) == {"commit": None} and not (tmp_path / "hub").exists()


def test_two_checkpoints_of_the_run_sharing_weights_leave_one_after_the_other(cache, tmp_path, run, monkeypatch):
    """Two models of the run, one repo at two commits whose weights are one blob: the first release keeps the blob
    the other still links to, and the other loads; the second takes it."""
    start(monkeypatch, run, models("step0", "step1", "step2"))
    first = download(cache, tmp_path, "step1", weights_of="run's weights")
    second = download(cache, tmp_path, "step2", weights_of="run's weights")
    users = blobs_of(repo_folder(cache, REPO) / "snapshots" / COMMITS["step0"])
    (shared,) = blobs_of(first) & blobs_of(second) - users
    size = shared.stat().st_size
    assert release(run, "step1")["bytes_freed"] == 0 and shared.is_file() and not first.exists()
    assert loads_offline(cache, REPO, COMMITS["step2"], tmp_path / "files-step2")
    assert release(run, "step2")["bytes_freed"] == size
    assert not shared.exists() and not second.exists() and users_step0_intact(cache, tmp_path)


def test_a_snapshot_partly_there_before_the_run_is_the_users(cache, tmp_path, run, monkeypatch):
    """The user had step1's configuration alone (AutoConfig.from_pretrained): the snapshot is theirs, and the
    weights the run adds to it stay with it."""
    config = tmp_path / "config-only"
    config.mkdir()
    (config / "config.json").write_text('{"step": 1}')
    add_snapshot(cache, REPO, COMMITS["step1"], config)
    start(monkeypatch, run, models("step0", "step1"))
    full = download(cache, tmp_path, "step1")  # the run's download fills in the rest
    record = release(run, "step1")
    assert "(the user's): kept" in record["why"] and full.is_dir()
    assert loads_offline(cache, REPO, COMMITS["step1"], config) and not scan_warnings(cache)


def test_a_snapshot_another_one_links_into_stays_whole(cache, tmp_path, run, monkeypatch):
    """A user's snapshot whose entry links to an entry of the run's (made by hand): removing the run's snapshot
    would break it, so nothing is removed."""
    start(monkeypatch, run, models("step0", "step1"))
    downloaded = download(cache, tmp_path, "step1")
    mine = repo_folder(cache, REPO) / "snapshots" / ("9" * 40)
    mine.mkdir()
    (mine / "model.safetensors").symlink_to(f"../{COMMITS['step1']}/model.safetensors")
    record = release(run, "step1")
    assert record["removed"] == [] and "links to files in it" in record["why"] and downloaded.is_dir()
    assert (mine / "model.safetensors").read_bytes() == (tmp_path / "files-step1" / "model.safetensors").read_bytes()


def test_without_the_ledgers_word_nothing_is_removed(cache, tmp_path, run):
    downloaded = download(cache, tmp_path, "step1")
    assert "not in the run's ledger" in release(run, "step1")["why"]  # no start recorded it
    unresolved = {"repo": REPO, "revision": "step1", "commit": None}  # offline, with no ref: step1 unknown
    record = release_snapshot("m", unresolved, run, tmp_path / "m.json")
    assert record["why"].startswith("the commit its revision names was not known at start-up")
    assert downloaded.exists()


def test_only_hub_models_with_a_known_commit_are_recorded(cache, tmp_path, run, monkeypatch):
    others = {
        "local": {"id": "local", "name": str(tmp_path), "inputs": {"files": "f"}},
        "zipped": {"id": "zipped", "init": "archive", "inputs": {"archive": "a"}},
        "built": {"id": "built", "init": "random"},
        "unresolved": {**entry("step2"), "inputs": {"commit": None}},
    }
    assert list(hub_snapshots(others)) == ["unresolved"]
    start(monkeypatch, run, others)
    assert not (run / LEDGER).exists()


def test_a_damaged_ledger_stops_the_start_with_one_line(cache, run):
    write_json({"snapshots": {"org/tiny@x": {"in_cache_before_run": "yes"}}}, run / LEDGER)
    with pytest.raises(ConfigError, match=f"^{run / LEDGER}: the record of which Hub checkpoints were in the HF"):
        record_cache_ledger(run, models("step0"))
    assert model_inputs({"id": "m", "name": REPO, "revision": "step0"}, str(run)) == {"commit": COMMITS["step0"]}


def test_a_ledger_of_an_earlier_ctxvar_is_judged_again(cache, tmp_path, run, monkeypatch):
    """An entry without the field that says whether its start could download may have been judged offline:
    it is judged again, and a snapshot there now is the user's."""
    earlier = {"repo": REPO, "revision": "step1", "commit": COMMITS["step1"], "in_cache_before_run": False}
    write_json({"snapshots": {f"{REPO}@{COMMITS['step1']}": {**earlier, "cache": str(cache)}}}, run / LEDGER)
    download(cache, tmp_path, "step1")
    start(monkeypatch, run, models("step1"))
    assert verdicts(run) == {f"{REPO}@{COMMITS['step1']}": True}
    assert read_whole_ledger(run)["revisions"] == {f"model:{REPO}@step1": COMMITS["step1"]}


def test_a_link_out_of_the_repos_blobs_loses_the_link_alone(cache, tmp_path, run, monkeypatch):
    """A snapshot entry that links to a file outside the cache (a user's weights linked in by hand), or to another
    repo's blob, is no blob of this repo: the removal takes the link and never the file it names."""
    start(monkeypatch, run, models("step0", "step1"))
    downloaded = download(cache, tmp_path, "step1")
    outside = tmp_path / "home" / "weights.bin"
    outside.parent.mkdir()
    outside.write_bytes(b"the user's own file" * 10)
    other_repo = add_snapshot(cache, "org/other", "9" * 40, checkpoint_files(tmp_path / "files9", "other", 700))
    (downloaded / "absolute.bin").symlink_to(outside)
    (downloaded / "relative.bin").symlink_to(os.path.relpath(outside, downloaded))
    (downloaded / "foreign.safetensors").symlink_to(os.path.realpath(other_repo / "model.safetensors"))

    record = release(run, "step1")
    assert not downloaded.exists() and record["bytes_freed"] == 3000
    assert outside.read_bytes() == b"the user's own file" * 10
    assert all(blob.exists() for blob in blobs_of(other_repo))
    assert all(path.startswith(f"models--{REPO.replace('/', '--')}/") for path in record["removed"])


def test_a_snapshot_in_another_cache_than_the_ledger_judged_stays(cache, tmp_path, run, monkeypatch):
    """The ledger judged the cache the start saw; a job that sees another one (HF_HUB_CACHE set by a cluster
    profile or changed since the first start) may hold the user's own copy of the same commit there: kept."""
    start(monkeypatch, run, models("step0", "step1"))  # step1: not in this cache
    other = tmp_path / "other-hub"
    users = add_snapshot(other, REPO, COMMITS["step1"], checkpoint_files(tmp_path / "mine", "step1", 3000))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(other))
    record = release(run, "step1")
    assert record["removed"] == [] and "another HF cache" in record["why"] and users.is_dir()


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    """A BERT of one layer, 8 wide, saved as transformers saves it (config.json, model.safetensors)."""
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny-bert")
    config = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8)
    BertModel(config).save_pretrained(folder)
    return folder


def test_the_users_ref_of_a_revision_the_config_does_not_name_is_put_back(cache, tmp_path, run, monkeypatch):
    """The config names step1 by its commit; the user's ``main`` names step0 and, downloaded by its name during the
    run, moves to step1: the release puts ``main`` back to step0, and the user's ``main`` loads offline."""
    add_ref(cache, REPO, "main", COMMITS["step0"])
    by_commit = {"m": entry(COMMITS["step1"], COMMITS["step1"])}
    start(monkeypatch, run, by_commit)
    download(cache, tmp_path, "step1")
    add_ref(cache, REPO, "main", COMMITS["step1"])
    record = release_snapshot("m", hub_snapshots(by_commit)["m"], run, run / "m" / "hf_cache_release.json")
    assert record["why"] == "downloaded by the run: removed" and record["refs"] == {"main": COMMITS["step0"]}
    assert users_step0_intact(cache, tmp_path) and loads_offline(cache, REPO, "main", tmp_path / "files0")
