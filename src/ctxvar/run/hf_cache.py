"""Hub checkpoints removed from the HF cache once the run is done with them (``hf_cache.remove_after_use``), so that
a sweep over hundreds of revisions does not fill the disk; never one that is the user's, and never a ref or a blob
that the user's snapshots need.

**Whose a snapshot is.** A Hub model's commit is ``snapshots/<commit>`` in the cache. Whose it is, is decided at
the real starts of the run (the Snakefile's ``onstart``, before any job can download anything) and kept in the run's
ledger, ``results/{run}/hf_cache.json`` (:func:`record_cache_ledger`), by one rule: whatever appeared in the cache
while the run could not download is the user's.

- A snapshot in the cache when a start first looks (whatever it holds: one partly there is the user's too) is the
  user's, for good.
- A snapshot absent is judged by each start that finds it absent: the run's if that start could download (the Hub
  reachable, ``HF_HUB_OFFLINE`` unset), else nobody's yet (kept: ``judged_offline``).
- When a start finds it there, the verdict of the last start that found it absent holds: the run's if that start
  could download (its jobs downloaded it; a later start, offline or not, does not take it for the user's; once the
  release has removed it, it is absent again and judged as above), else the user's, for good (fetched after an
  offline start said it was missing; so is, on the safe side, what the run's own jobs fetched if the Hub came back
  while a start judged it unreachable).

A commit that a start cannot resolve (offline, known neither to the ledger nor to the cache's ``refs/``) is judged
by the first start that can. Each entry names the cache it judged; a job that sees another one (``HF_HUB_CACHE``
set otherwise for it) removes nothing there. The ledger is kept whether the setting is on or not, so that turning
it on in the middle of a sweep removes what the run downloaded before. What the user fetches while a start that
could download runs (or between it and the next start) is taken for the run's.

**Refs.** ctxvar loads a Hub revision by the commit it named at start-up (:mod:`ctxvar.run.inputs`), which writes no
``refs/<revision>``, and it writes none itself: a dry run, a cluster job's start and a real run leave the cache's
refs as they were. What each revision named is kept in the ledger instead (``revisions``, every real start), and
an offline start of the run reads it there (:func:`recorded_commit`) before the cache's ``refs/``, so it resolves
each revision to the commit its results were made from even after that commit left the cache, and re-runs nothing.
The ledger also keeps what each ref of a Hub model's repo named at the first real start that saw it (``refs``: the
config's revisions, and every other ref the repo has, such as the user's ``main`` beside a config naming commits):
when a release removes a commit that a ref names (the user downloaded that revision by its name meanwhile, or an
earlier ctxvar wrote the ref), the ref is put back to what it named then if that snapshot is in the cache, else removed;
no ref is left naming a snapshot that is gone, so ``huggingface_hub.scan_cache_dir`` reads the repo.

**What a release removes.** Once every job that reads a model's files has ended, :func:`release_snapshot` removes
the snapshot of a commit the ledger gives to the run, with the blobs of its weight files that no other snapshot of
the repo reaches (the small files, tokenizer and configuration, keep theirs: see :func:`remove_snapshot`), and
records what it removed, the bytes freed and the refs it settled. Links are compared resolved (the cache, the repo's
``blobs/`` or any folder above them may be a link, and a snapshot's links may name a blob by an absolute path
through one); a snapshot another snapshot of the repo links into stays whole. huggingface_hub deletes the files
(its ``DeleteCacheStrategy``, which also frees a blob of its cache-wide store once no repo links to it); which
files is found here rather than by ``scan_cache_dir``, which skips a whole repo when one of its refs names a
snapshot that is not there.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
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
OFFLINE = "judged_offline"  # absent when judged by a start that could not download: judged again, kept meanwhile
SECTIONS = ("snapshots", "revisions", "refs")  # the ledger's: see the module's docstring


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


def revision_key(repo_type: str, repo_id: str, revision: str) -> str:
    """A Hub revision's key in the ledger's ``revisions`` and ``refs``: ``model:org/name@main``."""
    return f"{repo_type}:{repo_id}@{revision}"


def ledger_path(run_folder) -> str:
    return os.path.join(run_folder, LEDGER)


def read_whole_ledger(run_folder) -> dict[str, dict]:
    """The run's ledger, each of :data:`SECTIONS` (empty when the run has none yet): ``snapshots``, ``repo@commit``
    → its entry; ``revisions``, :func:`revision_key` → the commit the latest real start found; ``refs``,
    :func:`revision_key` → what ``refs/<revision>`` named at the first real start that saw it (None: no ref). A
    ledger that cannot be read raises :class:`ConfigError`: read as none, the snapshots the run downloaded would be
    taken for the user's."""
    path = ledger_path(run_folder)
    if not os.path.lexists(path):
        return {section: {} for section in SECTIONS}
    try:
        ledger = read_json(path)
        whole = {section: ledger.get(section, {}) for section in SECTIONS}
        if (
            all(isinstance(entry[BEFORE], bool) for entry in whole["snapshots"].values())
            and all(isinstance(entry.get(OFFLINE, True), bool) for entry in whole["snapshots"].values())
            and all(isinstance(commit, str) for commit in whole["revisions"].values())
            and all(commit is None or isinstance(commit, str) for commit in whole["refs"].values())
        ):
            return whole
    except (CtxvarError, OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    raise ConfigError(
        f"{path}: the record of which Hub checkpoints were in the HF cache before the run cannot be read (damaged "
        f"or edited); delete it and {LEDGER}.sha256 beside it: the next start records every checkpoint then in the "
        "cache as the user's (kept)"
    )


def read_ledger(run_folder) -> dict[str, dict]:
    """``repo@commit`` → its ledger entry (:func:`read_whole_ledger`'s ``snapshots``)."""
    return read_whole_ledger(run_folder)["snapshots"]


def recorded_commit(run_folder, repo_type: str, repo_id: str, revision: str) -> str | None:
    """The commit the run's latest real start found ``revision`` of ``repo_id`` to name (the ledger's
    ``revisions``); None without a run folder, a ledger or that revision in it. A ledger that cannot be read is
    read as none here: the start that follows says so (:func:`read_whole_ledger`)."""
    if run_folder is None:
        return None
    try:
        return read_whole_ledger(run_folder)["revisions"].get(revision_key(repo_type, repo_id, revision))
    except ConfigError:
        return None


def snapshot_folder(snapshot: dict) -> str:
    return os.path.join(hub.repo_folder(snapshot["repo"]), "snapshots", snapshot["commit"])


def repo_refs(repo_id: str) -> dict[str, str]:
    """Revision → what its ``refs/<revision>`` names, for every ref of the model ``repo_id`` in the HF cache now
    (a branch with ``/`` in its name included); empty without a ``refs/`` folder."""
    refs = Path(hub.repo_folder(repo_id)) / "refs"
    named = {}
    for ref in refs.rglob("*") if refs.is_dir() else ():
        if ref.is_file() and not ref.is_symlink():
            try:
                named[ref.relative_to(refs).as_posix()] = ref.read_text(encoding="utf-8").strip()
            except (OSError, ValueError):
                pass
    return named


def judged_offline(entry: dict) -> bool:
    """Whether a start that could not download judged the entry's snapshot absent (an entry without the field,
    written by an earlier ctxvar, counts as such: judged again rather than taken for the run's)."""
    return not entry[BEFORE] and entry.get(OFFLINE, True)


def record_cache_ledger(run_folder, models: dict[str, dict], datasets: list[dict] = ()) -> None:
    """At the start of a real run, before any job: judge each Hub snapshot of ``models`` not judged for good yet
    (see the module's docstring: in the HF cache now, or absent and whether this start could download; one found
    there after a start that could not download found it absent is the user's), and record
    the commit each Hub revision of ``models`` and of ``datasets`` (``{"repo", "revision", "commit"}``, the
    corpus's: :func:`ctxvar.run.inputs.hub_datasets`) names, and, for a model revision and each ref of a Hub
    model's repo (:func:`repo_refs`) seen for the first time, what its ref names now. Writes nothing into the HF
    cache."""
    ledger = read_whole_ledger(run_folder)
    snapshots, revisions, refs = ({**ledger[section]} for section in SECTIONS)
    could_download = functools.cache(lambda: hub.unavailable_reason() is None)  # asked once, and only if needed
    for snapshot in hub_snapshots(models).values():
        if snapshot["commit"] is None:
            continue
        key, named = snapshot_key(snapshot), revision_key("model", snapshot["repo"], snapshot["revision"])
        current = repo_refs(snapshot["repo"])
        if not hub.COMMIT.fullmatch(snapshot["revision"]):
            revisions[named] = snapshot["commit"]
            refs.setdefault(named, current.get(snapshot["revision"]))  # None: the revision has no ref yet
        for revision, commit in current.items():  # the user's refs the config does not name
            refs.setdefault(revision_key("model", snapshot["repo"], revision), commit)
        present, known = os.path.lexists(snapshot_folder(snapshot)), snapshots.get(key)
        if known is not None and (known[BEFORE] or (present and not judged_offline(known))):
            continue  # the user's, or there since a start that could download found it absent: the run's
        verdict = {BEFORE: present, OFFLINE: not present and not could_download()}
        snapshots[key] = {**snapshot, "cache": str(cache_folder()), **verdict}
    for dataset in datasets:
        if dataset["commit"] is not None and not hub.COMMIT.fullmatch(dataset["revision"]):
            revisions[revision_key("dataset", dataset["repo"], dataset["revision"])] = dataset["commit"]
    whole = {"snapshots": snapshots, "revisions": revisions, "refs": refs}
    if whole != ledger:
        os.makedirs(run_folder, exist_ok=True)
        write_json(whole, ledger_path(run_folder))


def kept_because(snapshot: dict, run_folder) -> str | None:
    """Why the snapshot stays in the cache whatever the ledger says of it; None when the run downloaded it."""
    if not (isinstance(snapshot["commit"], str) and hub.COMMIT.fullmatch(snapshot["commit"])):
        return "the commit its revision names was not known at start-up: kept"
    entry = read_ledger(run_folder).get(snapshot_key(snapshot))
    if entry is None:
        return f"not in the run's ledger ({ledger_path(run_folder)}): kept"
    if entry[BEFORE]:
        return "in the HF cache before the run's first start (the user's): kept"
    if judged_offline(entry):
        return (
            "absent when judged by a start that could not download (HF_HUB_OFFLINE set or the Hub unreachable), "
            "so what is there is the user's until a start that can download finds it absent: kept"
        )
    if entry.get("cache", str(cache_folder())) != str(cache_folder()):  # HF_HUB_CACHE changed, or set by the job
        return f"the ledger judged another HF cache ({entry['cache']}), not this job's ({cache_folder()}): kept"
    return None


def release_snapshot(model: str, snapshot: dict, run_folder, record_path) -> dict:
    """Remove the model's snapshot from the HF cache if the run's ledger says the run downloaded it
    (:func:`remove_snapshot`), settle the refs that name it (:func:`settle_refs`), and write what was removed, the
    bytes freed, the refs changed (revision → the commit it names now, None: removed) and why to ``record_path``;
    returns that record. Releases of one run go one at a time (a lock on its ledger): two at once would each keep
    the blobs the other's snapshot links to."""
    reason = kept_because(snapshot, run_folder)
    removed, freed, refs = [], 0, {}
    if reason is None:
        with open(ledger_path(run_folder), "rb") as ledger:
            fcntl.flock(ledger, fcntl.LOCK_EX)
            reason = linked_into(snapshot["repo"], snapshot["commit"])
            if reason is None:
                removed, freed = remove_snapshot(snapshot["repo"], snapshot["commit"])
                refs = settle_refs(snapshot["repo"], snapshot["commit"], read_whole_ledger(run_folder)["refs"])
        if reason is None:
            reason = "downloaded by the run: removed" if removed else "downloaded by the run, not in the HF cache now"
    record = {"model": model, **snapshot, "cache": str(cache_folder())}
    record.update(removed=removed, bytes_freed=freed, refs=refs, why=reason)
    what = f"{snapshot['repo']} {snapshot['revision']}, commit {snapshot['commit']}"
    log.info("%s (%s): %s, %d bytes freed", model, what, reason, freed)
    write_json(record, record_path)
    return record


def cache_folder() -> Path:
    """The HF cache (``HF_HUB_CACHE`` as set now) as huggingface_hub's cache tools name it: links resolved."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser().resolve()


def canonical(path) -> Path:
    """``path`` absolute, with the links among the folders above it resolved and its own name kept (a link stays
    the link it is): two names of one file through linked folders become one."""
    path = Path(os.path.abspath(path))
    return Path(os.path.realpath(path.parent)) / path.name


def link_chain(entry: Path) -> list[Path]:
    """The files ``entry`` goes through to its content, each :func:`canonical`: itself, then the target of each
    link in turn (a snapshot's entry, the repo's ``blobs/<etag>``, a blob of huggingface_hub's cache-wide store)."""
    chain = [canonical(entry)]
    while chain[-1].is_symlink() and len(chain) <= 40:  # 40: the kernel's own bound on a chain of links
        chain.append(canonical(chain[-1].parent / os.readlink(chain[-1])))
    return chain


def entries(snapshot: Path) -> list[Path]:
    """The files and links of ``snapshot`` (links to folders not followed)."""
    return [
        Path(folder) / name
        for folder, folders, files in os.walk(snapshot)
        for name in files + [name for name in folders if os.path.islink(os.path.join(folder, name))]
    ]


def others_reach(repo: Path, commit: str) -> set[Path]:
    """Every file the links of the repo's snapshots other than ``commit``'s go through or end at."""
    folders = [path for path in (repo / "snapshots").iterdir() if path.name != commit and path.is_dir()]
    return {path for folder in folders for entry in entries(folder) for path in link_chain(entry)}


def linked_into(repo_id: str, commit: str) -> str | None:
    """Why the snapshot must stay whole: a link to it rather than to a blob (``snapshots/<commit>`` itself a link,
    or another snapshot of the repo linking into it); None when nothing does."""
    snapshot = Path(hub.repo_folder(repo_id, cache=cache_folder())) / "snapshots" / commit
    if snapshot.is_symlink():
        return f"snapshots/{commit} is a link, not a download's folder: kept"
    if not snapshot.is_dir():
        return None
    inside = Path(os.path.realpath(snapshot))
    if any(path == inside or inside in path.parents for path in others_reach(snapshot.parent.parent, commit)):
        return "another snapshot of the repo links to files in it: kept"
    return None


def remove_snapshot(repo_id: str, commit: str) -> tuple[list[str], int]:
    """Remove ``snapshots/<commit>`` of ``repo_id`` from the HF cache, and the blobs of its weight files
    (:data:`WEIGHT_SUFFIXES`) that no other snapshot of the repo reaches, as ``scan_cache_dir().delete_revisions(
    commit)`` would for those; refs are left to :func:`settle_refs`. A blob is a file of the repo's ``blobs/``
    folder, the first link of an entry's chain (:func:`link_chain`); it stays when any link of another snapshot
    goes through it or ends at the file behind it, paths compared resolved. A link to any other file (outside the
    cache, or of another repo) is removed with the snapshot, and the file it names stays; a snapshot without links
    (files copied in, where the file system has none) loses its own files. Returns the paths removed, relative to
    the cache as the repo names them, and the bytes freed: the sizes of the files behind them that are gone
    afterwards (a blob of the cache-wide store that another repo links to stays; a file with hard links elsewhere,
    whose data stays, counts nothing). Nothing to remove, ``([], 0)``, when the snapshot is not there."""
    from huggingface_hub import DeleteCacheStrategy

    cache = cache_folder()
    repo = Path(hub.repo_folder(repo_id, cache=cache))
    snapshot = repo / "snapshots" / commit
    if not snapshot.is_dir():
        return [], 0
    reached = others_reach(repo, commit)
    blobs_folder = Path(os.path.realpath(repo / "blobs"))
    chains = [link_chain(entry) for entry in entries(snapshot)]
    # Only the repo's own blobs/ (a link to a file elsewhere, outside the cache or another repo's, loses the link
    # alone), and only the weights': a download of another revision links a blob it finds already there without
    # huggingface_hub's lock, so a small file revisions share (a tokenizer's) could lose its blob under it.
    blobs = {
        chain[1]
        for chain in chains
        if len(chain) > 1
        and chain[0].name.endswith(WEIGHT_SUFFIXES)
        and chain[1].parent == blobs_folder
        and chain[1] not in reached
        and Path(os.path.realpath(chain[1])) not in reached
    }
    inside = Path(os.path.realpath(snapshot))
    files = {}  # (device, inode) → [size, hard links, the real paths of it that go]: freed once all its links go
    for path in blobs | {path for chain in chains for path in chain if inside in path.parents}:
        try:
            status = os.stat(path)
        except OSError:  # a broken link: nothing behind it to free
            continue
        files.setdefault((status.st_dev, status.st_ino), [status.st_size, status.st_nlink, set()])[2].add(
            os.path.realpath(path)
        )
    going = [(size, paths) for size, links, paths in files.values() if len(paths) >= links]
    fields = {field.name for field in dataclasses.fields(DeleteCacheStrategy)}
    DeleteCacheStrategy(
        expected_freed_size=sum(size for size, _ in going),
        blobs=frozenset(blobs),
        refs=frozenset(),
        repos=frozenset(),
        snapshots=frozenset({snapshot}),
        **({"cache_dir": cache} if "cache_dir" in fields else {}),  # huggingface_hub's cache-wide store, if any
    ).execute()
    named = {snapshot: f"{repo.name}/snapshots/{commit}", **{blob: f"{repo.name}/blobs/{blob.name}" for blob in blobs}}
    removed = [named[path] for path in [snapshot, *sorted(blobs)] if not os.path.lexists(path)]
    return removed, sum(size for size, paths in going if not any(map(os.path.lexists, paths)))


def settle_refs(repo_id: str, commit: str, refs_before: dict[str, str | None]) -> dict[str, str | None]:
    """Once ``snapshots/<commit>`` of ``repo_id`` is not in the HF cache: each of the repo's ``refs/<revision>``
    that names ``commit`` is put back to what it named at the first real start that saw it (``refs_before``, the
    ledger's ``refs``) if that is another commit whose snapshot is in the cache, else removed. Returns revision →
    the commit its ref names now (None: removed); nothing while the snapshot is there."""
    repo = Path(hub.repo_folder(repo_id, cache=cache_folder()))
    refs = repo / "refs"
    if os.path.lexists(repo / "snapshots" / commit) or not refs.is_dir():
        return {}
    settled = {}
    for revision, named in sorted(repo_refs(repo_id).items()):
        if named != commit:
            continue
        ref = refs / revision
        before = refs_before.get(revision_key("model", repo_id, revision))
        if before and hub.COMMIT.fullmatch(before) and before != commit and (repo / "snapshots" / before).is_dir():
            ref.write_text(before, encoding="utf-8")  # as huggingface_hub writes a ref: the commit alone, in place
            settled[revision] = before
        else:
            ref.unlink()
            settled[revision] = None
    return settled
