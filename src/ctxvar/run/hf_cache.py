"""Hub checkpoints removed from the HF cache once the run is done with them (``hf_cache.remove_after_use``), so that
a sweep over hundreds of revisions does not fill the disk; never one that was in the cache before the run.

Whose a snapshot is (a Hub model's commit, ``snapshots/<commit>`` in the cache) is decided once, at the first real
start of the run that names it (the Snakefile's ``onstart``, before any job can download anything), and kept in the
run's ledger, ``results/{run}/hf_cache.json`` (:func:`record_cache_ledger`): a snapshot already there is the
user's, any other one the run's. A later start, which finds there the snapshots the run downloaded, adds only the
commits not recorded yet, so it never takes the run's downloads for the user's. The ledger is kept whether the
setting is on or not, so that turning it on in the middle of a sweep removes what the run downloaded before. A
commit that a start cannot resolve (offline, with no ``refs/<revision>`` in the cache) is recorded by the first start
that can: a snapshot downloaded meanwhile is then taken for the user's and kept, the safe side. Each entry names
the cache it judged; a job that sees another one (``HF_HUB_CACHE`` set otherwise for it) removes nothing there.

Once every job that reads a model's files has ended, :func:`release_snapshot` removes the snapshot of a commit the
ledger gives to the run, with the blobs of its weight files that no other snapshot of the repo links to (the small
files, tokenizer and configuration, keep theirs: see :func:`remove_snapshot`), and records what it removed and the
bytes freed. ``refs/<revision>`` stays, so that an offline start still knows the commit the revision names and
re-runs nothing. huggingface_hub deletes the files (its ``DeleteCacheStrategy``, which also frees a blob of its
cache-wide store once no repo links to it); which files is found here rather than by ``scan_cache_dir``, which skips
a whole repo when one of its refs names a snapshot that is not there, as the ref of every checkpoint of a sweep does
until the checkpoint is downloaded (:func:`ctxvar.models.hub.remember_commit`), and as the ref of a removed one does.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
from pathlib import Path

from ctxvar.config.entries import revision_of
from ctxvar.errors import ConfigError, CtxvarError
from ctxvar.files.atomic import read_json, write_json
from ctxvar.models import hub

log = logging.getLogger(__name__)

LEDGER = "hf_cache.json"  # in the run's folder
WEIGHT_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".msgpack",
    ".gguf",
    ".onnx",
)  # whose blobs go
BEFORE = "in_cache_before_run"  # a ledger entry's verdict: the user's snapshot (true) or the run's (false)


def hub_snapshots(models: dict[str, dict]) -> dict[str, dict]:
    """Model id → ``{"repo", "revision", "commit"}`` for the Hub models of ``models``: the entries whose ``inputs``
    name a commit (:func:`ctxvar.run.inputs.model_inputs`; None where the start could not resolve it), not local
    folders, archives nor models built in the run."""
    return {
        mid: {"repo": entry["name"], "revision": revision_of(entry), "commit": entry["inputs"]["commit"]}
        for mid, entry in models.items()
        if "commit" in (entry.get("inputs") or {})
    }


def snapshot_key(snapshot: dict) -> str:
    return f"{snapshot['repo']}@{snapshot['commit']}"


def ledger_path(run_folder) -> str:
    return os.path.join(run_folder, LEDGER)


def read_ledger(run_folder) -> dict[str, dict]:
    """``repo@commit`` → its ledger entry; empty when the run has none yet. A ledger that cannot be read raises
    :class:`ConfigError`: read as none, the snapshots the run downloaded would be taken for the user's."""
    path = ledger_path(run_folder)
    if not os.path.lexists(path):
        return {}
    try:
        snapshots = read_json(path)["snapshots"]
        if all(isinstance(entry[BEFORE], bool) for entry in snapshots.values()):
            return snapshots
    except (CtxvarError, OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    raise ConfigError(
        f"{path}: the record of which Hub checkpoints were in the HF cache before the run cannot be read (damaged "
        f"or edited); delete it and {LEDGER}.sha256 beside it: the next start records every checkpoint then in the "
        "cache as the user's (kept)"
    )


def snapshot_folder(snapshot: dict) -> str:
    return os.path.join(hub.repo_folder(snapshot["repo"]), "snapshots", snapshot["commit"])


def record_cache_ledger(run_folder, models: dict[str, dict]) -> None:
    """Add to the run's ledger each Hub snapshot of ``models`` not in it yet, with whether it is in the HF cache
    now (its ``snapshots/<commit>`` folder, whatever it holds) and which cache that is; at the start of a real run,
    before any job."""
    recorded = read_ledger(run_folder)
    new = {}
    for snapshot in hub_snapshots(models).values():
        key = snapshot_key(snapshot)
        if snapshot["commit"] is not None and key not in recorded and key not in new:
            new[key] = {**snapshot, "cache": str(cache_folder()), BEFORE: os.path.lexists(snapshot_folder(snapshot))}
    if new:
        os.makedirs(run_folder, exist_ok=True)
        write_json({"snapshots": {**recorded, **new}}, ledger_path(run_folder))


def kept_because(snapshot: dict, run_folder) -> str | None:
    """Why the snapshot stays in the cache whatever the ledger says of it; None when the run downloaded it."""
    if not (isinstance(snapshot["commit"], str) and hub.COMMIT.fullmatch(snapshot["commit"])):
        return "the commit its revision names was not known at start-up: kept"
    entry = read_ledger(run_folder).get(snapshot_key(snapshot))
    if entry is None:
        return f"not in the run's ledger ({ledger_path(run_folder)}): kept"
    if entry[BEFORE]:
        return "in the HF cache before the run's first start (the user's): kept"
    if entry.get("cache", str(cache_folder())) != str(cache_folder()):  # HF_HUB_CACHE changed, or set by the job
        return f"the ledger judged another HF cache ({entry['cache']}), not this job's ({cache_folder()}): kept"
    return None


def release_snapshot(model: str, snapshot: dict, run_folder, record_path) -> dict:
    """Remove the model's snapshot from the HF cache if the run's ledger says the run downloaded it
    (:func:`remove_snapshot`), and write what was removed, the bytes freed and why to ``record_path``; returns
    that record. Releases of one run go one at a time (a lock on its ledger): two at once would each keep the blobs
    the other's snapshot links to."""
    reason = kept_because(snapshot, run_folder)
    removed, freed = [], 0
    if reason is None:
        with open(ledger_path(run_folder), "rb") as ledger:
            fcntl.flock(ledger, fcntl.LOCK_EX)
            removed, freed = remove_snapshot(snapshot["repo"], snapshot["commit"])
        reason = "downloaded by the run: removed" if removed else "downloaded by the run, not in the HF cache now"
    record = {"model": model, **snapshot, "cache": str(cache_folder())}
    record.update(removed=removed, bytes_freed=freed, why=reason)
    what = f"{snapshot['repo']} {snapshot['revision']}, commit {snapshot['commit']}"
    log.info("%s (%s): %s, %d bytes freed", model, what, reason, freed)
    write_json(record, record_path)
    return record


def cache_folder() -> Path:
    """The HF cache (``HF_HUB_CACHE`` as set now) as huggingface_hub's cache tools name it: links resolved."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser().resolve()


def linked_files(snapshot: Path, suffixes: tuple[str, ...] = ("",)) -> set[Path]:
    """The files ``snapshot``'s entries (those whose names end with one of ``suffixes``) stand for: the first hop of
    a link (a repo's ``blobs/<etag>``, which may itself link into huggingface_hub's cache-wide store), else the file
    itself (a cache without links)."""
    return {
        Path(os.path.abspath(path.parent / os.readlink(path))) if path.is_symlink() else path
        for path in snapshot.rglob("*")
        if not path.is_dir() and path.name.endswith(suffixes)
    }


def remove_snapshot(repo_id: str, commit: str) -> tuple[list[str], int]:
    """Remove ``snapshots/<commit>`` of ``repo_id`` from the HF cache, and the blobs of its weight files
    (:data:`WEIGHT_SUFFIXES`) that no other snapshot of the repo links to, as ``scan_cache_dir().delete_revisions(
    commit)`` would for those, its refs left as they are (see the module's docstring). A blob is a file of the
    repo's ``blobs/`` folder: a link to any other file (outside the cache, or of another repo) is removed with the
    snapshot, and the file it names stays. Returns the paths removed, relative to the cache, and the bytes freed:
    the sizes of the files behind them that are gone afterwards (a blob of the cache-wide store that another repo
    links to stays). Nothing to remove, ``([], 0)``, when the snapshot is not there."""
    from huggingface_hub import DeleteCacheStrategy

    cache = cache_folder()
    repo = Path(hub.repo_folder(repo_id, cache=cache))
    snapshot = repo / "snapshots" / commit
    if not snapshot.is_dir():
        return [], 0
    others = set().union(
        *(linked_files(path) for path in (repo / "snapshots").iterdir() if path.is_dir() and path.name != commit)
    )
    files = linked_files(snapshot)
    # Only the repo's own blobs/ (a link to a file elsewhere, outside the cache or another repo's, loses the link
    # alone), and only the weights': a download of another revision links a blob it finds already there without
    # huggingface_hub's lock, so a small file revisions share (a tokenizer's) could lose its blob under it.
    weights = linked_files(snapshot, WEIGHT_SUFFIXES)
    blobs = {path for path in weights if path.parent == repo / "blobs" and path not in others}
    sizes = {}
    for path in blobs | {path for path in files if snapshot in path.parents}:
        try:
            sizes[os.path.realpath(path)] = os.stat(path).st_size
        except OSError:  # a broken link: nothing behind it to free
            pass
    fields = {field.name for field in dataclasses.fields(DeleteCacheStrategy)}
    DeleteCacheStrategy(
        expected_freed_size=sum(sizes.values()),
        blobs=frozenset(blobs),
        refs=frozenset(),
        repos=frozenset(),
        snapshots=frozenset({snapshot}),
        **({"cache_dir": cache} if "cache_dir" in fields else {}),  # huggingface_hub's cache-wide store, if any
    ).execute()
    removed = [str(path.relative_to(cache)) for path in [snapshot, *sorted(blobs)] if not os.path.lexists(path)]
    return removed, sum(size for path, size in sizes.items() if not os.path.lexists(path))
