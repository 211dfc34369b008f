"""The last lines of a run: where its results are, or the error that stopped it and the log that has it.

Snakemake's ``onsuccess:`` and ``onerror:`` handlers print them, after every job's own output and before
Snakemake's two closing lines (the path of its log and the elapsed time), so they are what a user reads last.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ctxvar.errors import CtxvarError
from ctxvar.files.atomic import read_csv, read_json
from ctxvar.stats.provenance import SUMS_COLUMN
from ctxvar.stats.summary import is_stack_of

BANNER_WIDTH = 78
SUMMARY_TABLES = ("layers.csv", "geometry.csv", "models.csv")  # results/{run}/summary/, one row per model or layer
MODEL_FILES = ("tokens.parquet", "layers.csv", "geometry.csv", "figures/")  # results/{run}/{model}/
ERROR_LINE = re.compile(r"^\S+ \S+ ERROR [\w.]+: (.*)$")  # ctxvar.run.job_log.job_log's record of the error
FAILED_RULE = re.compile(r"^Error in rule (\S+):$")
FAILED_LOG = re.compile(r"^\s+log: (.+?)(?: \(check log file\(s\) for error details\))?$")
MAX_FAILURES_SHOWN = 3
MAX_OUTDATED_SHOWN = 3
DEFAULT_SNAKEFILES = ("Snakefile", "workflow/Snakefile")  # where Snakemake looks without -s


def banner(title: str) -> str:
    """``==== ctxvar: {title} ====…`` across :data:`BANNER_WIDTH` columns, so the block stands out from Snakemake's."""
    head = f"==== ctxvar: {title} "
    return head + "=" * max(4, BANNER_WIDTH - len(head))


class Paths:
    """Paths as the user should type them: relative to the working directory when Snakemake ran in the directory
    it was started from, absolute after ``--directory`` (``moved``), since the user's shell is elsewhere."""

    def __init__(self, moved: bool):
        self.moved = moved

    def __call__(self, path) -> str:
        text = os.path.abspath(path) if self.moved else os.path.relpath(path)
        return text + ("/" if os.path.isdir(path) and not text.endswith("/") else "")


def outdated_outputs(final_outputs: list[str], sums: dict[str, str], run_folder) -> list[str]:
    """The run's outputs that are not current: the final outputs not made, each model's ``run.json``,
    ``layers.csv`` and ``geometry.csv`` made from other sums than ``sums`` (model → the config hash the
    config gives now) or unreadable, and a summary table that is not those models' tables as they are now
    (a per-model table re-made by a run with a target or ``--until`` that left the summary out)."""
    outdated = [path for path in final_outputs if not os.path.exists(path)]
    for model, expected in sums.items():
        for name in ("run.json", "layers.csv", "geometry.csv"):
            path = os.path.join(run_folder, model, name)
            if os.path.exists(path) and path not in outdated and made_from(path) != {expected}:
                outdated.append(path)
    for name in ("layers.csv", "geometry.csv"):  # the summary stacks the models' tables as they are now
        path = os.path.join(run_folder, "summary", name)
        tables = {model: os.path.join(run_folder, model, name) for model in sums}
        if path in final_outputs and path not in outdated and not is_stack_of(path, tables):
            outdated.append(path)
    return outdated


def made_from(path) -> set[str]:
    """The sums a ``run.json`` or per-model table names (``config_hash``); empty when unreadable or unnamed."""
    try:
        if path.endswith(".json"):
            return {read_json(path).get(SUMS_COLUMN) or ""}
        return set(read_csv(path, usecols=[SUMS_COLUMN], keep_default_na=False)[SUMS_COLUMN].astype(str))
    except (CtxvarError, OSError, ValueError, KeyError):
        return set()


