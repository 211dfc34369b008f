"""Unit tier: the tick locator of a symlog axis (ctxvar.figures.ticks): matplotlib's ticks at 0 and the powers of the
base from linthresh on, every k-th decade so that the labels fit the axis as drawn, where matplotlib's own label
every decade and overlap; and without ±linthresh, whose label would meet 0's, when k > 1."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import SymmetricalLogLocator

from ctxvar.figures.ticks import SymlogDecades

from support.figure_checks import drawn_texts, overlapping_texts, renderer_of

LINTHRESH = 1.0


def symlog_axis(size: tuple[float, float], which: str, low: float, high: float, locator=SymlogDecades):
    """A panel of ``size`` inches (at the figures' 200 dpi) whose ``which`` axis is symlog (linear within
    ±:data:`LINTHRESH`) from ``low`` to ``high``, ticked by ``locator`` as
    :meth:`ctxvar.figures.plotting.AxisScale.apply` ticks it, and laid out: (figure, the ticks in view)."""
    figure = Figure(figsize=size, dpi=200)
    ax = figure.subplots()
    getattr(ax, f"set_{which}scale")("symlog", linthresh=LINTHRESH)
    getattr(ax, f"set_{which}lim")(low, high)
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(locator(axis.get_transform()))
    renderer_of(figure)
    return figure, [tick for tick in axis.get_majorticklocs() if low <= tick <= high]


def stride(ticks) -> int:
    """k, where the positive ``ticks`` are every k-th decade counted from linthresh (linthresh itself or not)."""
    exponents = np.log10([tick / LINTHRESH for tick in ticks if tick > 0])
    assert np.allclose(exponents, np.round(exponents)), ticks  # powers of 10
    exponents = np.round(exponents).astype(int)
    k = exponents[1] - exponents[0] if len(exponents) > 1 else exponents[0]
    assert k > 0 and exponents[0] in (0, k) and (np.diff(exponents) == k).all(), ticks
    return int(k)


def test_an_axis_with_room_for_every_decade_labels_each_and_linthresh_as_matplotlib_does():
    figure, ticks = symlog_axis((2.4, 3.0), "y", 0, 1e8)
    assert ticks == [0.0, *10.0 ** np.arange(9)]
    assert symlog_axis((2.4, 3.0), "y", 0, 1e8, SymmetricalLogLocator)[1] == ticks
    assert not overlapping_texts(drawn_texts(figure))


@pytest.mark.parametrize("which, size", [("y", (2.4, 1.2)), ("x", (2.4, 2.0))])  # a short panel, a narrow one
def test_a_short_axis_labels_every_k_th_decade_from_linthresh_without_it(which, size):
    """Eight decades where about three labels fit: every k-th from linthresh, and 0, none of them overlapping;
    matplotlib's own locator labels all eight, on top of each other."""
    figure, ticks = symlog_axis(size, which, 0, 1e8)
    k = stride(ticks)
    assert k > 1 and ticks[0] == 0 and LINTHRESH not in ticks
    assert not overlapping_texts(drawn_texts(figure))
    crowded, every_decade = symlog_axis(size, which, 0, 1e8, SymmetricalLogLocator)
    assert len(every_decade) == 10 and overlapping_texts(drawn_texts(crowded))


def test_a_signed_axis_leaves_out_both_plus_and_minus_linthresh():
    figure, ticks = symlog_axis((2.4, 2.0), "y", -1e6, 1e6)
    assert stride(ticks) > 1 and ticks == sorted(-tick for tick in ticks)  # symmetric about 0
    assert 0 in ticks and LINTHRESH not in ticks and -LINTHRESH not in ticks
    assert not overlapping_texts(drawn_texts(figure))
    crowded, _ = symlog_axis((2.4, 2.0), "y", -1e6, 1e6, SymmetricalLogLocator)
    assert overlapping_texts(drawn_texts(crowded))


def test_the_labels_follow_the_axis_as_drawn():
    """One axis drawn ever taller: the locator asks the axis for its room each time it ticks it."""
    figure, _ = symlog_axis((2.4, 1.2), "y", 0, 1e8)
    strides = []
    for height in (1.2, 2.0, 3.0):
        figure.set_size_inches(2.4, height)
        renderer_of(figure)
        strides.append(stride([tick for tick in figure.axes[0].yaxis.get_majorticklocs() if 0 <= tick <= 1e8]))
        assert not overlapping_texts(drawn_texts(figure)), height
    assert strides == sorted(strides, reverse=True) and strides[0] > 1 and strides[-1] == 1
