"""Which config files a run folder belongs to, so that no run writes into another one's results unannounced.

The first run that writes into ``results/{run}/`` records its config files (absolute paths) in
``results/{run}/config_files.json``. The record follows the files' paths, not their content: a config file
edited in place is still the folder's own. A later start with other files and the same run name stops:
at start-up, dry run included, when the name came from the file's name (two ``study.yaml`` in different
folders); before its first job when ``run:`` set the same name on purpose (a dry run, which writes
nothing, shows the other config's plan with a warning that a real run stops).
"""

from __future__ import annotations

import os

from ctxvar.errors import ConfigError, CtxvarError
from ctxvar.io import read_json, write_json

ORIGIN_FILE = "config_files.json"


def config_identity(config_files: list[str], default_config: str) -> list[str]:
    """The config files of a start as absolute, resolved paths; ``default_config`` when none was given."""
    return [os.path.realpath(path) for path in (config_files or [default_config])]


def recorded_origin(run_folder) -> list[str] | None:
    """The config files recorded in ``run_folder``; None when nothing is recorded. A record that cannot be read
    raises :class:`ConfigError`: read as none, it would let any config take the folder over unannounced."""
    path = os.path.join(run_folder, ORIGIN_FILE)
    if not os.path.lexists(path):
        return None
    try:
        files = read_json(path).get("config_files")
    except (CtxvarError, OSError, ValueError, AttributeError) as error:
        files = error
    if isinstance(files, list) and all(isinstance(file, str) for file in files):
        return files
    raise ConfigError(
        f"{path}: the record of which config files {run_folder} belongs to cannot be read (damaged or edited); "
        f"delete it and its {os.path.basename(path)}.sha256 if the folder is this config's: the next run records "
        "this config's files"
    )


def check_run_origin(run_folder, files: list[str], named_on_purpose: bool) -> str | None:
    """Raise :class:`ConfigError` when ``run_folder`` belongs to other config files and the run's name came from
    a file's name; a warning line when ``run:`` named it on purpose (a real run then stops in
    :func:`record_run_origin`); None when the folder is this config's."""
    recorded = recorded_origin(run_folder)
    if recorded is None or recorded == files:
        return None
    if named_on_purpose:
        return f"{taken_over(run_folder, recorded, files)}; a real run stops before its first job"
    raise ConfigError(
        f"{run_folder} holds the results of {' '.join(recorded)}, and {' '.join(files)} would write there too (its "
        f"run name is its file's name): set run: to a name of its own in {files[-1]}; {how_to_take_over(run_folder)}"
    )


def taken_over(run_folder, recorded: list[str], files: list[str]) -> str:
    return (
        f"{os.path.normpath(run_folder)} holds the results of {' '.join(recorded)}; {' '.join(files)} sets the same "
        "run name and would write over them"
    )


def how_to_take_over(run_folder) -> str:
    record = os.path.join(os.path.normpath(run_folder), ORIGIN_FILE)
    return (
        f"to let this config take the folder over instead, delete {record} (its results are then re-made where the "
        "settings differ)"
    )


def record_run_origin(run_folder, files: list[str]) -> None:
    """Record ``files`` as the run folder's config where nothing is recorded yet; at the start of a real run (not
    a dry run). Raise :class:`ConfigError` (one line) when the folder belongs to other config files: the run stops
    before its first job. The same files, edited in place since, are the folder's own: nothing changes."""
    recorded = recorded_origin(run_folder)
    if recorded is None:
        os.makedirs(run_folder, exist_ok=True)
        write_json({"config_files": files}, os.path.join(run_folder, ORIGIN_FILE))
    elif recorded != files:
        raise ConfigError(
            f"{taken_over(run_folder, recorded, files)}: set run: to a name of its own in {files[-1]} (or "
            f"--config run=NAME); {how_to_take_over(run_folder)}"
        )
