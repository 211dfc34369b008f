"""Draw any figure of :mod:`ctxvar.figures.catalogue` from its input files.

A figure whose data are too few (:class:`~ctxvar.errors.InsufficientData`, e.g. no
type passes the frequency filter of a tiny corpus) becomes a placeholder image that
says why, with a warning; the run goes on.
"""

from __future__ import annotations

import functools

from ctxvar.figures import cross_model, geometry_plots, per_model
from ctxvar.figures.plotting import Plot, plot_or_placeholder
from ctxvar.io import read_csv
from ctxvar.stats.token_table import TokenStats


def placeholder_when_too_few(draw):
    """``draw(name, ...)`` through :func:`~ctxvar.figures.plotting.plot_or_placeholder`."""

    @functools.wraps(draw)
    def drawn(name, *args, **kwargs) -> Plot:
        return plot_or_placeholder(name, lambda: draw(name, *args, **kwargs))

    return drawn


@placeholder_when_too_few
def model_figure(name: str, model: str, analysis: dict, layers_path=None, tokens_path=None, geometry_path=None) -> Plot:
    """Draw one of :data:`MODEL_FIGURES` or :data:`GEOMETRY_MODEL_FIGURES` for one model."""
    if name == "fig05_decomposition":
        return per_model.decomposition_bars(read_csv(layers_path), model)
    if name == "geo04_spectrum":
        return geometry_plots.spectrum(read_csv(geometry_path), model)
    stats = TokenStats(tokens_path)
    draw = {
        "fig07_frequency": per_model.frequency_scatter_middle,
        "fig11_frequency_grid": per_model.frequency_grid,
        "fig14_histograms": per_model.value_histograms,
        "geo05_cv_by_min_count": geometry_plots.cv_against_min_count,
    }[name]
    return draw(stats, model, analysis)


LAYER_CURVES = {
    "fig04_cv_slope_r2": cross_model.cv_slope_r2,
    "fig06_within_share": cross_model.within_share,
    "fig17_log_slopes": cross_model.log_slopes,
    "fig18_ratios": cross_model.ratios,
    "fig19_whole_set": cross_model.whole_set_values,
    "fig20_within_between": cross_model.within_between,
}


GEOMETRY_CURVES = {
    "geo01_isotropy": geometry_plots.isotropy,
    "geo02_cosine": geometry_plots.cosine,
    "geo03_intrinsic_dimension": geometry_plots.intrinsic_dimension,
}


@placeholder_when_too_few
def summary_figure(
    name: str,
    models: list[str],
    analysis: dict,
    layers_path=None,
    tokens_paths=(),
    sentences_path=None,
    geometry_path=None,
) -> Plot:
    """Draw one of :data:`SUMMARY_FIGURES` or :data:`GEOMETRY_SUMMARY_FIGURES`.

    ``tokens_paths`` are aligned with ``models``.
    """
    if name in LAYER_CURVES:
        return LAYER_CURVES[name](read_csv(layers_path), models)
    if name in GEOMETRY_CURVES:
        return GEOMETRY_CURVES[name](read_csv(geometry_path), models)
    if name == "fig09_sentence_lengths":
        return cross_model.sentence_lengths(sentences_path)
    stats = {model: TokenStats(path) for model, path in zip(models, tokens_paths, strict=True)}
    draw = {
        "fig02_variance_on_mean": cross_model.variance_on_mean,
        "fig10_frequency_histogram": cross_model.frequency_histograms,
    }[name]
    return draw(stats, analysis)


@placeholder_when_too_few
def checkpoint_figure(family: str, steps: dict[str, int], layers_paths, geometry_paths) -> Plot:
    """Draw :data:`CHECKPOINT_FIGURE` for one family; ``steps`` ({id: step}) is aligned with the paths."""
    layers = {model: read_csv(path) for model, path in zip(steps, layers_paths, strict=True)}
    geometry = {model: read_csv(path) for model, path in zip(steps, geometry_paths, strict=True)}
    return geometry_plots.checkpoints(geometry_plots.checkpoint_table(steps, layers, geometry), family)
