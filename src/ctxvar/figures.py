"""Draw any figure of :mod:`ctxvar.catalogue` from its input files.

A figure whose data are too few (:class:`~ctxvar.errors.InsufficientData`, e.g. no
type passes the frequency filter of a tiny corpus) becomes a placeholder image that
says why, with a warning; the run goes on.
"""

from __future__ import annotations

import functools

from . import geometry_figures, model_figures, summary_figures
from .io import read_csv
from .plotting import Plot, plot_or_placeholder
from .tokentable import TokenStats


def placeholder_when_too_few(draw):
    """``draw(name, ...)`` through :func:`~ctxvar.plotting.plot_or_placeholder`."""

    @functools.wraps(draw)
    def drawn(name, *args, **kwargs) -> Plot:
        return plot_or_placeholder(name, lambda: draw(name, *args, **kwargs))

    return drawn


@placeholder_when_too_few
def model_figure(name: str, model: str, analysis: dict, layers_path=None, tokens_path=None, geometry_path=None) -> Plot:
    """Draw one of :data:`MODEL_FIGURES` or :data:`GEOMETRY_MODEL_FIGURES` for one model."""
    if name == "fig05_decomposition":
        return model_figures.decomposition_bars(read_csv(layers_path), model)
    if name == "geo04_spectrum":
        return geometry_figures.spectrum(read_csv(geometry_path), model)
    stats = TokenStats(tokens_path)
    draw = {"fig07_frequency": model_figures.frequency_scatter_middle, "fig11_frequency_grid": model_figures.frequency_grid,
            "fig14_histograms": model_figures.value_histograms, "geo05_cv_by_min_count": geometry_figures.cv_against_min_count}[name]
    return draw(stats, model, analysis)


LAYER_CURVES = {"fig04_cv_slope_r2": summary_figures.cv_slope_r2, "fig06_within_share": summary_figures.within_share,
                "fig17_log_slopes": summary_figures.log_slopes, "fig18_ratios": summary_figures.ratios,
                "fig19_whole_set": summary_figures.whole_set_values, "fig20_within_between": summary_figures.within_between}


GEOMETRY_CURVES = {"geo01_isotropy": geometry_figures.isotropy, "geo02_cosine": geometry_figures.cosine,
                   "geo03_intrinsic_dimension": geometry_figures.intrinsic_dimension}


@placeholder_when_too_few
def summary_figure(name: str, models: list[str], analysis: dict, layers_path=None, tokens_paths=(), sentences_path=None,
                   geometry_path=None) -> Plot:
    """Draw one of :data:`SUMMARY_FIGURES` or :data:`GEOMETRY_SUMMARY_FIGURES`; ``tokens_paths`` are aligned with ``models``."""
    if name in LAYER_CURVES:
        return LAYER_CURVES[name](read_csv(layers_path), models)
    if name in GEOMETRY_CURVES:
        return GEOMETRY_CURVES[name](read_csv(geometry_path), models)
    if name == "fig09_sentence_lengths":
        return summary_figures.sentence_lengths(sentences_path)
    stats = {model: TokenStats(path) for model, path in zip(models, tokens_paths, strict=True)}
    draw = {"fig02_variance_on_mean": summary_figures.variance_on_mean,
            "fig10_frequency_histogram": summary_figures.frequency_histograms}[name]
    return draw(stats, analysis)


@placeholder_when_too_few
def checkpoint_figure(family: str, steps: dict[str, int], layers_paths, geometry_paths) -> Plot:
    """Draw :data:`CHECKPOINT_FIGURE` for one family; ``steps`` ({id: step}) is aligned with the paths."""
    layers = {model: read_csv(path) for model, path in zip(steps, layers_paths, strict=True)}
    geometry = {model: read_csv(path) for model, path in zip(steps, geometry_paths, strict=True)}
    return geometry_figures.checkpoints(geometry_figures.checkpoint_table(steps, layers, geometry), family)
