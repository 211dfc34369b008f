"""Which config files a run folder belongs to, so that no run writes into another one's results unannounced.

The first run that writes into ``results/{run}/`` records its config files in ``results/{run}/config_files.json``:
each by its path relative to the working directory where it lies below it (links resolved), so that the record
moves with the project folder, else by its absolute path. The record follows the files' paths, not their
content: a config file edited in place is still the folder's own.

A later start is the folder's own when its config files are the recorded ones, or, where the run's name was
chosen (``run:``, ``--config run=``), when one list begins with the other: ``--configfile config.yaml
studies/extra.yaml`` extends the study of ``config.yaml`` in its folder (and ``config.yaml`` alone is that
study again), with a warning that what the later files change is re-made there. Any other start with the same
run name stops: at start-up, dry run included, when the name came from the file's name (two ``study.yaml`` in
different folders); before its first job when ``run:`` set the same name on purpose (a dry run, which writes
nothing, shows the other config's plan with a warning that a real run stops).

A record written by an earlier ctxvar holds absolute paths: it stays the folder's own while its files are where
it says (a real run then rewrites it relative to the working directory); once the project folder has moved it
stops the start with one line that says how to let the folder's own config take it back.
"""

from __future__ import annotations

import os

from ctxvar.errors import ConfigError, CtxvarError
from ctxvar.files.atomic import read_json, write_json

ORIGIN_FILE = "config_files.json"
PATHS = "relative to the working directory where below it"  # marks a record that moves with the project


def config_identity(config_files: list[str], default_config: str) -> list[str]:
    """The config files of a start (``default_config`` when none was given), links resolved, each relative to
    the working directory where it lies below it, else absolute."""
    here = os.path.realpath(os.getcwd())
    identities = []
    for path in config_files or [default_config]:
        real = os.path.realpath(path)
        identities.append(os.path.relpath(real, here) if os.path.commonpath([real, here]) == here else real)
    return identities


def located(files: list[str]) -> list[str]:
    """``files`` as absolute paths, relative ones taken from the working directory (links resolved)."""
    here = os.path.realpath(os.getcwd())
    return [os.path.join(here, file) for file in files]  # join keeps an absolute file as it is


def recorded_record(run_folder) -> dict | None:
    """The record in ``run_folder``; None when nothing is recorded. A record that cannot be read raises
    :class:`ConfigError`: read as none, it would let any config take the folder over unannounced."""
    path = os.path.join(run_folder, ORIGIN_FILE)
    if not os.path.lexists(path):
        return None
    try:
        record = read_json(path)
        files = record.get("config_files")
    except (CtxvarError, OSError, ValueError, AttributeError) as error:
        record, files = None, error
    if isinstance(files, list) and files and all(isinstance(file, str) and file for file in files):
        return record
    raise ConfigError(
        f"{path}: the record of which config files {run_folder} belongs to cannot be read (damaged or edited); "
        f"delete it and its {os.path.basename(path)}.sha256 if the folder is this config's: the next run records "
        "this config's files"
    )


def recorded_origin(run_folder) -> list[str] | None:
    """The config files recorded in ``run_folder`` (see :func:`recorded_record`); None when nothing is recorded."""
    record = recorded_record(run_folder)
    return None if record is None else record["config_files"]


def extends(recorded: list[str], files: list[str]) -> bool:
    """Whether one of the two lists of config files begins with the other, as files (see :func:`located`), and
    they differ: a study extended by later files, or such a study's first files alone."""
    shorter, longer = sorted((located(recorded), located(files)), key=len)
    return len(shorter) < len(longer) and longer[: len(shorter)] == shorter


def own(recorded: list[str], files: list[str]) -> bool:
    return located(recorded) == located(files)


