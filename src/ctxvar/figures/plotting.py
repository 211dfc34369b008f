"""What every figure shares: paper-sized style, saving, regression panels, data loading.

A figure function returns a :class:`Plot`: the matplotlib Figure and a table of
the numbers it draws (line and bar series, annotated regressions, histogram
counts). :func:`save_plot` writes it as PNG, PDF and CSV side by side, so the
CSV is what the picture shows. Figures are built with ``matplotlib.figure.Figure``
directly (no pyplot state, no GUI backend), and matplotlib is imported by the functions that draw, not with the
modules of :mod:`ctxvar.figures`: the workflow reads the catalogue, which holds the draw functions, at start-up.

Axis scales follow one rule on the data (:func:`axis_scale`): values that span orders of magnitude get a
log axis (symlog where some are 0), all others keep the paper's linear axis, and no axis clips a point away. A
fitted straight line is drawn only on linear axes, where it is straight (:func:`regression_panel`). Every title
is fitted to the figure after drawing (:func:`fit_titles`): wrapped between words, then shrunk, then wrapped at a
name's separators, never clipped; then the names of points are placed where they overlap no other text
(:func:`place_labels`).
"""

from __future__ import annotations

import functools
import logging
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from ctxvar.errors import InsufficientData
from ctxvar.files.atomic import atomic_path, write_csv
from ctxvar.stats.layers import ols

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

PNG_DPI = 200
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
    "figure.dpi": PNG_DPI,  # laid out and measured as the PNG is drawn: hinted text is wider at 200 dpi than at 100
}
PANEL_SIZE = (2.4, 2.0)  # inches per panel
SCALE_GAP = 10.0  # series whose typical values differ by more than this factor go on a second axis
OUTLIER_FACTOR = 10.0  # a maximum beyond this × the 99th percentile is an outlier a linear axis would squash to
SPREAD_DECADES = 3.0  # ... as are positive values whose maximum is more than 10^this × their 1st percentile
BULK_SHARE = 0.1  # ... as are values whose middle 90 % take less than this share of their range (outliers, many)
MIN_TITLE_SIZE = 5.0  # points: a title too wide for its space is wrapped and shrunk down to this, then cut


@dataclass
class Plot:
    figure: Figure
    data: pd.DataFrame  # the numbers drawn


