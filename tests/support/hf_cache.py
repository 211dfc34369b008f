"""A Hugging Face cache made by hand, laid out as huggingface_hub lays it out: ``models--org--name/`` holding
``blobs/<sha256>`` (one file per content, so revisions with a file in common share its blob), ``snapshots/<commit>/``
of relative links into them, and ``refs/<revision>`` naming a commit; or, where the file system has no links, the
files copied into the snapshot and no blobs. With what checks it the way a user of the cache would:
huggingface_hub's ``scan_cache_dir`` and offline downloads."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote


def repo_folder(cache, repo_id: str) -> Path:
    return Path(cache) / f"models--{repo_id.replace('/', '--')}"


def add_ref(cache, repo_id: str, revision: str, commit: str) -> None:
    """``refs/<revision>`` naming ``commit``, as huggingface_hub writes it on a download by that revision's name."""
    ref = repo_folder(cache, repo_id) / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)


def add_snapshot(cache, repo_id: str, commit: str, folder, revision: str | None = None, links="relative") -> Path:
    """``folder``'s files as the snapshot ``commit`` of ``repo_id`` (as a download of that commit leaves them), and
    ``refs/<revision>`` naming it if ``revision`` is given; returns the snapshot's folder. ``links``: ``"relative"``
    (huggingface_hub's), ``"absolute"`` (each link names its blob by its path through ``cache`` as given, links and
    all), ``"resolved"`` (by its path with every link resolved), or None: the files copied in, no blobs (a file
    system without links). Files already in the snapshot
    stay (a snapshot partly there gets the rest)."""
    repo = repo_folder(cache, repo_id)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for path in sorted(Path(folder).rglob("*")):
        entry = snapshot / path.relative_to(folder)
        if path.is_dir() or os.path.lexists(entry):
            continue
        entry.parent.mkdir(parents=True, exist_ok=True)
        if links is None:
            shutil.copyfile(path, entry)
            continue
        blob = repo / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copyfile(path, blob)
        targets = {"relative": os.path.relpath(blob, entry.parent), "absolute": os.path.abspath(blob)}
        entry.symlink_to(targets.get(links) or os.path.realpath(blob))
    if revision is not None:
        add_ref(cache, repo_id, revision, commit)
    return snapshot


def blobs_of(snapshot) -> set[Path]:
    """The blobs ``snapshot``'s links point to."""
    return {Path(os.path.realpath(link)) for link in Path(snapshot).rglob("*") if link.is_symlink()}


def cache_tree(cache) -> dict[str, str | bytes]:
    """Every path under ``cache`` (relative) → a link's target, a file's bytes, or ``"folder"``: the cache as it
    is, to compare before and after."""
    tree = {}
    for folder, folders, files in os.walk(cache):
        for name in folders + files:
            path = os.path.join(folder, name)
            key = os.path.relpath(path, cache)
            if os.path.islink(path):
                tree[key] = f"-> {os.readlink(path)}"
            elif os.path.isdir(path):
                tree[key] = "folder"
            else:
                tree[key] = Path(path).read_bytes()
    return tree


def scan_warnings(cache) -> list[str]:
    """What huggingface_hub's ``scan_cache_dir`` finds wrong with the cache (a repo it skips as corrupted: a ref
    naming a snapshot that is not there, a snapshot without its repo's blobs folder, …); empty for a sound one."""
    from huggingface_hub import scan_cache_dir

    return [str(warning) for warning in scan_cache_dir(cache).warnings]


def loads_offline(cache, repo_id: str, revision: str, folder) -> bool:
    """Whether each file of ``folder`` comes out of the cache offline, by ``revision`` (a branch or tag through its
    ref, or a commit), with ``folder``'s bytes: what ``from_pretrained(…, local_files_only=True)`` reads. A file the
    cache cannot serve raises huggingface_hub's error, which says why."""
    from huggingface_hub import hf_hub_download

    for path in sorted(Path(folder).rglob("*")):
        if path.is_dir():
            continue
        name = path.relative_to(folder).as_posix()
        got = hf_hub_download(repo_id, name, revision=revision, cache_dir=cache, local_files_only=True)
        if Path(got).read_bytes() != path.read_bytes():
            return False
    return True


@contextlib.contextmanager
def hub_naming(commits: dict[str, str]) -> Iterator[str]:
    """A Hub on this machine (its endpoint, for ``HF_ENDPOINT``, while the block runs) that can be reached and
    answers what a start asks of it: the commit each revision of ``commits`` names (``/api/models/<repo>/revision/
    <revision>``); anything else, 404. Nothing can be downloaded from it."""

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            repo, _, revision = self.path.split("?")[0].removeprefix("/api/models/").partition("/revision/")
            commit = commits.get(unquote(revision))
            body = json.dumps({"id": repo, "sha": commit} if commit else {"error": "not found"}).encode()
            self.send_response(200 if commit else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