def success_message(
    run_folder, models: list[str], report_command: str, moved: bool = False, outdated: list[str] = ()
) -> str:
    """Where a finished run's results are: the run folder, then inside it the tables, per-model files and
    figures, then the report command and the notebook call; only what exists (a partial target lists less).
    With ``outdated`` (:func:`outdated_outputs`), the banner says the run's results are not all current, and
    names the first few."""
    folder = Path(run_folder)
    where = Paths(moved)(folder)
    shown = Paths(moved)
    title = f"finished; results of run {folder.name}"
    if outdated:
        title = f"the jobs asked for ran; results of run {folder.name} are not all current"
    lines = [banner(title), f"  run folder  {where}"]
    if outdated:
        more = f" and {len(outdated) - MAX_OUTDATED_SHOWN} more" if len(outdated) > MAX_OUTDATED_SHOWN else ""
        named = ", ".join(shown(path) for path in outdated[:MAX_OUTDATED_SHOWN])
        lines.append(
            f"  outdated    {named}{more} (not made, made from other sums, or a summary of older tables): run the "
            "same command without --until or a target to finish the run"
        )
    tables = [name for name in SUMMARY_TABLES if (folder / "summary" / name).is_file()]
    if tables:
        lines.append(f"  tables      summary/ {', '.join(tables)}")
    done = [model for model in models if (folder / model / "tokens.parquet").is_file()]
    if done:
        which = f"{done[0]}/" if len(done) == 1 else "<model>/"
        count = "" if len(done) == 1 else f" ({len(done)} models)"
        lines.append(f"  per model   {which} {', '.join(MODEL_FILES)}{count}")
    if (folder / "figures").is_dir():
        lines.append("  figures     figures/ (all models), <model>/figures/: PNG, PDF and the CSV drawn")
    lines.append(f"  report      {report_command}")
    if (folder / "summary" / "models.csv").is_file():
        lines.append(f'  notebook    import ctxvar; ctxvar.load_results("{where.rstrip("/")}")')
    return "\n".join(lines)


def report_command(config_files: list[str], run_folder, workdir: str | None, snakefile: str) -> str:
    """The command that writes the run's HTML report (every figure with its caption) into the run folder, as
    the user types it: with ``-s`` unless Snakemake finds ``snakefile`` by itself, and ``--directory``."""
    moved = workdir is not None
    shown = Paths(moved)
    words = ["snakemake"]
    if moved or not any(os.path.isfile(p) and os.path.samefile(p, snakefile) for p in DEFAULT_SNAKEFILES):
        words += ["-s", os.path.abspath(snakefile) if moved else relative_if_below(snakefile)]
    if moved:
        words += ["--directory", workdir]
    if config_files:
        words += ["--configfile", *(path if moved else relative_if_below(path) for path in config_files)]
    return " ".join([*words, "--report", shown(Path(run_folder)).rstrip("/") + "/report.html"])


def relative_if_below(path) -> str:
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def failed_jobs(snakemake_log: str) -> list[tuple[str, str | None]]:
    """``(rule, job log or None)`` of every job Snakemake reports failed in its log's text, in order."""
    failures, rule = [], None
    for line in snakemake_log.splitlines():
        if match := FAILED_RULE.match(line):
            rule = match.group(1)
            failures.append((rule, None))
        elif rule and (match := FAILED_LOG.match(line)):
            failures[-1] = (rule, match.group(1).split(", ")[0])
        elif rule and not line.startswith(" "):
            rule = None
    return failures


def job_error(job_log) -> str:
    """The one-line error a job's log records (:func:`ctxvar.run.job_log.job_log`): a ctxvar error as the job printed
    it, a bug's exception, or what is known when the log has none."""
    if job_log is None or not os.path.isfile(job_log):
        return "the job wrote no log (it did not start: see Snakemake's messages above)"
    lines = Path(job_log).read_text(errors="replace").splitlines()
    errors = [match.group(1) for line in lines if (match := ERROR_LINE.match(line))]
    if not errors:
        return "its log records no error: the job was stopped from outside (out of memory, a time limit, a signal?)"
    if errors[-1].startswith("unexpected error"):
        last = next((line for line in reversed(lines) if line.strip()), "")
        return f"{last} (a bug: please report it with this log)"
    return f"ctxvar error: {errors[-1]}"


def failure_message(snakemake_logs: list[str], moved: bool = False) -> str:
    """The error that stopped the run and the log that holds its traceback, per failed job (the first few)."""
    shown = Paths(moved)
    text = "\n".join(Path(path).read_text(errors="replace") for path in snakemake_logs if os.path.isfile(path))
    failures = failed_jobs(text)
    lines = [banner("the run failed")]
    for rule, job_log in failures[:MAX_FAILURES_SHOWN]:
        lines.append(f"  {rule}: {job_error(job_log)}")
        if job_log:
            lines.append(f"  log: {shown(job_log)}")
    if len(failures) > MAX_FAILURES_SHOWN:
        lines.append(f"  and {len(failures) - MAX_FAILURES_SHOWN} more failed jobs (Snakemake's log below lists them)")
    if not failures:
        lines.append("  no job failed; Snakemake stopped for the reason it gives above")
    return "\n".join(lines)
