"""What a run prints while its jobs run: a progress line every tenth of the jobs, warnings and errors, not
Snakemake's block per job.

Snakemake's own ``--quiet`` choices cannot say this: ``rules`` also drops the "Error in rule" records from its log
file (which :mod:`ctxvar.run.end` reads for the closing lines) and the job blocks of a dry run, and ``progress``
drops the job table of a dry run and every progress line. So the Snakefile's ``onstart:`` (real runs only) adds
:class:`JobLinesFilter` to Snakemake's console handler alone, on a local run: its log file keeps every record, a
dry run prints what it always printed, a cluster run keeps the block that names each job's cluster job id, and
``--no-hooks`` gives Snakemake's full output back.

A dry run runs no hooks, so the cost plan it prints before its list of jobs is printed again after it by
:func:`repeat_after_dry_run`.
"""

from __future__ import annotations

import atexit
import logging
import sys

from snakemake.settings.enums import Quietness
from snakemake_interface_logger_plugins.common import LogEvent

SNAKEMAKE_LOGGER = "snakemake.logging"
CONSOLE_HANDLER = "DefaultStreamHandler"  # the name Snakemake gives its console handler
PER_JOB_EVENTS = {LogEvent.JOB_INFO, LogEvent.GROUP_INFO, LogEvent.JOB_STARTED, LogEvent.JOB_FINISHED}
PER_JOB_MESSAGES = {"Select jobs to execute..."}
PROGRESS_STEPS = 10  # progress lines per run: one each time another tenth of the jobs is done


class JobLinesFilter(logging.Filter):
    """Drops Snakemake's per-job records (the job's block, "Execute n jobs...", "Finished jobid", "Select jobs to
    execute...", and those it marks as of a rule's quietness: "Removing temporary output ...") and keeps a progress
    line only when the share of jobs done reaches another 1/PROGRESS_STEPS (so the last, "n of n steps (100%)
    done", always); every other record passes."""

    def __init__(self):
        super().__init__()
        self.shown_step = -1

    def filter(self, record: logging.LogRecord) -> bool:
        event = getattr(record, "event", None)
        if event in PER_JOB_EVENTS or (event is None and record.msg in PER_JOB_MESSAGES):
            return False
        if getattr(record, "quietness", None) == Quietness.RULES:
            return False
        if event == LogEvent.PROGRESS:
            done, total = getattr(record, "done", 0), getattr(record, "total", 0)
            step = PROGRESS_STEPS * done // total if total else PROGRESS_STEPS
            if step <= self.shown_step:
                return False
            self.shown_step = step
        return True


def quiet_job_lines() -> bool:
    """Add a :class:`JobLinesFilter` to Snakemake's console handler (once); whether there is one to add it to (a
    logger plugin that writes to the console replaces it)."""
    handlers = [h for h in logging.getLogger(SNAKEMAKE_LOGGER).handlers if h.name == CONSOLE_HANDLER]
    for handler in handlers:
        if not any(isinstance(f, JobLinesFilter) for f in handler.filters):
            handler.addFilter(JobLinesFilter())
    return bool(handlers)


DRY_RUN_END = "This was a dry-run"  # how Snakemake's last record of a dry run begins


class AfterDryRun(logging.Handler):
    """Prints ``text`` again as a dry run's last lines: once Snakemake logs its closing record
    (:data:`DRY_RUN_END`), at the exit of the process, after Snakemake's own handlers have written everything. A
    dry run that fails, or one with ``--quiet`` (whose last lines are the plan already), logs no such record."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith(DRY_RUN_END):
            atexit.register(print, f"\n{self.text}", file=sys.stderr)
            logging.getLogger(SNAKEMAKE_LOGGER).removeHandler(self)


def repeat_after_dry_run(text: str) -> None:
    """Print ``text`` now and again after the dry run's list of jobs (:class:`AfterDryRun`)."""
    print(text, file=sys.stderr)
    logging.getLogger(SNAKEMAKE_LOGGER).addHandler(AfterDryRun(text))
