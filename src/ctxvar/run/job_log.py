"""The job log every workflow script runs in: logging and stderr to the job's log file, one console line per
error or warning."""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

from ctxvar.errors import CtxvarError
from ctxvar.files.atomic import use_system_allocator
from ctxvar.files.space import full_disk_named


@contextlib.contextmanager
def job_log(path):
    """Send logging and stderr (progress bars included) to ``path``; use the system allocator for Arrow.

    Warnings also go to the console's stderr as one line each (what Snakemake shows or, on a cluster, the job's
    log). A :class:`CtxvarError` goes to the console's stderr as one line, with its notes (what the job was doing),
    and the job exits with status 1; the job log gets that line with the full traceback, causes included. Any other
    exception (a bug) is logged with its traceback too, then propagates; a full disk is one line naming the folder
    and its free space (:func:`ctxvar.files.space.disk_full`, :func:`~ctxvar.files.space.full_disk_error`), not a
    bug.
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
            where = "".join(f"{note}; " for note in getattr(error, "__notes__", ()))  # e.g. the figure drawn
            print(f"ctxvar error: {error} ({where}traceback in {path})", file=console)
            raise SystemExit(1) from None  # the traceback is in the log; the console gets one line
        except Exception:
            logging.exception("unexpected error (a bug: please report it with this log)")
            raise
        finally:
            sys.stderr = console
            logging.getLogger().removeHandler(echo)
