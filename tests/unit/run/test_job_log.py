"""A job's log (ctxvar.run.job_log): a ctxvar error is one console line (with its notes) and a full traceback in the
log; an unexpected exception is logged with its traceback and propagates; warnings reach the console as one line,
information only the log."""

from __future__ import annotations

import json
import logging

import pytest

from ctxvar.errors import ModelLoadError
from ctxvar.run.job_log import job_log


def test_a_job_error_is_one_console_line_and_a_full_traceback_in_the_log(tmp_path, capsys):
    log_path = tmp_path / "job.log"
    with pytest.raises(SystemExit) as stop:
        with job_log(log_path):
            try:
                json.loads("{broken")
            except ValueError as cause:
                raise ModelLoadError("model 'm' (dir): dir/config.json is damaged (not valid JSON)") from cause
    assert stop.value.code == 1
    console = capsys.readouterr().err
    assert (
        console
        == f"ctxvar error: model 'm' (dir): dir/config.json is damaged (not valid JSON) (traceback in {log_path})\n"
    )
    log = log_path.read_text()
    assert "Traceback" in log and "JSONDecodeError" in log and "The above exception was the direct cause" in log


def test_a_job_error_s_notes_say_in_its_line_what_the_job_was_doing(tmp_path, capsys):
    with pytest.raises(SystemExit):
        with job_log(tmp_path / "job.log"):
            error = ModelLoadError("model 'm': damaged")
            error.__notes__ = ["while drawing figure fig05_decomposition"]
            raise error
    assert capsys.readouterr().err == (
        "ctxvar error: model 'm': damaged (while drawing figure fig05_decomposition; "
        f"traceback in {tmp_path / 'job.log'})\n"
    )


def test_an_unexpected_exception_is_logged_with_its_traceback_and_propagates(tmp_path):
    log_path = tmp_path / "job.log"
    with pytest.raises(ZeroDivisionError):
        with job_log(log_path):
            1 / 0
    assert "unexpected error" in log_path.read_text() and "ZeroDivisionError" in log_path.read_text()


def test_job_warnings_reach_the_console_as_one_line(tmp_path, capsys):
    with job_log(tmp_path / "job.log"):
        logging.getLogger("ctxvar.stats.summary").warning("models a, b load identical weights")
        logging.getLogger("ctxvar.stats.summary").info("not for the console")
    assert capsys.readouterr().err == "ctxvar warning: models a, b load identical weights\n"
    assert "not for the console" in (tmp_path / "job.log").read_text()
