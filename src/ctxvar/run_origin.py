"""Which config files a run folder belongs to, so that no run writes into another one's results unannounced.

The first run that writes into ``results/{run}/`` records its config files (absolute paths) in
``results/{run}/config_files.json``. A later start with other files and the same run name stops at
start-up when the name came from the file's name (two ``study.yaml`` in different folders), and warns when
``run:`` was set on purpose to the same name.
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
    a file's name; a warning line when ``run:`` named it on purpose; None when the folder is this config's."""
    recorded = recorded_origin(run_folder)
    if recorded is None or recorded == files:
        return None
    others, these = " ".join(recorded), " ".join(files)
    if named_on_purpose:
        return f"{run_folder} holds the results of {others}; this run ({these}) has the same run: and updates them"
    raise ConfigError(
        f"{run_folder} holds the results of {others}, and {these} would write there too (its run name is its file's "
        f"name): set run: to a name of its own in {files[-1]}; to let this config take the folder over instead, "
        f"delete {os.path.join(run_folder, ORIGIN_FILE)} (its results are then re-made where the settings differ)"
    )


def record_run_origin(run_folder, files: list[str]) -> None:
    """Record ``files`` as the run folder's config, where nothing is recorded yet (a real run, not a dry run)."""
    if recorded_origin(run_folder) is None:
        os.makedirs(run_folder, exist_ok=True)
        write_json({"config_files": files}, os.path.join(run_folder, ORIGIN_FILE))
