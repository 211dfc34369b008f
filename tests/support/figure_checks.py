"""Checks of a drawn matplotlib figure as the Agg renderer lays it out: every text it draws (titles, axis labels,
offset texts, the tick labels in view, annotations, legend and colorbar texts) stays on the canvas and overlaps no
other, and a line that is straight in its data coordinates is straight on the page; figures laid out once with
their texts (:class:`Drawn`, :func:`laid_out`), for the tests of a module to share, and a panel's fitted lines
(:func:`fit_lines`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Annotation, Text

from ctxvar.figures.plotting import FIT_GID

OVERLAP_PX = 0.5  # boxes that share less than this (pixels, in both directions) touch, they do not overlap
STRAIGHT_PX = 0.5  # a drawn point this far (pixels) from the chord through a line's ends bends it


def renderer_of(figure):
    """The Agg renderer of ``figure`` after laying it out as its PNG is drawn (no pixels)."""
    canvas = FigureCanvasAgg(figure)
    figure.draw_without_rendering()
    return canvas.get_renderer()


def shown(text: Text, renderer) -> bool:
    if not text.get_visible() or not text.get_text().strip():
        return False
    if text.axes is not None and not text.axes.get_visible():
        return False
    return not isinstance(text, Annotation) or text._check_xy(renderer)  # an annotation off its axes is not drawn


def axis_texts(axis) -> tuple[list[Text], list[Text]]:
    """(every text ``axis`` owns, those it draws): its label, offset text and the labels of the ticks in view
    (matplotlib keeps spare ticks, which it does not draw); none where the axis is hidden (a twin's x axis)."""
    owned = [axis.label, axis.offsetText]
    owned += [label for tick in axis.majorTicks + axis.minorTicks for label in (tick.label1, tick.label2)]
    if not axis.get_visible():
        return owned, []
    drawn = [label for tick in axis._update_ticks() if tick.get_visible() for label in (tick.label1, tick.label2)]
    return owned, [axis.label, axis.offsetText, *drawn]


def drawn_texts(figure, renderer=None) -> list[tuple[str, object]]:
    """(text, window box) of every text ``figure`` draws, laid out as :func:`renderer_of` does."""
    renderer = renderer or renderer_of(figure)
    owned, drawn = set(), []
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            axis_owned, axis_drawn = axis_texts(axis)
            owned |= {id(text) for text in axis_owned}
            drawn += axis_drawn if ax.get_visible() else []
    texts = [text for text in figure.findobj(Text) if id(text) not in owned] + drawn
    # Text's own box: an annotation's includes its leader line, which may cross other texts
    return [(text.get_text(), Text.get_window_extent(text, renderer)) for text in texts if shown(text, renderer)]


def overlapping_texts(texts: list[tuple[str, object]]) -> list[tuple[str, str]]:
    """Pairs of ``texts`` (:func:`drawn_texts`) whose boxes overlap by more than :data:`OVERLAP_PX` in both
    directions."""
    boxes = np.array([[box.x0, box.y0, box.x1, box.y1] for _, box in texts]).reshape(-1, 4)
    wide = np.minimum(boxes[:, None, 2], boxes[None, :, 2]) - np.maximum(boxes[:, None, 0], boxes[None, :, 0])
    high = np.minimum(boxes[:, None, 3], boxes[None, :, 3]) - np.maximum(boxes[:, None, 1], boxes[None, :, 1])
    first, second = np.nonzero(np.triu((wide > OVERLAP_PX) & (high > OVERLAP_PX), k=1))
    return [(texts[i][0], texts[j][0]) for i, j in zip(first, second)]


def texts_off_canvas(figure, texts: list[tuple[str, object]]) -> list[str]:
    """The ``texts`` (:func:`drawn_texts` of ``figure``) that reach more than a pixel beyond its canvas."""
    page = figure.bbox
    return [
        text
        for text, box in texts
        if box.x0 < page.x0 - 1 or box.x1 > page.x1 + 1 or box.y0 < page.y0 - 1 or box.y1 > page.y1 + 1
    ]


def finite_points(line) -> tuple[np.ndarray, np.ndarray]:
    """(data, display) coordinates of the points of ``line`` that are drawn (finite x and y)."""
    data = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
    data = data[np.isfinite(data).all(axis=1)]
    return data, line.get_transform().transform(data)


def off_chord(points: np.ndarray) -> float:
    """The largest distance of ``points`` (n × 2) from the straight line through the first and the last."""
    start, end = points[0], points[-1]
    direction = end - start
    length = np.hypot(*direction)
    if length == 0:
        return float(np.max(np.hypot(*(points - start).T)))
    offsets = points - start
    return float(np.max(np.abs(direction[0] * offsets[:, 1] - direction[1] * offsets[:, 0]) / length))


def straight_in_data(line, rtol: float = 1e-9) -> bool:
    """Whether ``line`` has three or more drawn points, all on one straight line of its data coordinates."""
    data, _ = finite_points(line)
    if len(data) < 3:
        return False
    scale = np.ptp(data, axis=0)
    scale[scale == 0] = 1.0
    return off_chord(data / scale) <= rtol


def straight_on_display(line) -> bool:
    """Whether the drawn points of ``line`` lie within :data:`STRAIGHT_PX` of one straight line on the page."""
    _, display = finite_points(line)
    return len(display) < 3 or off_chord(display) <= STRAIGHT_PX


def bent_straight_lines(figure) -> list[str]:
    """Lines of ``figure`` straight in their data coordinates but bent on the page (a linear fit on a log axis),
    named by their axes' title. The figure must be laid out (:func:`renderer_of`)."""
    return [
        ax.get_title() or repr(ax)
        for ax in figure.axes
        if ax.get_visible()
        for line in ax.lines
        if straight_in_data(line) and not straight_on_display(line)
    ]


@dataclass
class Drawn:
    """A figure as its PNG lays it out, and every text it draws (:func:`~support.figure_checks.drawn_texts`)."""

    figure: object
    data: pd.DataFrame
    texts: list


def laid_out(plots: dict) -> dict[str, Drawn]:
    """``plots`` ({name: Plot}, none a placeholder) laid out, each with its texts."""
    assert not any("not_drawn" in plot.data for plot in plots.values())
    return {name: Drawn(plot.figure, plot.data, drawn_texts(plot.figure)) for name, plot in plots.items()}


def fit_lines(ax) -> list:
    """The lines of ``ax`` that :func:`ctxvar.figures.plotting.regression_panel` draws for its fit."""
    return [line for line in ax.lines if line.get_gid() == FIT_GID]
