"""What every figure shares: paper-sized style, saving, regression panels, data loading.

A figure function returns a :class:`Plot`: the matplotlib Figure and a table of
the numbers it draws (line and bar series, annotated regressions, histogram
counts). :func:`save_plot` writes it as PNG, PDF and CSV side by side, so the
CSV is what the picture shows. Figures are built with ``matplotlib.figure.Figure``
directly (no pyplot state, no GUI backend).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Callable

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from ctxvar.errors import InsufficientData
from ctxvar.io import atomic_path, write_csv
from ctxvar.stats.layers import ols

log = logging.getLogger(__name__)

PAPER_STYLE = {  # 7–8 pt text stays readable when a 2-3 panel figure is printed one column wide
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.2,
    "lines.markersize": 3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
}
PNG_DPI = 200
PANEL_SIZE = (2.4, 2.0)  # inches per panel
SCALE_GAP = 10.0  # series whose typical values differ by more than this factor go on a second axis


@dataclass
class Plot:
    figure: Figure
    data: pd.DataFrame  # the numbers drawn


def paper_style(function):
    """Build the figure under :data:`PAPER_STYLE` (rcParams are read when artists are made)."""

    @functools.wraps(function)
    def styled(*args, **kwargs):
        with matplotlib.rc_context(PAPER_STYLE):
            return function(*args, **kwargs)

    return styled


def panels(nrows: int, ncols: int, size=PANEL_SIZE, **subplots) -> tuple[Figure, np.ndarray]:
    """A constrained-layout figure of ``nrows × ncols`` panels; axes as a 2-D array."""
    figure = Figure(figsize=(ncols * size[0], nrows * size[1]), layout="constrained")
    return figure, figure.subplots(nrows, ncols, squeeze=False, **subplots)


def grid_shape(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return -(-n // cols), cols


def hide_unused(axes: np.ndarray, used: int) -> None:
    for ax in axes.flat[used:]:
        ax.set_visible(False)


def save_plot(plot: Plot, png, pdf, csv) -> None:
    """Write the figure as PNG and PDF and its data as CSV, each atomically."""
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        with atomic_path(path) as tmp:
            plot.figure.savefig(tmp, format=fmt, dpi=PNG_DPI)
    write_csv(plot.data, csv)


def placeholder(name: str, reason: str) -> Plot:
    """A figure that says why it was not drawn, with a CSV that says the same (column ``not_drawn``)."""
    figure = Figure(figsize=(5, 1.6), layout="constrained")
    figure.text(0.5, 0.5, f"{name}: not drawn\n{reason}", ha="center", va="center", wrap=True, fontsize=9)
    return Plot(figure, pd.DataFrame({"figure": [name], "not_drawn": [reason]}))


def plot_or_placeholder(name: str, draw: Callable[[], Plot]) -> Plot:
    """``draw()``, or a :func:`placeholder` with a warning when the data are too few for this figure."""
    try:
        return draw()
    except InsufficientData as error:
        log.warning("figure %s not drawn: %s (it is a placeholder that says so)", name, error)
        return placeholder(name, str(error))


def regression_panel(
    ax, x: np.ndarray, y: np.ndarray, keep: np.ndarray, colour=None, norm=None, cmap="rainbow"
) -> dict:
    """Scatter every point, fit OLS of y on x over ``keep`` and draw the line.

    Returns ``{"slope", "intercept", "r2", "n_fit"}`` as fitted (NaN when fewer than 2 points);
    :func:`fit_label` writes it for a title, where it never hides points.
    """
    ax.scatter(
        x,
        y,
        s=2,
        c=colour if colour is not None else "0.3",
        cmap=cmap if colour is not None else None,
        norm=norm,
        linewidths=0,
        rasterized=True,
    )
    slope, intercept, r2 = ols(x[keep], y[keep])
    if np.isfinite(slope):
        xs = np.array([x[keep].min(), x[keep].max()])
        ax.plot(xs, intercept + slope * xs, color="black", linewidth=1)
    return {"slope": slope, "intercept": intercept, "r2": r2, "n_fit": int(keep.sum())}


def fit_label(fit: dict) -> str:
    return f"slope {fit['slope']:.3f}, $R^2$ {fit['r2']:.3f}"


LABEL_OFFSETS = [(0.0, 0.0)] + [
    (r * np.cos(a), r * np.sin(a)) for r in range(9, 91, 9) for a in np.linspace(0, 2 * np.pi, 12, endpoint=False)
]  # points, spiralling out


def place_labels(ax, xs, ys, labels, fontsize: float = 6, beside: bool = False) -> None:
    """Name points with labels that do not overlap each other or leave the axes.

    Each label takes the first offset in :data:`LABEL_OFFSETS` whose box is free;
    with ``beside``, labels never sit on a point itself (the points are markers to
    keep visible). A displaced label gets a thin leader line to its point.
    """
    figure = ax.figure
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw_without_rendering()  # settle the layout: boxes are measured in display coordinates
    frame = ax.get_window_extent(renderer)
    anchors = ax.transData.transform(np.column_stack([xs, ys]))
    taken = [Bbox.from_bounds(x - 4, y - 4, 8, 8) for x, y in anchors] if beside else []
    offsets = LABEL_OFFSETS[1:] if beside else LABEL_OFFSETS
    for x, y, label in zip(xs, ys, labels):
        for dx, dy in offsets:
            text = ax.annotate(
                label,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha="center",
                va="center",
                fontsize=fontsize,
                annotation_clip=False,
            )
            box = text.get_window_extent(renderer).expanded(1.08, 1.15)
            free = (
                frame.contains(box.x0, box.y0)
                and frame.contains(box.x1, box.y1)
                and not any(box.overlaps(b) for b in taken)
            )
            text.remove()
            if free:
                break
        else:
            dx, dy = offsets[0]  # crowded everywhere: the nearest position
        leader = {"arrowstyle": "-", "linewidth": 0.4, "color": "0.3"} if (dx, dy) != (0.0, 0.0) else None
        ax.annotate(
            label,
            (x, y),
            xytext=(dx, dy),
            textcoords="offset points",
            ha="center",
            va="center",
            fontsize=fontsize,
            arrowprops=leader,
            annotation_clip=False,
            bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "alpha": 0.75, "linewidth": 0},
        )
        taken.append(box)


def include_points(ax, x, y, margin: float = 0.05) -> None:
    """Widen the axis limits, if needed, so that the points (x, y) are inside."""
    for values, (lo, hi), setter in ((x, ax.get_xlim(), ax.set_xlim), (y, ax.get_ylim(), ax.set_ylim)):
        new_lo, new_hi = min(lo, np.min(values)), max(hi, np.max(values))
        if (new_lo, new_hi) != (lo, hi):
            pad = margin * (new_hi - new_lo)
            setter(new_lo - pad * (new_lo < lo), new_hi + pad * (new_hi > hi))


def percentile_limits(ax, x: np.ndarray, y: np.ndarray, low: float = 0.1, high: float = 99.9) -> None:
    """Axis limits at the 0.1–99.9 percentiles (with a 5 % margin), so a few outliers do not squash the cloud."""
    for values, setter in ((x, ax.set_xlim), (y, ax.set_ylim)):
        lo, hi = np.percentile(values, [low, high])
        pad = 0.05 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.05
        setter(lo - pad, hi + pad)


def scale_groups(typical: dict[str, float], gap: float = SCALE_GAP) -> tuple[list[str], list[str]]:
    """Split series into (left axis, right axis): the right holds those more than ``gap`` × the smallest.

    ``typical`` maps a series to a positive typical magnitude (e.g. its median).
    Everything stays on the left when the magnitudes are within ``gap`` of each other.
    """
    finite = {k: v for k, v in typical.items() if np.isfinite(v) and v > 0}
    if not finite:
        return list(typical), []
    smallest = min(finite.values())
    right = [k for k, v in typical.items() if k in finite and v > gap * smallest]
    return [k for k in typical if k not in right], right


def middle_layer(n_layers: int) -> int:
    """The paper's middle layer: layers[len(layers) // 2] (6 of 13, 12 of 25)."""
    return n_layers // 2


def grid_layers(n_layers: int) -> list[int]:
    """Layers 0, L/4, L/2, 3L/4, L of the L + 1 hidden states (Figs. 11–13), without repeats."""
    last = n_layers - 1
    return sorted({round(last * f) for f in (0, 0.25, 0.5, 0.75, 1)})