def check_run_origin(run_folder, files: list[str], named_on_purpose: bool) -> str | None:
    """Raise :class:`ConfigError` when ``run_folder`` belongs to other config files and the run's name came from
    a file's name; a warning line when ``run:`` named it on purpose (a real run then stops in
    :func:`record_run_origin`), or when the start extends the folder's study (:func:`extends`); None when the
    folder is this config's."""
    record = recorded_record(run_folder)
    if record is None or own(record["config_files"], files):
        return None
    recorded = record["config_files"]
    if named_on_purpose and extends(recorded, files):
        return extension(run_folder, recorded, files)
    if named_on_purpose:
        return f"{taken_over(run_folder, record, files)}; a real run stops before its first job"
    if moved_away(record):
        raise ConfigError(taken_over(run_folder, record, files))
    raise ConfigError(
        f"{run_folder} holds the results of {' '.join(recorded)}, and {' '.join(files)} would write there too (its "
        f"run name is its file's name): set run: to a name of its own in {files[-1]}; {how_to_take_over(run_folder)}"
    )


def extension(run_folder, recorded: list[str], files: list[str]) -> str:
    folder, longer = os.path.normpath(run_folder), max(recorded, files, key=len)
    later = " ".join(longer[min(len(recorded), len(files)) :])
    what = f"extends them with {later}" if len(files) > len(recorded) else f"is their study without {later}"
    return (
        f"{folder} holds the results of {' '.join(recorded)}; {' '.join(files)} {what}: results whose settings "
        f"differ are re-made in {folder}, the others kept (to leave {folder} as it is, give {files[-1]} a run: of "
        "its own)"
    )


def moved_away(record: dict) -> bool:
    """Whether ``record`` is an earlier ctxvar's (absolute paths) whose files are gone: the project folder moved."""
    return record.get("paths") != PATHS and not all(os.path.exists(file) for file in record["config_files"])


def taken_over(run_folder, record: dict, files: list[str]) -> str:
    """Why ``files`` may not write into ``run_folder``, and, for a record the project folder moved away from
    (:func:`moved_away`), how its own config takes it back."""
    folder, recorded, this = os.path.normpath(run_folder), " ".join(record["config_files"]), " ".join(files)
    if not moved_away(record):
        return f"{folder} holds the results of {recorded}; {this} sets the same run name and would write over them"
    path = os.path.join(folder, ORIGIN_FILE)
    return (
        f"{folder} holds the results of {recorded}, recorded by absolute path by an earlier ctxvar and no longer "
        f"there; if the project folder was moved and {this} is that config, delete {path} and "
        f"{ORIGIN_FILE}.sha256 beside it (the next run records {this} relative to the working directory and "
        f"re-makes nothing whose settings are unchanged), else give {files[-1]} a run: of its own"
    )


def how_to_take_over(run_folder) -> str:
    record = os.path.join(os.path.normpath(run_folder), ORIGIN_FILE)
    return (
        f"to let this config take the folder over instead, delete {record} (its results are then re-made where the "
        "settings differ)"
    )


def record_run_origin(run_folder, files: list[str]) -> None:
    """Record ``files`` as the run folder's config where nothing is recorded yet; at the start of a real run (not
    a dry run). Raise :class:`ConfigError` (one line) when the folder belongs to other config files that this
    start does not extend (:func:`extends`; a start whose name came from a file's name stopped at start-up in
    :func:`check_run_origin`): the run stops before its first job. The same files, edited in place since, are the
    folder's own: nothing changes, except that an earlier ctxvar's record (absolute paths) is rewritten relative
    to the working directory."""
    record = recorded_record(run_folder)
    if record is None:
        write_record(run_folder, files)
    elif own(record["config_files"], files) or extends(record["config_files"], files):
        if record.get("paths") != PATHS:
            write_record(run_folder, config_identity(located(record["config_files"]), ""))
    elif moved_away(record):
        raise ConfigError(taken_over(run_folder, record, files))
    else:
        raise ConfigError(
            f"{taken_over(run_folder, record, files)}: set run: to a name of its own in {files[-1]} (or "
            f"--config run=NAME); {how_to_take_over(run_folder)}"
        )


def write_record(run_folder, files: list[str]) -> None:
    os.makedirs(run_folder, exist_ok=True)
    write_json({"config_files": files, "paths": PATHS}, os.path.join(run_folder, ORIGIN_FILE))
