"""Figures of a model's input and output embedding matrices (:mod:`ctxvar.stats.embedding_matrices`).

The 2-D projection is drawn as Machina & Mercer (2024) publish theirs: every row as a one-pixel point,
on axes symmetric about 0 that reach the largest absolute coordinate, ticked at −m, 0 and m; each panel's
title gives the matrix's I(W) from embedding_matrices.csv.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.errors import InsufficientData
from ctxvar.figures.cross_model import figure_legend, model_style
from ctxvar.figures.plotting import Plot, panels, paper_style, step_axis

MATRIX_ORDER = ("input", "output", "tied")
CENTRING = ((False, "uncentred"), (True, "centred"))
CHECKPOINT_PANELS = (
    ("isotropy", False, "$I(W)$"),
    ("isotropy", True, "$I(W)$, centred"),
    ("mean_cosine", False, "mean cosine"),
)


def matrices_in(table: pd.DataFrame) -> list[str]:
    """The matrix names of ``table`` in the order input, output, tied."""
    present = set(table["matrix"])
    return [name for name in MATRIX_ORDER if name in present]


def matrix_label(name: str) -> str:
    return "input = output (tied)" if name == "tied" else name


SMALLEST_PLAIN_ISOTROPY = 1e-3  # below, I(W) is written as e^(log I(W)): it may underflow to 0 (e^−745)


def isotropy_label(isotropy: float, log_isotropy: float) -> str:
    """I(W) with three significant digits, or as a power of e where it is below :data:`SMALLEST_PLAIN_ISOTROPY`."""
    if isotropy >= SMALLEST_PLAIN_ISOTROPY or not np.isfinite(log_isotropy):
        return f"$I(W) = {isotropy:.3g}$"
    return f"$I(W) = e^{{{log_isotropy:.4g}}}$"


@paper_style
def projection(points: pd.DataFrame, model: str, matrices: pd.DataFrame | None = None) -> Plot:
    """One row of panels per matrix, uncentred then centred: each row of W at (x, y), its coordinates on
    the first two right singular vectors. With ``matrices`` (embedding_matrices.csv), each panel's title gives
    its I(W), and the table drawn gains columns ``isotropy`` and ``log_isotropy``."""
    names = matrices_in(points)
    if not names or points.empty:
        raise InsufficientData("no embedding matrix rows")
    if matrices is not None:
        points = points.merge(
            matrices[["matrix", "centred", "isotropy", "log_isotropy"]], on=["matrix", "centred"], how="left"
        )
    figure, axes = panels(len(names), len(CENTRING), size=(2.6, 2.4))
    for row_axes, name in zip(axes, names):
        for ax, (centre, label) in zip(row_axes, CENTRING):
            part = points[(points["matrix"] == name) & (points["centred"] == centre)]
            ax.plot(part["x"], part["y"], ",", color="C0", rasterized=True)
            reach = float(np.nanmax(np.abs(part[["x", "y"]].to_numpy()))) if len(part) else 0.0
            reach = reach if reach > 0 else 1.0
            ax.set(xlim=(-reach, reach), ylim=(-reach, reach), xticks=[-reach, 0, reach], yticks=[-reach, 0, reach])
            ax.xaxis.set_major_formatter("{x:.3g}")
            ax.yaxis.set_major_formatter("{x:.3g}")
            ax.set(xlabel="on right singular vector 1", ylabel="on right singular vector 2")
            title = f"{matrix_label(name)}, {label}"
            if matrices is not None:
                title += "\n" + isotropy_label(float(part["isotropy"].iloc[0]), float(part["log_isotropy"].iloc[0]))
            ax.set_title(title)
    figure.suptitle(f"{model}: embedding matrices on their top two singular vectors")
    return Plot(figure, points)


def checkpoint_table(steps: dict[str, int], tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """embedding_matrices.csv of each checkpoint stacked, with its model id and step."""
    frames = [tables[model].assign(model=model, step=step) for model, step in steps.items()]
    table = pd.concat(frames, ignore_index=True)
    return table[["model", "step", *[c for c in table.columns if c not in ("model", "step")]]]


@paper_style
def checkpoints(table: pd.DataFrame, family: str) -> Plot:
    """Against the training step: I(W) uncentred and centred, and the mean cosine, one line per matrix.
    A symlog step axis when the steps span more than two decades."""
    if table.empty:
        raise InsufficientData("no checkpoint has an embedding matrix")
    figure, axes = panels(1, len(CHECKPOINT_PANELS), size=(2.5, 2.2))
    for ax, (column, centre, label) in zip(axes[0], CHECKPOINT_PANELS):
        for index, name in enumerate(matrices_in(table)):
            part = table[(table["matrix"] == name) & (table["centred"] == centre)].sort_values("step")
            ax.plot(part["step"], part[column], color=f"C{index}", marker="o", label=matrix_label(name))
        ax.set_ylabel(label)
        step_axis(ax, table["step"])
    axes[0][0].legend(frameon=False)
    figure.suptitle(f"{family}: embedding matrices across checkpoints")
    return Plot(figure, table)


@paper_style
def isotropy_by_step(table: pd.DataFrame) -> Plot:
    """Machina & Mercer's I(W) across checkpoints, every family on one figure: a row of panels per matrix (input,
    output, or one tied matrix), uncentred then centred as :func:`checkpoints` draws them, I(W) against the
    training step, one line per checkpoint family. ``table``: each checkpoint's embedding_matrices.csv stacked,
    with ``family``, ``model`` and ``step``; the data drawn are its rows in the order of the panels and lines."""
    if table.empty:
        raise InsufficientData("no checkpoint has an embedding matrix")
    names, families = matrices_in(table), list(dict.fromkeys(table["family"]))
    styles = model_style(families)  # a family's colour as in the TwoNN figure across checkpoints
    figure, axes = panels(len(names), len(CENTRING), size=(2.6, 2.2))
    drawn = []
    for row_axes, name in zip(axes, names):
        for ax, (centre, label) in zip(row_axes, CENTRING):
            for family in families:
                part = table[(table["family"] == family) & (table["matrix"] == name) & (table["centred"] == centre)]
                part = part.sort_values("step")
                ax.plot(part["step"], part["isotropy"], label=family, **styles[family])
                drawn.append(part)
            ax.set(ylabel="$I(W)$" + (", centred" if centre else ""), title=f"{matrix_label(name)}, {label}")
            step_axis(ax, table["step"])
    figure_legend(figure, axes[0][0], len(families))
    columns = ["family", "model", "step", "matrix", "centred", "isotropy", "log_isotropy"]
    return Plot(figure, pd.concat(drawn, ignore_index=True)[columns])
