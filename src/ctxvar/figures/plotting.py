"""What every figure shares: paper-sized style, saving, regression panels, data loading.

A figure function returns a :class:`Plot`: the matplotlib Figure and a table of
the numbers it draws (line and bar series, annotated regressions, histogram
counts). :func:`save_plot` writes it as PNG, PDF and CSV side by side, so the
CSV is what the picture shows. Figures are built with ``matplotlib.figure.Figure``
directly (no pyplot state, no GUI backend).

Axis scales follow one rule on the data (:func:`axis_scale`): values that span orders of magnitude get a
log axis (symlog where some are 0), all others keep the paper's linear axis. Every title is fitted to the
figure after drawing (:func:`fit_titles`): wrapped, then shrunk, never clipped.
"""

from __future__ import annotations

import functools
import logging
import re
import textwrap
from dataclasses import dataclass
from typing import Callable

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import SymmetricalLogLocator
from matplotlib.transforms import Bbox

from ctxvar.errors import InsufficientData
from ctxvar.files.atomic import atomic_path, write_csv
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
OUTLIER_FACTOR = 10.0  # a maximum beyond this × the 99th percentile is an outlier a linear axis would squash to
SPREAD_DECADES = 3.0  # ... as are positive values whose maximum is more than 10^this × their 1st percentile
MIN_TITLE_SIZE = 5.0  # points: a title too wide for its space is wrapped, then shrunk down to this, then cut


@dataclass
class Plot:
    figure: Figure
    data: pd.DataFrame  # the numbers drawn


def paper_style(function):
    """Build the figure under :data:`PAPER_STYLE` (rcParams are read when artists are made), and fit its titles
    (:func:`fit_titles`) when it is a :class:`Plot`."""

    @functools.wraps(function)
    def styled(*args, **kwargs):
        with matplotlib.rc_context(PAPER_STYLE):
            drawn = function(*args, **kwargs)
            if isinstance(drawn, Plot):
                fit_titles(drawn.figure)
            return drawn

    return styled


@dataclass(frozen=True)
class AxisScale:
    """A matplotlib axis scale: ``linear``, ``log`` or ``symlog`` (linear within ±``linthresh``)."""

    name: str = "linear"
    linthresh: float | None = None

    def apply(self, ax, axis: str) -> None:
        """Set it on ``ax``'s ``axis`` ("x" or "y"); a symlog axis labels the decades it has room for
        (:class:`SymlogDecades`)."""
        options = {"linthresh": self.linthresh} if self.name == "symlog" else {}
        (ax.set_xscale if axis == "x" else ax.set_yscale)(self.name, **options)
        if self.name == "symlog":
            drawn = ax.xaxis if axis == "x" else ax.yaxis
            drawn.set_major_locator(SymlogDecades(drawn.get_transform()))


class SymlogDecades(SymmetricalLogLocator):
    """matplotlib's symlog ticks, every k-th decade so that the labels fit the axis as drawn (as ``LogLocator``
    does with ``numticks="auto"``), and without ±linthresh when k > 1; matplotlib's own labels every decade up to
    15, which overlap on a panel."""

    def tick_values(self, vmin, vmax):
        if self.axis is not None:
            self.numticks = int(np.clip(self.axis.get_tick_space(), 3, 9))
        ticks = super().tick_values(vmin, vmax)
        decades = np.sort(ticks[ticks > 0])
        if 0 in ticks and len(decades) > 1 and decades[1] > 1.5 * self._base * decades[0]:
            # every k-th decade from ±linthresh, which is one decade's width from 0: its label would meet 0's
            ticks = ticks[~np.isclose(np.abs(ticks), self._linthresh)]
        return ticks


