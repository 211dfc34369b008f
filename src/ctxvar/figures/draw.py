"""Draw any figure of :mod:`ctxvar.figures.catalogue` from its input files, as its scope calls it; and a job's
figures, each saved to its own files.

A figure whose data are too few (:class:`~ctxvar.errors.InsufficientData`, e.g. no
type passes the frequency filter of a tiny corpus) becomes a placeholder image that
says why, with a warning; the run goes on.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ctxvar.figures.catalogue import figure_named
from ctxvar.figures.plotting import Plot, plot_or_placeholder, save_plot

log = logging.getLogger(__name__)


def draw(name: str, inputs: dict, params: dict) -> Plot:
    """The figure ``name`` drawn from ``inputs`` ({need: its file, or a list of files, one per model drawn, as
    :meth:`~ctxvar.figures.scopes.FigureRun.job_inputs` gives them}) and ``params`` (its job's wildcards and its
    params: the model or family, and what :meth:`~ctxvar.figures.scopes.FigureRun.params` gives), by its scope's
    ``call``; or a placeholder named as the figure's file is, when the data are too few."""
    figure = figure_named(name)
    return plot_or_placeholder(figure.scope.stem(name, params), lambda: figure.scope.call(figure, inputs, params))


def draw_job(figures: dict[str, dict], inputs: dict, wildcards: dict, outputs) -> None:
    """A job of a scope's rule: each of ``figures`` ({name: its params}, in the order of ``outputs``) drawn by
    :func:`draw` from the job's ``inputs`` and ``wildcards`` and saved to its (png, pdf, csv) of ``outputs``.
    Every file must be named as its figure's own (its scope's stem), checked before any is drawn, so that no figure
    is saved under another's name; an error while drawing or saving one names it."""
    jobs = list(zip(figures.items(), outputs, strict=True))
    for (name, _), files in jobs:
        stem = figure_named(name).scope.stem(name, wildcards)
        if any(Path(file).stem != stem for file in files):
            raise ValueError(f"figure {name} would be saved as {[str(file) for file in files]}, not {stem}.*")
    for (name, params), files in jobs:
        log.info("drawing %s", name)
        try:
            save_plot(draw(name, inputs, {**wildcards, **params}), *files)
        except Exception as error:
            error.__notes__ = [*getattr(error, "__notes__", []), f"while drawing figure {name}"]  # add_note: 3.11
            raise
