"""A Hugging Face cache made by hand, laid out as huggingface_hub lays it out: ``models--org--name/`` holding
``blobs/<sha256>`` (one file per content, so revisions with a file in common share its blob), ``snapshots/<commit>/``
of relative links into them, and ``refs/<revision>`` naming a commit."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def repo_folder(cache, repo_id: str) -> Path:
    return Path(cache) / f"models--{repo_id.replace('/', '--')}"


def add_ref(cache, repo_id: str, revision: str, commit: str) -> None:
    """``refs/<revision>`` naming ``commit``, as an online start writes it before the commit is downloaded."""
    ref = repo_folder(cache, repo_id) / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)


def add_snapshot(cache, repo_id: str, commit: str, folder, revision: str | None = None) -> Path:
    """``folder``'s files as the snapshot ``commit`` of ``repo_id`` (as a download of that commit leaves them), and
    ``refs/<revision>`` naming it if ``revision`` is given; returns the snapshot's folder."""
    repo = repo_folder(cache, repo_id)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for path in sorted(Path(folder).rglob("*")):
        if path.is_dir():
            continue
        blob = repo / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copyfile(path, blob)
        link = snapshot / path.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if revision is not None:
        add_ref(cache, repo_id, revision, commit)
    return snapshot


def blobs_of(snapshot) -> set[Path]:
    """The blobs ``snapshot``'s links point to."""
    return {Path(os.path.realpath(link)) for link in Path(snapshot).rglob("*") if link.is_symlink()}
