"""What identifies the files of a local model directory, so that results follow the weights in it."""

from __future__ import annotations

import hashlib
import os


def directory_fingerprint(directory: str) -> str | None:
    """SHA-256 over ``relative path, size, mtime_ns, ctime_ns`` of every file under ``directory`` (hidden ones
    such as ``.git`` aside; links followed), sorted by path; None if ``directory`` is not a directory.

    Any write to a file changes its ctime, which no copy tool can set back (``cp -p`` and
    ``rsync -a`` restore mtime only), so weights changed in place change the fingerprint.
    Reading the metadata costs microseconds per file; hashing the contents would cost
    seconds per GB at every start of Snakemake.
    """
    if not os.path.isdir(directory):
        return None
    entries = []
    for root, folders, files in os.walk(directory, followlinks=True):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory)
            try:
                status = os.stat(path)
            except OSError:  # a broken link: extraction names it
                entries.append(f"{relative}\0unreadable")
                continue
            entries.append(f"{relative}\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ctime_ns}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()
