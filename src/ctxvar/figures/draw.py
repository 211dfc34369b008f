"""Draw any figure of :mod:`ctxvar.figures.catalogue` from its input files, as its scope calls it.

A figure whose data are too few (:class:`~ctxvar.errors.InsufficientData`, e.g. no
type passes the frequency filter of a tiny corpus) becomes a placeholder image that
says why, with a warning; the run goes on.
"""

from __future__ import annotations

from ctxvar.figures.catalogue import figure_named
from ctxvar.figures.plotting import Plot, plot_or_placeholder


def draw(name: str, inputs: dict, params: dict) -> Plot:
    """The figure ``name`` drawn from ``inputs`` ({need: its file, or a list of files, one per model drawn, as
    :meth:`~ctxvar.figures.scopes.FigureRun.inputs` gives them}) and ``params`` (its job's wildcards and params: the
    model or family, and what :meth:`~ctxvar.figures.scopes.FigureRun.params` gives), by its scope's ``call``; or a
    placeholder named as the figure's file is, when the data are too few."""
    figure = figure_named(name)
    return plot_or_placeholder(figure.scope.stem(name, params), lambda: figure.scope.call(figure, inputs, params))
