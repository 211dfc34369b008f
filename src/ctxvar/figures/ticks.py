"""The symlog tick locator of :meth:`ctxvar.figures.plotting.AxisScale.apply`, apart because it subclasses one of
matplotlib's: :mod:`ctxvar.figures.plotting` imports it when an axis is drawn, not when it is imported."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import SymmetricalLogLocator


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