def paper_style(function):
    """Build the figure under :data:`PAPER_STYLE` (rcParams are read when artists are made), fit its titles and
    thin its tick labels (:func:`fit_titles`) when it is a :class:`Plot`, then place the labels :func:`place_labels`
    was asked for, in the layout the titles leave."""

    @functools.wraps(function)
    def styled(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(PAPER_STYLE):
            PENDING_LABELS.append([])
            try:
                drawn = function(*args, **kwargs)
                settled = isinstance(drawn, Plot) and fit_titles(drawn.figure)
                place_pending_labels(PENDING_LABELS[-1], laid_out={id(drawn.figure)} if settled else set())
            finally:
                PENDING_LABELS.pop()
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
            from ctxvar.figures.ticks import SymlogDecades

            drawn = ax.xaxis if axis == "x" else ax.yaxis
            drawn.set_major_locator(SymlogDecades(drawn.get_transform()))


def axis_scale(values) -> AxisScale:
    """The axis scale for nonnegative ``values`` (Q, M, V, counts): linear, as the paper draws them, unless they
    span orders of magnitude, that is when their maximum exceeds :data:`OUTLIER_FACTOR` × their 99th percentile
    (a few far outliers, e.g. a decoder's sentence-start token at M ≈ 4·10⁷ beside types at 1–10³), or
    10^:data:`SPREAD_DECADES` × the 1st percentile of the positive values, or when it exceeds
    :data:`OUTLIER_FACTOR` × their median and the values from their 5th to their 95th percentile take less than
    :data:`BULK_SHARE` of their range (a group of outliers, 1–2 % of the types as a decoder's massive activations,
    holding the 99th percentile; values within a decade keep their linear axis, where a log one has no tick to
    label). Then a log axis, or
    symlog (linear below the power of 10 at or under the positive values' 1st percentile, so 0 and the first decade
    get labels apart) where some values are 0. Values with a negative one stay linear (a slope, a difference: their
    sign is what the axis shows)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    positive = values[values > 0]
    if len(positive) < 2 or (values < 0).any():
        return AxisScale()
    top, high, low = positive.max(), np.percentile(values, 99), np.percentile(positive, 1)
    middle = np.subtract(*np.percentile(values, [95, 5]))
    squashed = middle < BULK_SHARE * (top - values.min()) and top > OUTLIER_FACTOR * np.median(positive)
    if not (top > OUTLIER_FACTOR * high or top > 10**SPREAD_DECADES * low or squashed):
        return AxisScale()
    if (values > 0).all():
        return AxisScale("log")
    return AxisScale("symlog", linthresh=float(10 ** np.floor(np.log10(low))) or float(low))  # or: subnormal


CURVE_DECADES = 2.0  # positive per-layer values spanning more than this many decades get a log axis


def curve_scale(values) -> AxisScale:
    """The y scale of per-layer curves (one value per layer and model): log where every finite value is positive,
    some is above 1, and they span more than :data:`CURVE_DECADES` decades (a decoder's C.V. of Q(X_t) at 28 beside
    an encoder's 0.04 and a null model's 0.02), else linear. Values all within [0, 1] (shares, R², anisotropy) are
    read against that range, so they keep the linear axis."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 2 or (values <= 0).any() or values.max() <= max(1.0, 10**CURVE_DECADES * values.min()):
        return AxisScale()
    return AxisScale("log")


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
    from matplotlib.figure import Figure

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


TITLE_WORD = re.compile(r"(?:\$[^$]*\$|[^ \t$])+")  # a word, or mathtext kept whole; a no-break space (\xa0) joins
NO_BREAK = "\xa0"  # joins words a title keeps on one line ("layer 3", "R² 0.78")
AXES_TITLE_REACH = 1.25  # an axes title may be this × the axes frame's width (it centres on the frame)


def title_room(text, renderer, ax=None) -> float:
    """The width in pixels ``text`` (centred) may take without leaving the figure, nor, for the title of ``ax``,
    reaching more than :data:`AXES_TITLE_REACH` × the width of its frame."""
    box, page = text.get_window_extent(renderer), text.figure.bbox
    centre = (box.x0 + box.x1) / 2
    room = 2 * min(centre - page.x0, page.x1 - centre) - 4  # a few pixels of margin
    return room if ax is None else min(room, AXES_TITLE_REACH * ax.get_position().width * page.width)


NAME_SEPARATOR = re.compile(r"(?<=[-_/.])(?=.)")  # a name (a model id) may wrap after one of these
SHRINK_BEFORE_NAMES = 1.5  # points a title is shrunk, wrapped between words only, before its names are wrapped


def wrapped(text, original: str, width: float, renderer, cut: str = "") -> str:
    """``original`` with line breaks so that each line of ``text`` is at most ``width`` pixels: between words, and
    with ``cut`` also inside a word where :func:`broken` allows ("names" or "characters")."""

    def fits(line: str) -> bool:
        text.set_text(line)
        return text.get_window_extent(renderer).width <= width

    lines = []
    for line in original.split("\n"):
        pieces = []  # (piece, whether it continues the word of the piece before it)
        for word in TITLE_WORD.findall(line):
            units = broken(word, fits, characters=cut == "characters") if cut else [word]
            pieces += [(unit, index > 0) for index, unit in enumerate(units)]
        current = ""
        for piece, continues in pieces:
            candidate = current + piece if continues else (f"{current} {piece}" if current else piece)
            if current and not fits(candidate):
                lines.append(current)
                current = piece
            else:
                current = candidate
        lines.append(current)
    return "\n".join(lines)


def broken(word: str, fits, characters: bool = False) -> list[str]:
    """The pieces ``word`` may wrap between: after each of its separators (:data:`NAME_SEPARATOR`: - _ / .), and
    with ``characters`` between the characters of a piece that alone does not ``fits``; mathtext stays whole."""
    if "$" in word:
        return [word]
    pieces = NAME_SEPARATOR.split(word)
    if characters:
        pieces = [unit for piece in pieces for unit in ([piece] if fits(piece) else list(piece))]
    return pieces


def fit_text(text, renderer, room: float, original: str, size: float) -> bool:
    """Fit a title, given as ``original`` at font ``size``, into ``room`` pixels: as it is if it fits, else wrapped
    between words and shrunk by up to :data:`SHRINK_BEFORE_NAMES` points, then also wrapped after a name's
    separators and shrunk down to :data:`MIN_TITLE_SIZE`, then, last, broken between characters. A title already
    fitted that still fits is kept. Returns whether ``text`` changed."""
    before = text.get_text(), text.get_fontsize()
    if text.get_window_extent(renderer).width <= room:
        return False
    floor = max(MIN_TITLE_SIZE, size - SHRINK_BEFORE_NAMES)
    attempts = [(points, "") for points in np.arange(size, floor - 1e-9, -0.5)]
    attempts += [(points, "names") for points in np.arange(floor, MIN_TITLE_SIZE - 1e-9, -0.5)]
    for points, cut in attempts + [(MIN_TITLE_SIZE, "characters")]:
        text.set_fontsize(points)
        text.set_text(wrapped(text, original, room, renderer, cut))
        if text.get_window_extent(renderer).width <= room:
            break
    return (text.get_text(), text.get_fontsize()) != before


LEGEND_CHARS = 28  # a legend entry (a model id) longer than this is wrapped: the axes beside it keep their width


def legend_label(label: str) -> str:
    """``label`` wrapped to lines of at most :data:`LEGEND_CHARS` characters, at hyphens or anywhere (model ids
    have no spaces); mathtext is left whole."""
    return label if "$" in label else textwrap.fill(label, LEGEND_CHARS, break_on_hyphens=True)


def thin_tick_labels(figure, renderer) -> bool:
    """Drop an axis's minor tick labels where two of its tick labels overlap in the figure's layout as last drawn:
    a log axis of less than about two decades labels 2–9 × 10ⁿ too, more than a short axis holds. Returns whether
    any were dropped."""
    from matplotlib.ticker import NullFormatter

    thinned = False
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis) if ax.get_visible() else ():
            minor = [label for label in axis.get_ticklabels(minor=True) if label.get_visible() and label.get_text()]
            labels = minor + [label for label in axis.get_ticklabels() if label.get_visible() and label.get_text()]
            boxes = [label.get_window_extent(renderer) for label in labels]
            if minor and any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :]):
                axis.set_minor_formatter(NullFormatter())
                thinned = True
    return thinned


