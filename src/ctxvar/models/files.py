"""What identifies the files a run reads from outside its config, so that results follow them.

A fingerprint is taken at every start of Snakemake and enters the parameters of the jobs that read the
files (and the hash their sums carry), so that a file changed in place re-runs exactly those jobs and
everything downstream, as a changed config value does.
"""

from __future__ import annotations

import hashlib
import os


def _stat_entry(path: str, relative: str) -> str:
    try:
        status = os.stat(path)
    except OSError:  # a broken link: the job that reads it names it
        return f"{relative}\0unreadable"
    return f"{relative}\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ctime_ns}"


def file_fingerprint(path: str) -> str | None:
    """SHA-256 over ``size, mtime_ns, ctime_ns`` of the file ``path`` (links followed); None if it is no file.

    Any write to a file changes its ctime, which no copy tool can set back (``cp -p`` and ``rsync -a``
    restore mtime only), so a file edited or replaced in place changes the fingerprint. Reading the
    metadata costs microseconds; hashing the contents would cost seconds per GB at every start of Snakemake.
    """
    if not os.path.isfile(path):
        return None
    return hashlib.sha256(_stat_entry(path, os.path.basename(path)).encode()).hexdigest()


def directory_fingerprint(directory: str) -> str | None:
    """SHA-256 over ``relative path, size, mtime_ns, ctime_ns`` of every file under ``directory`` (hidden ones
    such as ``.git`` aside; links followed, each folder entered once, so that a link to a folder above it
    ends rather than loops), sorted by path; None if ``directory`` is not a directory.
    See :func:`file_fingerprint` for why metadata rather than contents."""
    if not os.path.isdir(directory):
        return None
    entries, entered = [], {os.path.realpath(directory)}
    for root, folders, files in os.walk(directory, followlinks=True):
        shown = (f for f in sorted(folders) if not f.startswith("."))
        folders[:] = [f for f in shown if first_visit(os.path.join(root, f), entered)]
        for name in sorted(f for f in files if not f.startswith(".")):
            path = os.path.join(root, name)
            entries.append(_stat_entry(path, os.path.relpath(path, directory)))
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def first_visit(folder: str, entered: set[str]) -> bool:
    """Whether ``folder`` (links resolved) is not in ``entered`` yet; adds it."""
    real = os.path.realpath(folder)
    if real in entered:
        return False
    entered.add(real)
    return True
