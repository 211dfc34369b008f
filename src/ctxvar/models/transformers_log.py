"""transformers' own messages (loading reports, remarks on a config) into the job log, not the console."""

from __future__ import annotations

import contextlib
import logging

log = logging.getLogger(__name__)


class _IntoLog(logging.Handler):
    """Re-logs a record of another library as an INFO line of this module's logger: the job log, not the console."""

    def emit(self, record: logging.LogRecord) -> None:
        log.info("%s: %s", record.name, record.getMessage())


@contextlib.contextmanager
def transformers_into_log():
    """transformers' messages (its loading report, a table of every key) go to the job log during the block,
    instead of the console; the caller reads the report itself and stops on what matters."""
    library = logging.getLogger("transformers")
    handlers, propagate = library.handlers[:], library.propagate
    library.handlers, library.propagate = [_IntoLog()], False
    try:
        yield
    finally:
        library.handlers, library.propagate = handlers, propagate
