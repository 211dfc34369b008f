"""Which run the config files given on the command line make: its name, which keeps its outputs apart
(``results/{run}/``), and the check that a ``--configfile`` names the study it runs."""

from __future__ import annotations

import os
from pathlib import Path

from ctxvar.config.entries import MODEL_ID_PATTERN, reads_corpus
from ctxvar.errors import ConfigError

STUDY_KEYS = ("corpus", "models")  # what a run studies: never defaulted, never inherited (corpus: when read)


def check_study_named(config: dict, cli_files: list[str], workflow_dir) -> None:
    """A ``--configfile`` stands on its own: the Snakefile reads ``config.yaml`` (the paper's setup) only when
    none is given, so ``config`` is the schema's defaults plus the given files. Raise :class:`ConfigError` when
    they leave out :data:`STUDY_KEYS`, naming what ``config.yaml`` would have supplied and a command that
    extends it: the working directory's ``config.yaml`` (what a run without ``--configfile`` reads), else the
    workflow's own in ``workflow_dir``, every file by its absolute path so that the command runs from any
    folder, ``--directory`` or not."""
    missing = [key for key in STUDY_KEYS if key not in config and (key != "corpus" or reads_corpus_any(config))]
    if not cli_files or not missing:
        return
    files = " ".join(relative_if_below(path) for path in cli_files)
    keys = " and ".join(f"{key}:" for key in missing)
    paper = "config.yaml" if os.path.isfile("config.yaml") else os.path.join(workflow_dir, "config.yaml")
    raise ConfigError(
        f"{files} has no {keys} section: a --configfile stands on its own and does not inherit config.yaml's "
        f"(the paper's six Hub models on BookCorpus); add it, or extend the paper's setup on purpose with "
        f"--configfile {' '.join(os.path.abspath(path) for path in [paper, *cli_files])}"
    )


def reads_corpus_any(config: dict) -> bool:
    """Whether a model of ``config`` reads the corpus; true too while there is no models: section, or one that
    is not a list of entries (this runs before the schema, which then names what is wrong with it)."""
    models = config.get("models")
    if not isinstance(models, list) or not all(isinstance(entry, dict) for entry in models):
        return True
    return any(map(reads_corpus, models))


def relative_if_below(path) -> str:
    """``path`` relative to the working directory if it lies below it (as a user typed it), else as given."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def run_name(config: dict, cli_configs: dict[str, dict], overrides: dict) -> str:
    """The run's name, which keeps its outputs apart: ``results/{run}/``, ``logs/{run}/``, ``benchmarks/{run}/``.

    ``--config run=NAME`` first; else ``run:`` of the last ``--configfile``, else that file's name without its
    extension (``--configfile my_study.yaml`` → ``my_study``; ``--configfile config.yaml studies/extra.yaml`` →
    ``extra``: an earlier file's ``run:`` is not inherited, so a later file never writes into an earlier one's
    run folder unless it names that run itself); without ``--configfile``, ``run:`` of ``config.yaml``
    (``paper``). ``cli_configs``: ``{path: content}`` of the ``--configfile`` files, in command-line order.
    """
    if "run" in overrides:
        name = overrides["run"]
    elif cli_configs:
        path, content = list(cli_configs.items())[-1]
        name = content["run"] if "run" in content else Path(path).stem
    else:
        name = config.get("run") or "default"
    if not isinstance(name, str) or not MODEL_ID_PATTERN.fullmatch(name):
        raise ConfigError(
            f"run: {name!r} cannot name a results folder; set run: to letters, digits and . _ + @ = - "
            "(in the config file or with --config run=NAME)"
        )
    return name


def run_named_on_purpose(cli_configs: dict[str, dict], overrides: dict) -> bool:
    """Whether the run's name was chosen (``--config run=``, ``run:`` in the last ``--configfile``, or
    config.yaml's own) rather than taken from the last ``--configfile``'s name (see :func:`run_name`)."""
    return "run" in overrides or not cli_configs or "run" in list(cli_configs.values())[-1]
