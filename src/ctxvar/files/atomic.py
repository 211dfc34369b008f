"""Atomic, checksummed output files, and readers that verify every byte they read.

Every output is written to a temporary file in the destination folder and then
renamed, so a killed job never leaves a file that looks complete.

Integrity:

- **Parquet**: every column's values carry a digest, checked on every read (:mod:`ctxvar.files.parquet`).
- **CSV, JSON, text**: a ``<file>.sha256`` beside the file, in ``sha256sum`` format
  (``sha256sum -c layers.csv.sha256`` checks it by hand), verified by :func:`read_csv`
  and :func:`read_json`.
- **Directories** (locally built and unpacked models): a ``SHA256SUMS`` manifest of
  every file, written by :func:`atomic_directory` and verified by :func:`verify_manifest`.

A file that fails a check raises :class:`~ctxvar.errors.IntegrityError`, one line
naming the file and the remedy (delete it and re-run: Snakemake rebuilds it).

Importing this module imports no pandas (:func:`read_csv` does): every job imports it, and one that reads no
CSV and makes no pyarrow array (which imports pandas), such as building a model, saves 0.6 s of CPU.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from ctxvar.errors import IntegrityError, first_line

if TYPE_CHECKING:
    import pandas as pd

CHECKSUM_SUFFIX = ".sha256"
MANIFEST = "SHA256SUMS"
REMEDY = "delete it and re-run (Snakemake rebuilds it)"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    Temporary files that a killed earlier attempt left for the same ``path`` are removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results should be as readable as any new file
        os.replace(tmp, path)
        for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            stale.unlink(missing_ok=True)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def use_system_allocator() -> None:
    """Give Arrow buffers back to the OS as soon as they are freed.

    Arrow's default jemalloc pool keeps freed row-group buffers: computing layers.csv
    from a 25k-type, d = 768 merge peaked at 1.4 GB for 154 MB layers; with the
    system allocator, 0.9 GB. Every job calls this (see jobs.job_log).
    """
    pa.set_memory_pool(pa.system_memory_pool())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- CSV, JSON and text, with a .sha256 beside each -----------------------------------------------------------


def write_text(text: str, path) -> None:
    """Write ``text`` (UTF-8) atomically, then its ``.sha256`` beside it."""
    data = text.encode()
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    with atomic_path(f"{path}{CHECKSUM_SUFFIX}") as tmp:
        tmp.write_text(f"{hashlib.sha256(data).hexdigest()}  {Path(path).name}\n")


def read_verified(path) -> bytes:
    """The bytes of a file written by :func:`write_text`, checked against its ``.sha256``."""
    try:
        data = Path(path).read_bytes()
        expected = Path(f"{path}{CHECKSUM_SUFFIX}").read_text().split()[0]
    except (OSError, UnicodeDecodeError, IndexError) as error:
        raise IntegrityError(
            f"{path}: cannot be read with its checksum file {Path(path).name}{CHECKSUM_SUFFIX} "
            f"({first_line(error)}); {REMEDY}"
        ) from error
    if hashlib.sha256(data).hexdigest() != expected:
        raise IntegrityError(
            f"{path}: checksum mismatch with {Path(path).name}{CHECKSUM_SUFFIX} (the file is corrupt "
            f"or was edited); {REMEDY}"
        )
    return data


def write_csv(frame: pd.DataFrame, path) -> None:
    write_text(frame.to_csv(index=False), path)


def read_csv(path, **options) -> pd.DataFrame:
    """A CSV written by :func:`write_csv`, verified."""
    import pandas as pd

    return pd.read_csv(io.BytesIO(read_verified(path)), **options)


def write_json(obj, path) -> None:
    write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", path)


def read_json(path):
    """A JSON file written by :func:`write_json`, verified."""
    return json.loads(read_verified(path))


# --- directories ----------------------------------------------------------------------------------------------


def file_sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(directory) -> None:
    """``directory/SHA256SUMS``: the SHA-256 of every file below ``directory`` (``sha256sum -c`` format)."""
    directory = Path(directory)
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST)
    lines = [f"{file_sha256(p)}  {p.relative_to(directory).as_posix()}\n" for p in files]
    (directory / MANIFEST).write_text("".join(lines))


@contextlib.contextmanager
def atomic_directory(path) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success write its ``SHA256SUMS`` and rename it onto ``path``.

    ``path`` appears only when complete; folders a killed earlier attempt left for it are removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        write_manifest(tmp)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def verify_manifest(directory, made_by_run: bool = True, names=None) -> None:
    """Check every file listed in ``directory/SHA256SUMS`` (or, given ``names``, those of them a job reads, as paths
    relative to ``directory``); nothing to check without one. ``made_by_run``: the run built or unpacked
    ``directory`` (so deleting it rebuilds it); else it is the user's own folder."""
    manifest = Path(directory) / MANIFEST
    if not manifest.is_file():
        return
    for line in manifest.read_text().splitlines():
        expected, _, name = line.partition("  ")
        if names is not None and name not in names:
            continue
        path = Path(directory) / name
        if not path.is_file() or file_sha256(path) != expected:
            state = "is missing" if not path.is_file() else "does not match its SHA-256 in " + MANIFEST
            remedy = (
                f"(the directory is damaged); delete {directory} and re-run: Snakemake builds it again"
                if made_by_run
                else f"(the folder changed since its {MANIFEST} was written); restore the file, or if the change is "
                f"meant, write {MANIFEST} anew (sha256sum of every file) so that it lists the files as they are"
            )
            raise IntegrityError(f"{path}: {state} {remedy}")