def axis_scale(values) -> AxisScale:
    """The axis scale for nonnegative ``values`` (Q, M, V, counts): linear, as the paper draws them, unless they
    span orders of magnitude, that is when their maximum exceeds :data:`OUTLIER_FACTOR` × their 99th percentile
    (a few far outliers, e.g. a decoder's sentence-start token at M ≈ 4·10⁷ beside types at 1–10³) or
    10^:data:`SPREAD_DECADES` × the 1st percentile of the positive values. Then a log axis, or symlog (linear
    below the power of 10 at or under the positive values' 1st percentile, so 0 and the first decade get labels
    apart) where some values are 0. Values with a negative one stay linear (a slope, a difference: their sign is
    what the axis shows)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    positive = values[values > 0]
    if len(positive) < 2 or (values < 0).any():
        return AxisScale()
    top, high, low = positive.max(), np.percentile(values, 99), np.percentile(positive, 1)
    if not (top > OUTLIER_FACTOR * high or top > 10**SPREAD_DECADES * low):
        return AxisScale()
    if (values > 0).all():
        return AxisScale("log")
    return AxisScale("symlog", linthresh=float(10 ** np.floor(np.log10(low))) or float(low))  # or: subnormal


def scale_axes(ax, x, y) -> tuple[AxisScale, AxisScale]:
    """Set :func:`axis_scale` of ``x`` and of ``y`` on ``ax``; returns both."""
    scales = axis_scale(x), axis_scale(y)
    scales[0].apply(ax, "x")
    scales[1].apply(ax, "y")
    return scales


def scale_grid(axis, lo: float, hi: float, n: int) -> np.ndarray:
    """``n`` values from ``lo`` to ``hi`` evenly spaced as ``axis`` (a matplotlib Axis) draws them: bin edges
    and line points that look even on a log or symlog axis. The ends are ``lo`` and ``hi`` exactly: the round
    trip through the transform can move them by an ulp, which would leave the extreme value out of a histogram."""
    forward = axis.get_transform()
    ends = forward.transform(np.array([[lo], [hi]], dtype=float))[:, 0]
    grid = forward.inverted().transform(np.linspace(ends[0], ends[1], n)[:, None])[:, 0]
    grid[0], grid[-1] = lo, hi
    return grid


def panels(nrows: int, ncols: int, size=PANEL_SIZE, **subplots) -> tuple[Figure, np.ndarray]:
    """A constrained-layout figure of ``nrows × ncols`` panels; axes as a 2-D array."""
    figure = Figure(figsize=(ncols * size[0], nrows * size[1]), layout="constrained")
    return figure, figure.subplots(nrows, ncols, squeeze=False, **subplots)


STEP_DECADES = 2  # a step axis is symlog when its positive steps span more than this many decades


def step_axis(ax, steps) -> None:
    """Label ``ax``'s x axis as the training step; symlog (linear up to the smallest positive step, so that step 0
    has its place) when the positive ``steps`` span more than :data:`STEP_DECADES` decades."""
    steps = np.asarray(steps)
    positive = steps[steps > 0]
    ax.set_xlabel("training step")
    if len(positive) and positive.max() > 10**STEP_DECADES * positive.min():
        ax.set_xscale("symlog", linthresh=positive.min())


def grid_shape(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return -(-n // cols), cols


def hide_unused(axes: np.ndarray, used: int) -> None:
    for ax in axes.flat[used:]:
        ax.set_visible(False)


TITLE_WORD = re.compile(r"(?:\$[^$]*\$|[^\s$])+")  # a word, or mathtext kept whole (its spaces are not breaks)
AXES_TITLE_REACH = 1.25  # an axes title may be this × the axes frame's width (it centres on the frame)


def title_room(text, renderer, ax=None) -> float:
    """The width in pixels ``text`` (centred) may take without leaving the figure, nor, for the title of ``ax``,
    reaching more than :data:`AXES_TITLE_REACH` × the width of its frame."""
    box, page = text.get_window_extent(renderer), text.figure.bbox
    centre = (box.x0 + box.x1) / 2
    room = 2 * min(centre - page.x0, page.x1 - centre) - 4  # a few pixels of margin
    return room if ax is None else min(room, AXES_TITLE_REACH * ax.get_position().width * page.width)


def wrapped(text, original: str, width: float, renderer, cut: bool = False) -> str:
    """``original`` with line breaks between words so that each line of ``text`` is at most ``width`` pixels;
    with ``cut``, a word wider than that is broken between characters too (never inside mathtext)."""

    def fits(line: str) -> bool:
        text.set_text(line)
        return text.get_window_extent(renderer).width <= width

    lines = []
    for line in original.split("\n"):
        words = TITLE_WORD.findall(line)
        if cut:
            words = [piece for word in words for piece in broken(word, fits)]
        current = ""
        for word in words:
            if current and not fits(f"{current} {word}"):
                lines.append(current)
                current = word
            else:
                current = f"{current} {word}" if current else word
        lines.append(current)
    return "\n".join(lines)


def broken(word: str, fits) -> list[str]:
    """``word`` cut between characters into pieces that ``fits`` (mathtext is left whole)."""
    if "$" in word or fits(word):
        return [word]
    pieces, current = [], ""
    for character in word:
        if current and not fits(current + character):
            pieces.append(current)
            current = ""
        current += character
    return pieces + [current]


def fit_text(text, renderer, room: float, original: str, size: float) -> bool:
    """Fit a title, given as ``original`` at font ``size``, into ``room`` pixels: as it is if it fits, else
    wrapped between words, then shrunk down to :data:`MIN_TITLE_SIZE`, then with its longest words cut.
    A title already fitted that still fits is kept. Returns whether ``text`` changed."""
    before = text.get_text(), text.get_fontsize()
    if text.get_window_extent(renderer).width <= room:
        return False
    text.set_text(original)
    text.set_fontsize(size)
    while text.get_window_extent(renderer).width > room:
        text.set_text(wrapped(text, original, room, renderer))
        if text.get_window_extent(renderer).width <= room or text.get_fontsize() <= MIN_TITLE_SIZE:
            break
        text.set_fontsize(max(MIN_TITLE_SIZE, text.get_fontsize() - 0.5))
    if text.get_window_extent(renderer).width > room:
        text.set_text(wrapped(text, original, room, renderer, cut=True))
    return (text.get_text(), text.get_fontsize()) != before


LEGEND_CHARS = 28  # a legend entry (a model id) longer than this is wrapped: the axes beside it keep their width


def legend_label(label: str) -> str:
    """``label`` wrapped to lines of at most :data:`LEGEND_CHARS` characters, at hyphens or anywhere (model ids
    have no spaces); mathtext is left whole."""
    return label if "$" in label else textwrap.fill(label, LEGEND_CHARS, break_on_hyphens=True)


FIRST_FIT_SLACK = 0.8  # before any layout is drawn, a title counts as fitting within this share of its room


def fit_titles(figure, max_layouts: int = 4) -> None:
    """Fit the figure's title and every axes title (:func:`fit_text`). Checked first on the layout before drawing,
    with :data:`FIRST_FIT_SLACK`; where a title does not fit, the layout is drawn and every title fitted to it
    again, until none changes (a wrapped title changes the layout)."""
    renderer = FigureCanvasAgg(figure).get_renderer()
    titles = [(figure._suptitle, None)] if figure._suptitle is not None else []
    titles += [(t, ax) for ax in figure.axes if ax.get_visible() for t in (ax.title, ax._left_title, ax._right_title)]
    titles = [(text, ax, text.get_text(), text.get_fontsize()) for text, ax in titles if text.get_text()]
    slack = FIRST_FIT_SLACK
    for _ in range(max_layouts):
        changed = [fit_text(t, renderer, slack * title_room(t, renderer, ax), o, s) for t, ax, o, s in titles]
        if not any(changed):
            return
        figure.draw_without_rendering()
        slack = 1.0


def save_plot(plot: Plot, png, pdf, csv) -> None:
    """Write the figure as PNG and PDF and its data as CSV, each atomically. The PDF keeps the layout drawn for
    the PNG (the layout engine measures every label again on each draw: a third of a large figure's time)."""
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        with atomic_path(path) as tmp:
            plot.figure.savefig(tmp, format=fmt, dpi=PNG_DPI)
        plot.figure.set_layout_engine("none")
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


MAX_NAMED_OUTLIERS = 5  # the far outliers named on a panel, largest first


def far_outliers(values: np.ndarray) -> np.ndarray:
    """Mask of the values more than :data:`OUTLIER_FACTOR` × the 99th percentile of nonnegative ``values``
    (:func:`axis_scale`'s first criterion); none for values with a negative one."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if len(finite) < 2 or (finite < 0).any():
        return np.zeros(len(values), dtype=bool)
    return values > OUTLIER_FACTOR * np.percentile(finite, 99)


def name_outliers(ax, x: np.ndarray, y: np.ndarray, names) -> list[str]:
    """Write the name of each far outlier of x or y (:func:`far_outliers`, at most :data:`MAX_NAMED_OUTLIERS`,
    largest first) beside its point; returns the names written."""
    far = np.flatnonzero(far_outliers(x) | far_outliers(y))
    far = far[np.argsort(-np.maximum(x[far], y[far]))][:MAX_NAMED_OUTLIERS]
    for index in far:
        ax.annotate(
            str(names[index]),
            (x[index], y[index]),
            xytext=(-3, 5),
            textcoords="offset points",
            ha="right",
            fontsize=6,
            bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "alpha": 0.75, "linewidth": 0},
        )
    return [str(names[index]) for index in far]


def regression_panel(
    ax, x: np.ndarray, y: np.ndarray, keep: np.ndarray, colour=None, norm=None, cmap="rainbow", names=None
) -> dict:
    """Scatter every point, fit OLS of y on x over ``keep`` and draw the line.

    Both axes get :func:`axis_scale` of their values, and the line is drawn at points evenly spaced on the x
    axis, 200 where either axis is not linear, so it is the line y = a + b x whichever axis is logarithmic; on a
    log or symlog y axis (nonnegative values) only where a + b x ≥ 0. With ``names`` (one per point), the far
    outliers are named (:func:`name_outliers`).
    Returns ``{"slope", "intercept", "r2", "n_fit", "x_scale", "y_scale", "named"}`` as fitted (NaN when fewer
    than 2 points) and drawn (``named``: the outliers named, comma-separated); :func:`fit_label` writes it for a
    title, where it never hides points.
    """
    x_scale, y_scale = scale_axes(ax, x, y)
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
        straight = x_scale.name == y_scale.name == "linear"  # else the line curves on the axes, or stops at 0
        xs = scale_grid(ax.xaxis, x[keep].min(), x[keep].max(), 2 if straight else 200)
        ys = intercept + slope * xs
        if y_scale.name != "linear":  # y ≥ 0 here: the line's negative part would stretch the axis down decades
            ys = np.where(ys >= 0, ys, np.nan)
        ax.plot(xs, ys, color="black", linewidth=1)
    named = name_outliers(ax, x, y, names) if names is not None else []
    return {
        "slope": slope,
        "intercept": intercept,
        "r2": r2,
        "n_fit": int(keep.sum()),
        "x_scale": x_scale.name,
        "y_scale": y_scale.name,
        "named": ", ".join(named),
    }


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
        placed = ax.annotate(
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
        # Placed in the settled layout, the labels stay out of it: counted in, they moved the axes under them and
        # pushed a colorbar's label off the figure.
        placed.set_in_layout(False)
        taken.append(box)


def include_points(ax, x, y, margin: float = 0.05) -> None:
    """Widen the axis limits, if needed, so that the points (x, y) are inside."""
    for values, (lo, hi), setter in ((x, ax.get_xlim(), ax.set_xlim), (y, ax.get_ylim(), ax.set_ylim)):
        new_lo, new_hi = min(lo, np.min(values)), max(hi, np.max(values))
        if (new_lo, new_hi) != (lo, hi):
            pad = margin * (new_hi - new_lo)
            setter(new_lo - pad * (new_lo < lo), new_hi + pad * (new_hi > hi))


def percentile_limits(ax, x: np.ndarray, y: np.ndarray, low: float = 0.1, high: float = 99.9) -> None:
    """Linear axes' limits at the 0.1–99.9 percentiles (with a 5 % margin), so a few outliers do not squash the
    cloud; a log or symlog axis (:func:`axis_scale`) keeps every point in view."""
    for values, setter, scale in ((x, ax.set_xlim, ax.get_xscale()), (y, ax.set_ylim, ax.get_yscale())):
        if scale != "linear":
            continue
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
