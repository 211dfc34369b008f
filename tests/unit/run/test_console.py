"""A quiet console (ctxvar.run.console): Snakemake's per-job records leave its console handler, not its log file;
progress comes by tenths, and errors, warnings and every other record pass. The real-model tier checks the
quick start's console as a user sees it."""

from __future__ import annotations

import logging

from snakemake.settings.enums import Quietness
from snakemake_interface_logger_plugins.common import LogEvent

from ctxvar.run.console import CONSOLE_HANDLER, SNAKEMAKE_LOGGER, JobLinesFilter, quiet_job_lines


def record(msg, level=logging.INFO, **extra) -> logging.LogRecord:
    entry = logging.LogRecord(SNAKEMAKE_LOGGER, level, __file__, 1, msg, None, None)
    entry.__dict__.update(extra)
    return entry


def test_per_job_records_are_dropped_and_everything_else_passes():
    quiet = JobLinesFilter()
    dropped = [
        record(None, event=LogEvent.JOB_INFO, rule_name="extract_statistics"),
        record("Execute 2 jobs...", event=LogEvent.JOB_STARTED, jobs=[1, 2]),
        record("Finished jobid: 4 (Rule: merge_statistics)", event=LogEvent.JOB_FINISHED, job_id=4),
        record("Select jobs to execute..."),
        record("Removing temporary output results/x/partials/m/0.parquet.", quietness=Quietness.RULES),
    ]
    kept = [
        record(None, logging.ERROR, event=LogEvent.JOB_ERROR, rule_name="merge_statistics"),
        record("Exiting because a job execution failed. Look above for error messages", logging.ERROR),
        record("Job stats:\n...", event=LogEvent.RUN_INFO),
        record("Building DAG of jobs..."),
        record("Job 7 has been submitted with SLURM jobid 12 (log: logs/slurm/12.log)."),
        record("ctxvar warning: something", logging.WARNING),
    ]
    assert [quiet.filter(r) for r in dropped] == [False] * len(dropped)
    assert [quiet.filter(r) for r in kept] == [True] * len(kept)


def test_progress_is_shown_once_per_tenth_and_at_the_end():
    quiet = JobLinesFilter()
    shown = [done for done in range(1, 48) if quiet.filter(record(None, event=LogEvent.PROGRESS, done=done, total=47))]
    assert shown == [1, 5, 10, 15, 19, 24, 29, 33, 38, 43, 47]


def test_the_filter_goes_on_snakemakes_console_handler_once_and_not_on_its_log_file():
    logger = logging.getLogger(SNAKEMAKE_LOGGER)
    console, log_file = logging.StreamHandler(), logging.NullHandler()
    console.name, log_file.name = CONSOLE_HANDLER, "DefaultLogFileHandler"
    logger.addHandler(console)
    logger.addHandler(log_file)
    try:
        assert quiet_job_lines() and quiet_job_lines()
        assert [type(f) for f in console.filters] == [JobLinesFilter] and log_file.filters == []
    finally:
        logger.removeHandler(console)
        logger.removeHandler(log_file)
    assert not quiet_job_lines()  # no console handler of Snakemake's (a logger plugin writes the console)
