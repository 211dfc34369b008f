"""Free disk space: a job's check before it writes, a full disk named in one line, and outputs removed when a
job fails half-way."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil

from ctxvar.errors import CtxvarError, DiskSpaceError, first_line, size_text

FULL_DISK = (errno.ENOSPC, errno.EDQUOT)
FULL_DISK_REMEDY = (
    "free space on the results disk, or run in a folder on a larger one (snakemake --directory DIR), then run the "
    "same command again: finished jobs are kept"
)
SKIP_DISK_CHECK = "CTXVAR_SKIP_DISK_CHECK"  # =1: no up-front check (the estimates are upper bounds)


def nearest_existing(folder) -> str:
    """``folder`` as an absolute path if it exists, else its nearest existing parent."""
    existing = os.path.abspath(folder)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    return existing


def free_bytes(folder) -> int:
    """Free bytes on the disk that holds ``folder``, or its nearest existing parent."""
    return shutil.disk_usage(nearest_existing(folder)).free


def disk_check_skipped() -> bool:
    """Whether ``CTXVAR_SKIP_DISK_CHECK=1`` turns the up-front free-space checks off (their estimates are upper
    bounds)."""
    return os.environ.get(SKIP_DISK_CHECK) == "1"


def require_free_space(folder, needed: int, what: str) -> None:
    """Raise :class:`DiskSpaceError` (one line: the folder, ``needed`` and the free bytes, the remedy) when the disk
    that holds ``folder`` (or its nearest existing parent) has fewer than ``needed`` bytes free; ``what``: the
    outputs, as the line names them. ``CTXVAR_SKIP_DISK_CHECK=1`` skips the check."""
    if disk_check_skipped():
        return
    free = free_bytes(folder)
    if needed > free:
        raise DiskSpaceError(
            f"disk: {what} in {os.path.abspath(folder)} need up to {size_text(needed)} ({needed} bytes) but its disk "
            f"has {size_text(free)} ({free} bytes) free; {FULL_DISK_REMEDY} ({SKIP_DISK_CHECK}=1 skips this "
            "upper-bound check)"
        )


@contextlib.contextmanager
def removed_on_failure(paths):
    """Remove each of ``paths`` that exists when the block raises: a job that fails half-way leaves none of its
    outputs, the complete ones included, so that no later step reads a set of them made by a failed job."""
    try:
        yield
    except BaseException:
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        raise


# How a full disk reads in the message of an error that is not an OSError (safetensors' SafetensorError, from Rust).
FULL_DISK_MESSAGES = ("No space left on device", "Disk quota exceeded", "os error 28)", "os error 122)")


def disk_full(error: BaseException) -> bool:
    """Whether ``error`` or one of its causes says the disk (or the user's quota) is full: an ``OSError`` of
    ENOSPC or EDQUOT, or any error whose message says so (Arrow's writers raise an ``OSError`` without errno;
    safetensors a ``SafetensorError`` that is no ``OSError``)."""
    while error is not None:
        if (isinstance(error, OSError) and error.errno in FULL_DISK) or any(
            text in str(error) for text in FULL_DISK_MESSAGES
        ):
            return True
        error = error.__cause__ or error.__context__
    return False


def written_folder(error: BaseException) -> str:
    """The folder of the file that the full-disk ``error`` (or a cause) names, else the working directory."""
    while error is not None:
        if isinstance(error, OSError) and isinstance(error.filename, str):
            return os.path.dirname(os.path.abspath(error.filename))
        error = error.__cause__ or error.__context__
    return os.getcwd()


def full_disk_error(error: BaseException, folder=None, needed: int | None = None, what: str = "") -> DiskSpaceError:
    """One line for a write that a full disk stopped: the folder (``folder``, else :func:`written_folder`), the
    bytes ``what`` needs there when known, the free bytes left, the library's words and the remedy."""
    folder = os.path.abspath(folder) if folder else written_folder(error)
    free = free_bytes(folder)
    need = f"; {what} need about {size_text(needed)} ({needed} bytes) there" if needed else ""
    return DiskSpaceError(
        f"disk full while this job wrote its outputs in {folder} ({first_line(error)}){need}; its disk has "
        f"{size_text(free)} "
        f"({free} bytes) free now; {FULL_DISK_REMEDY}"
    )


@contextlib.contextmanager
def full_disk_named(folder=None, needed: int | None = None, what: str = ""):
    """Within the block, an error that says the disk is full (:func:`disk_full`) becomes the one-line
    :class:`DiskSpaceError` of :func:`full_disk_error`; every other error passes unchanged."""
    try:
        yield
    except CtxvarError:
        raise
    except Exception as error:
        if not disk_full(error):
            raise
        raise full_disk_error(error, folder, needed, what) from error
