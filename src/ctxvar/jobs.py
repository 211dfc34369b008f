"""What every workflow script shares: a job log, one-line errors for the user, and a job's free-space check."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import sys
from pathlib import Path

from ctxvar.errors import CtxvarError, DiskSpaceError, first_line, size_text
from ctxvar.io import use_system_allocator

FULL_DISK = (errno.ENOSPC, errno.EDQUOT)
FULL_DISK_REMEDY = (
    "free space on the results disk, or run in a folder on a larger one (snakemake --directory DIR), then run the "
    "same command again: finished jobs are kept"
)
SKIP_DISK_CHECK = "CTXVAR_SKIP_DISK_CHECK"  # =1: no up-front check (the estimates are upper bounds)


def free_bytes(folder) -> int:
    """Free bytes on the disk that holds ``folder``, or its nearest existing parent."""
    existing = os.path.abspath(folder)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    return shutil.disk_usage(existing).free


def require_free_space(folder, needed: int, what: str) -> None:
    """Raise :class:`DiskSpaceError` (one line: the folder, ``needed`` and the free bytes, the remedy) when the disk
    that holds ``folder`` (or its nearest existing parent) has fewer than ``needed`` bytes free; ``what``: the
    outputs, as the line names them. ``CTXVAR_SKIP_DISK_CHECK=1`` skips the check."""
    if os.environ.get(SKIP_DISK_CHECK) == "1":
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


@contextlib.contextmanager
def job_log(path):
    """Send logging and stderr (progress bars included) to ``path``; use the system allocator for Arrow.

    Warnings also go to the console's stderr as one line each (what Snakemake shows
    or, on a cluster, the job's log). A :class:`CtxvarError` goes to the console's
    stderr as one line, and the job exits with status 1; the job log gets that line
    with the full traceback, causes included. Any other exception (a bug) is logged
    with its traceback too, then propagates; a full disk is one line naming the folder and its free space
    (:func:`disk_full`, :func:`full_disk_error`), not a bug.
    """
    console = sys.stderr
    use_system_allocator()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        sys.stderr = handle
        logging.basicConfig(
            stream=handle, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
        )
        echo = logging.StreamHandler(console)
        echo.addFilter(lambda record: record.levelno == logging.WARNING)  # errors get their own line below
        echo.setFormatter(logging.Formatter("ctxvar warning: %(message)s"))
        logging.getLogger().addHandler(echo)
        try:
            with full_disk_named():
                yield
        except CtxvarError as error:
            logging.exception("%s", error)
            print(f"ctxvar error: {error} (traceback in {path})", file=console)
            raise SystemExit(1) from None  # the traceback is in the log; the console gets one line
        except Exception:
            logging.exception("unexpected error (a bug: please report it with this log)")
            raise
        finally:
            sys.stderr = console
            logging.getLogger().removeHandler(echo)