def fit_titles(figure, max_layouts: int = 4) -> bool:
    """Fit the figure's title and every axes title (:func:`fit_text`) to the figure's layout, and drop the minor tick
    labels that overlap (:func:`thin_tick_labels`), drawn again and fitted to it until nothing changes (a wrapped
    title, or labels dropped, change the layout). Titles are fitted to a drawn layout only: before it, an axes'
    frame can be twice as wide as the layout leaves it (a legend beside it). Returns whether the layout last drawn
    is the figure's (nothing changed after it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    titles = [(figure._suptitle, None)] if figure._suptitle is not None else []
    titles += [(t, ax) for ax in figure.axes if ax.get_visible() for t in (ax.title, ax._left_title, ax._right_title)]
    titles = [(text, ax, text.get_text(), text.get_fontsize()) for text, ax in titles if text.get_text()]
    for _ in range(max_layouts):
        figure.draw_without_rendering()
        thinned = thin_tick_labels(figure, renderer)
        refitted = any([fit_text(t, renderer, title_room(t, renderer, ax), o, s) for t, ax, o, s in titles])
        if not (thinned or refitted):
            return True
    return False


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
    from matplotlib.figure import Figure

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
    """Name each far outlier of x or y (:func:`far_outliers`, at most :data:`MAX_NAMED_OUTLIERS`, largest first)
    beside its point (:func:`place_labels`); returns the names."""
    far = np.flatnonzero(far_outliers(x) | far_outliers(y))
    far = far[np.argsort(-np.maximum(x[far], y[far]))][:MAX_NAMED_OUTLIERS]
    named = [str(names[index]) for index in far]
    if named:
        place_labels(ax, x[far], y[far], named, beside=True)
    return named


FIT_GID = "OLS line"  # the gid of the fitted line :func:`regression_panel` draws
NO_LINE_NOTE = "(log axis: no line)"


def regression_panel(
    ax, x: np.ndarray, y: np.ndarray, keep: np.ndarray, colour=None, norm=None, cmap="rainbow", names=None
) -> dict:
    """Scatter every point, fit OLS of y on x over ``keep`` and draw the line.

    Both axes get :func:`axis_scale` of their values and no limits that would leave a point out. The fitted line
    y = a + b·x is straight on linear axes only: there it is drawn (tagged :data:`FIT_GID`) from the smallest to the
    largest fitted x; on a panel with a log or symlog axis it would be a curve, so it is not drawn and
    :func:`fit_label` says so. With ``names`` (one per point), the far outliers are named (:func:`name_outliers`).
    Returns ``{"slope", "intercept", "r2", "n_fit", "x_scale", "y_scale", "line", "named"}`` as fitted (NaN when
    fewer than 2 points) and drawn (``line``: whether the line is drawn; ``named``: the outliers named,
    comma-separated).
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
    line = bool(np.isfinite(slope)) and x_scale.name == y_scale.name == "linear"
    if line:
        ends = np.array([x[keep].min(), x[keep].max()])
        ax.plot(ends, intercept + slope * ends, color="black", linewidth=1, gid=FIT_GID)
    named = name_outliers(ax, x, y, names) if names is not None else []
    return {
        "slope": slope,
        "intercept": intercept,
        "r2": r2,
        "n_fit": int(keep.sum()),
        "x_scale": x_scale.name,
        "y_scale": y_scale.name,
        "line": line,
        "named": ", ".join(named),
    }


