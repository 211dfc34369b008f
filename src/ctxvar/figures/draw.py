"""Draw any figure of :mod:`ctxvar.figures.catalogue` from its input files.

A figure whose data are too few (:class:`~ctxvar.errors.InsufficientData`, e.g. no
type passes the frequency filter of a tiny corpus) becomes a placeholder image that
says why, with a warning; the run goes on.
"""

from __future__ import annotations

import functools
import importlib

import pandas as pd

from ctxvar.errors import InsufficientData
from ctxvar.figures import embedding_plots, geometry_plots
from ctxvar.figures.catalogue import (
    ACROSS_CHECKPOINT_FIGURES,
    CHECKPOINT_FIGURE,
    EMBEDDING_CHECKPOINT_FIGURE,
    EMBEDDING_PROJECTION_FIGURE,
    GEOMETRY_MODEL_FIGURES,
    GEOMETRY_SUMMARY_FIGURES,
    MODEL_FIGURES,
    SUMMARY_FIGURES,
    FigureSpec,
)
from ctxvar.figures.plotting import Plot, plot_or_placeholder
from ctxvar.files.atomic import read_csv
from ctxvar.files.parquet import read_table
from ctxvar.stats.provenance import check_same_sums, table_sums
from ctxvar.stats.token_table import TokenStats


def placeholder_when_too_few(draw):
    """``draw(name, ...)`` through :func:`~ctxvar.figures.plotting.plot_or_placeholder`."""

    @functools.wraps(draw)
    def drawn(name, *args, **kwargs) -> Plot:
        return plot_or_placeholder(name, lambda: draw(name, *args, **kwargs))

    return drawn


def draw_function(spec: FigureSpec):
    """The function a catalogue entry names (``module.function`` in :mod:`ctxvar.figures`)."""
    module, function = spec.draw.split(".")
    return getattr(importlib.import_module(f"ctxvar.figures.{module}"), function)


@placeholder_when_too_few
def model_figure(name: str, model: str, analysis: dict, layers_path=None, tokens_path=None, geometry_path=None) -> Plot:
    """Draw one of :data:`MODEL_FIGURES` or :data:`GEOMETRY_MODEL_FIGURES` for one model.

    The draw function gets what the entry ``needs`` (layers.csv or geometry.csv as a DataFrame, tokens.parquet
    as :class:`TokenStats`), then the model id, then, for figures drawn from tokens.parquet, the frequency filter.
    """
    spec = {**MODEL_FIGURES, **GEOMETRY_MODEL_FIGURES}[name]
    paths = {"layers": layers_path, "geometry": geometry_path, "tokens": tokens_path}
    inputs = [TokenStats(paths[need]) if need == "tokens" else read_csv(paths[need]) for need in spec.needs]
    return draw_function(spec)(*inputs, model, *([analysis] if "tokens" in spec.needs else []))


@placeholder_when_too_few
def summary_figure(
    name: str,
    models: list[str],
    analysis: dict,
    layers_path=None,
    tokens_paths=(),
    sentences_path=None,
    geometry_path=None,
    models_path=None,
) -> Plot:
    """Draw one of :data:`SUMMARY_FIGURES` or :data:`GEOMETRY_SUMMARY_FIGURES`.

    The draw function gets what the entry ``needs``: the summary tables it names (stacked layers, stacked
    geometry, models.csv: DataFrames, in that order, all written by one job that checks they come from the same
    sums) and the model ids in order; ``{model: TokenStats}`` (``tokens_paths`` align with ``models``) and the
    frequency filter; or the sentences file's path.
    """
    spec = {**SUMMARY_FIGURES, **GEOMETRY_SUMMARY_FIGURES}[name]
    if spec.needs == ("tokens",):
        stats = {model: TokenStats(path) for model, path in zip(models, tokens_paths, strict=True)}
        return draw_function(spec)(stats, analysis)
    if spec.needs == ("sentences",):
        return draw_function(spec)(sentences_path)
    tables = {"layers": layers_path, "geometry": geometry_path, "models": models_path}
    return draw_function(spec)(*(read_csv(tables[need]) for need in spec.needs), models)


@placeholder_when_too_few
def checkpoint_figure(family: str, steps: dict[str, int], layers_paths, geometry_paths) -> Plot:
    """Draw :data:`CHECKPOINT_FIGURE` for one family; ``steps`` ({id: step}) is aligned with the paths. Each
    checkpoint's layers.csv and geometry.csv, joined by layer, must come from the same sums
    (:func:`~ctxvar.stats.provenance.check_same_sums`)."""
    layers = {model: read_csv(path) for model, path in zip(steps, layers_paths, strict=True)}
    geometry = {model: read_csv(path) for model, path in zip(steps, geometry_paths, strict=True)}
    for model, layers_path, geometry_path in zip(steps, layers_paths, geometry_paths):
        check_same_sums(
            model,
            {
                layers_path: table_sums(layers[model], layers_path),
                geometry_path: table_sums(geometry[model], geometry_path),
            },
        )
    return draw_function(CHECKPOINT_FIGURE)(geometry_plots.checkpoint_table(steps, layers, geometry), family)


@placeholder_when_too_few
def embedding_projection_figure(name: str, model: str, projection_path, matrices_path) -> Plot:
    """Draw :data:`EMBEDDING_PROJECTION_FIGURE` for one model from its embedding_projection.parquet, with the
    I(W) of each matrix from its embedding_matrices.csv (the same job writes both)."""
    return draw_function(EMBEDDING_PROJECTION_FIGURE)(
        read_table(projection_path).to_pandas(), model, read_csv(matrices_path)
    )


@placeholder_when_too_few
def embedding_checkpoint_figure(name: str, family: str, steps: dict[str, int], matrices_paths) -> Plot:
    """Draw :data:`EMBEDDING_CHECKPOINT_FIGURE` for one family; ``steps`` ({id: step}) is aligned with the
    checkpoints' embedding_matrices.csv paths."""
    tables = {model: read_csv(path) for model, path in zip(steps, matrices_paths, strict=True)}
    return draw_function(EMBEDDING_CHECKPOINT_FIGURE)(embedding_plots.checkpoint_table(steps, tables), family)


def across_checkpoint_table(families: dict[str, dict[str, int]], tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Each checkpoint's table stacked, with ``family``, ``model`` and ``step`` first; ``families`` is
    {family: {id: step}}, ``tables`` {id: its geometry.csv or embedding_matrices.csv}."""
    frames = [
        tables[model].assign(family=family, model=model, step=step)
        for family, steps in families.items()
        for model, step in steps.items()
    ]
    if not frames:
        raise InsufficientData("the run has no training checkpoints (no models[] entry with revisions)")
    table = pd.concat(frames, ignore_index=True)
    first = ["family", "model", "step"]
    return table[[*first, *(column for column in table if column not in first)]]


@placeholder_when_too_few
def across_checkpoints_figure(name: str, families: dict[str, dict[str, int]], paths) -> Plot:
    """Draw one of :data:`ACROSS_CHECKPOINT_FIGURES` for every checkpoint family at once: ``families`` is
    {family: {id: step}}, and ``paths`` (each checkpoint's geometry.csv or embedding_matrices.csv, as the entry
    needs) align with its ids in that order; the draw function gets :func:`across_checkpoint_table`."""
    models = [model for steps in families.values() for model in steps]
    tables = {model: read_csv(path) for model, path in zip(models, paths, strict=True)}
    return draw_function(ACROSS_CHECKPOINT_FIGURES[name])(across_checkpoint_table(families, tables))