PLAIN_RANGE = (1e-3, 1e3)  # |value| written plainly in this range (3 significant digits need no exponent there)


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits: plainly (−1.01, 0.00596, 484) where, so rounded, its magnitude is
    in :data:`PLAIN_RANGE`, else as mathtext a × 10^k (7.20 × 10⁶); "n/a" for NaN."""
    if not np.isfinite(value):
        return "n/a"
    rounded = float(f"{value:.{digits - 1}e}")
    if rounded == 0 or PLAIN_RANGE[0] <= abs(rounded) < PLAIN_RANGE[1]:
        return f"{rounded:.{digits}g}".replace("-", "−")
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return rf"${mantissa}\times10^{{{int(exponent)}}}$"


def fit_label(fit: dict) -> str:
    """The slope and R² of :func:`regression_panel`'s fit, and on a second line :data:`NO_LINE_NOTE` where a log
    axis kept its line from being drawn."""
    label = f"slope{NO_BREAK}{significant(fit['slope'])}, $R^2${NO_BREAK}{significant(fit['r2'])}"
    return label if fit["line"] or not np.isfinite(fit["slope"]) else f"{label}\n{NO_LINE_NOTE}"


LABEL_OFFSETS = [(0.0, 0.0)] + [
    (r * np.cos(a), r * np.sin(a)) for r in range(9, 91, 9) for a in np.linspace(0, 2 * np.pi, 12, endpoint=False)
]  # points, spiralling out
PENDING_LABELS: list[list[tuple]] = []  # per figure being drawn under paper_style: the labels to place at its end
LABEL_BOX = {"boxstyle": "round,pad=0.1", "facecolor": "white", "alpha": 0.75, "linewidth": 0}


def place_labels(ax, xs, ys, labels, fontsize: float = 6, beside: bool = False) -> None:
    """Name the points (``xs``, ``ys``) of ``ax`` with labels that overlap no other label and stay inside the
    axes' frame (so off the tick labels and titles around it), placed by :func:`place_pending_labels` once the
    figure's layout is final: at the end of the :func:`paper_style` function drawing it, or at once outside one.
    With ``beside``, no label sits on one of these points (the points are markers to keep visible)."""
    request = (ax, np.asarray(xs, float), np.asarray(ys, float), [str(label) for label in labels], fontsize, beside)
    if PENDING_LABELS:
        PENDING_LABELS[-1].append(request)
    else:
        place_pending_labels([request])


def place_pending_labels(requests: list[tuple], laid_out: set[int] = frozenset()) -> None:
    """Place the labels of :func:`place_labels` ``requests``: each takes the first offset in :data:`LABEL_OFFSETS`
    whose box is inside its axes' frame and free of every label placed before it in the figure; a displaced label
    gets a thin leader line to its point. Boxes are measured in the figure's settled layout, drawn here unless the
    figure's id is in ``laid_out``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    settled, taken = set(laid_out), {}
    for ax, xs, ys, labels, fontsize, beside in requests:
        figure = ax.figure
        renderer = FigureCanvasAgg(figure).get_renderer()
        if id(figure) not in settled:
            figure.draw_without_rendering()  # boxes are measured in display coordinates
            settled.add(id(figure))
        boxes = taken.setdefault(id(figure), [])
        frame = ax.get_window_extent(renderer)
        anchors = ax.transData.transform(np.column_stack([xs, ys]))
        points = [Bbox.from_bounds(x - 4, y - 4, 8, 8) for x, y in anchors] if beside else []
        offsets = LABEL_OFFSETS[1:] if beside else LABEL_OFFSETS
        for point, (x, y), label in zip(zip(xs, ys), anchors, labels):
            probe = ax.annotate(label, (0, 0), xycoords="figure pixels", fontsize=fontsize, ha="center", va="center")
            size = probe.get_window_extent(renderer)
            probe.remove()
            width, height = 1.08 * size.width + 2, 1.15 * size.height + 2  # the white box around it
            scale = figure.dpi / 72  # offsets are in points
            for dx, dy in offsets:
                box = Bbox.from_bounds(x + dx * scale - width / 2, y + dy * scale - height / 2, width, height)
                inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
                if inside and not any(box.overlaps(other) for other in boxes + points):
                    break
            else:
                dx, dy = offsets[0]  # crowded everywhere: the nearest position
                box = Bbox.from_bounds(x + dx * scale - width / 2, y + dy * scale - height / 2, width, height)
            leader = {"arrowstyle": "-", "linewidth": 0.4, "color": "0.3"} if (dx, dy) != (0.0, 0.0) else None
            placed = ax.annotate(
                label,
                point,
                xytext=(dx, dy),
                textcoords="offset points",
                ha="center",
                va="center",
                fontsize=fontsize,
                arrowprops=leader,
                annotation_clip=False,
                bbox=LABEL_BOX,
            )
            # Placed in the settled layout, the labels stay out of it: counted in, they would move the axes under
            # them (and pushed a colorbar's label off the figure).
            placed.set_in_layout(False)
            boxes.append(box)


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
