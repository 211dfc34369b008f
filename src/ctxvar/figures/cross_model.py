"""Figures across models: Figs. 2, 4, 6, 9, 10 and 17–20 of the paper.

Per-layer curves put relative depth (layer / L, L = last layer) on x so that
base and large models share one axis. ``layers`` is results/summary/layers.csv;
``models`` gives the model ids in config order (legend and panel order).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.figures.plotting import (
    NO_BREAK,
    PANEL_SIZE,
    Plot,
    curve_scale,
    fit_label,
    grid_shape,
    hide_unused,
    legend_label,
    middle_layer,
    panels,
    paper_style,
    regression_panel,
    scale_groups,
)
from ctxvar.files.parquet import read_table
from ctxvar.stats.token_table import TokenStats, filtered

MARKERS = "osD^v<>ph*"
DEPTH_LABEL = "relative depth (layer / L)"


def model_style(models: list[str]) -> dict[str, dict]:
    """One colour and marker per model, stable in config order."""
    return {m: {"color": f"C{i % 10}", "marker": MARKERS[(i // 10) % len(MARKERS)]} for i, m in enumerate(models)}


FINAL_NORM_LABEL = "after final norm"
BAND_LABEL = "batch mean ± std"
BAND_GID = "batch band"  # the gid of every band :func:`batch_band` draws
BAND_ALPHA = 0.25


def layer_curves(ax, layers: pd.DataFrame, models: list[str], values: pd.Series, styles: dict, linestyle="-") -> None:
    """One line per model of ``values`` (aligned with ``layers``) against depth; a ring marks a
    hidden state that is the output of a final norm (column ``final_norm``), labelled :data:`FINAL_NORM_LABEL`
    where one is drawn (so the legend promises it only then)."""
    for model in models:
        rows = (layers["model"] == model).to_numpy()
        ax.plot(layers["depth"][rows], values[rows], label=model, linestyle=linestyle, markersize=3, **styles[model])
        if "final_norm" in layers:
            ring = rows & layers["final_norm"].astype(bool).to_numpy()
            if not ring.any():
                continue
            ax.scatter(
                layers["depth"][ring],
                values[ring],
                s=45,
                facecolors="none",
                edgecolors="black",
                linewidths=0.8,
                label=FINAL_NORM_LABEL,
                zorder=3,
            )


def batch_band(ax, layers: pd.DataFrame, models: list[str], mean: pd.Series, std: pd.Series, styles: dict) -> bool:
    """Shade mean ± std over the sample batches (columns ``*_batch_mean``, ``*_batch_std``) of each model's layers
    drawn from more than one batch (column ``sample_batches``); returns whether any band was drawn."""
    batched = (layers["sample_batches"].to_numpy() > 1) & np.isfinite(std.to_numpy())
    drawn = False
    for model in models:
        rows = (layers["model"] == model).to_numpy() & batched
        if rows.any():
            spread_band(ax, layers["depth"][rows], mean[rows], std[rows], styles[model]["color"])
            drawn = True
    return drawn


def spread_band(ax, x, mean, std, colour) -> None:
    """Shade mean ± std over ``x`` in ``colour``, tagged :data:`BAND_GID` (the legend's batch entry looks for it)."""
    band = ax.fill_between(x, mean - std, mean + std, color=colour, alpha=BAND_ALPHA, linewidth=0)
    band.set_gid(BAND_GID)


def curve_data(layers: pd.DataFrame, columns: dict[str, pd.Series]) -> pd.DataFrame:
    return pd.concat(
        [
            layers[["model", "layer", "depth"]].reset_index(drop=True),
            pd.DataFrame({k: np.asarray(v) for k, v in columns.items()}),
        ],
        axis=1,
    )


@paper_style
def layer_panels(
    layers: pd.DataFrame,
    models: list[str],
    columns: dict[str, tuple[pd.Series, str]],
    title: str = "",
    log_scale: bool = False,
    bands: dict[str, str] | None = None,
) -> Plot:
    """One panel per ``columns`` entry (name → (values, y label)), one curve per model, a shared legend; each
    panel's y scale is :func:`~ctxvar.figures.plotting.curve_scale` of its values (log where positive values span
    orders of magnitude), or with ``log_scale`` log (symlog where a value is ≤ 0) whatever the values.
    ``bands`` maps a column to the batch metric (``{metric}_mean``, ``{metric}_std`` in ``layers``) whose
    mean ± std is shaded around its curve where the layer was sampled in more than one batch; the data
    then hold those two columns and ``sample_batches``."""
    figure, axes = panels(1, len(columns), size=(3.4, 2.4) if len(columns) == 1 else PANEL_SIZE)
    styles = model_style(models)
    bands = bands or {}
    spreads = {}
    for ax, (column, (values, label)) in zip(axes[0], columns.items()):
        if column in bands:
            mean, std = layers[f"{bands[column]}_mean"], layers[f"{bands[column]}_std"]
            if batch_band(ax, layers, models, mean, std, styles):
                spreads |= {mean.name: mean, std.name: std, "sample_batches": layers["sample_batches"]}
        layer_curves(ax, layers, models, values, styles)
        ax.set(xlabel=DEPTH_LABEL, ylabel=label)
        finite = values[np.isfinite(values)]
        if log_scale and len(finite):  # a tiny corpus can leave no value at all
            ax.set_yscale("log" if (finite > 0).all() else "symlog")
        elif not log_scale:
            curve_scale(values).apply(ax, "y")
    figure_legend(figure, axes[0, -1], len(models))
    if title:
        figure.suptitle(title)
    return Plot(figure, curve_data(layers, {**{k: v for k, (v, _) in columns.items()}, **spreads}))


def figure_legend(figure, ax, n_models: int, extra: dict | None = None) -> None:
    """The figure's legend: the models, then ``extra`` entries (label → handle; a tuple of lines is drawn as their
    pieces side by side), then a batch band's and a final norm's entries where any axes has one. ``ax``: the axes
    whose lines name the models, or a list of axes that each draw some of them."""
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.patches import Patch

    found = {}  # label → handle, one ring entry
    for one in ax if isinstance(ax, list) else [ax]:
        found |= {label: handle for handle, label in zip(*one.get_legend_handles_labels()) if label not in found}
    found |= extra or {}
    if any(c.get_gid() == BAND_GID for a in figure.axes for c in a.collections):
        found[BAND_LABEL] = Patch(color="0.5", alpha=BAND_ALPHA, linewidth=0)
    if FINAL_NORM_LABEL in found:
        found[FINAL_NORM_LABEL] = found.pop(FINAL_NORM_LABEL)  # last
    figure.legend(
        found.values(),
        [legend_label(label) for label in found],
        loc="outside right upper",
        frameon=False,
        ncols=1 if n_models <= 12 else 2,
        handler_map={tuple: HandlerTuple(ndivide=None, pad=0)},
    )


def cv_slope_r2(layers: pd.DataFrame, models: list[str]) -> Plot:
    """Fig. 4: C.V. of Q(X_t), slope and R² of V on M, per layer."""
    return layer_panels(
        layers,
        models,
        {
            "cv_Q": (layers["cv_Q"], "C.V. of $Q(X_t)$"),
            "slope_VM": (layers["slope_VM"], "slope of $V$ on $M$"),
            "r2_VM": (layers["r2_VM"], "$R^2$ of $V$ on $M$"),
        },
    )


def within_share(layers: pd.DataFrame, models: list[str]) -> Plot:
    """Fig. 6: V_W(X)/V(X) per layer."""
    return layer_panels(layers, models, {"V_W_over_V": (layers["V_W"] / layers["V"], "$V_W(X)/V(X)$")})


def log_slopes(layers: pd.DataFrame, models: list[str]) -> Plot:
    """Fig. 17: slopes of log10(1 + Q/M/V) on log10 n_t per layer."""
    return layer_panels(
        layers,
        models,
        {f"slope_log{s}": (layers[f"slope_log{s}"], rf"slope of $\log_{{10}}(1+{s})$") for s in ("Q", "M", "V")},
        title=r"regressions on $\log_{10} n_t$",
    )


def ratios(layers: pd.DataFrame, models: list[str]) -> Plot:
    """Fig. 18: M(X), V(X), V_W and V_B over Q(X), per layer."""
    return layer_panels(
        layers,
        models,
        {
            f"{c}_over_Q": (layers[c] / layers["Q"], f"${label}/Q(X)$")
            for c, label in (("M", "M(X)"), ("V", "V(X)"), ("V_W", "V_W(X)"), ("V_B", "V_B(X)"))
        },
    )


@paper_style
def twin_axis_panels(
    layers: pd.DataFrame,
    models: list[str],
    columns: dict[str, tuple[pd.Series, str]],
    scale_by: str,
    one_axis: tuple[str, ...] = (),
) -> Plot:
    """Like :func:`layer_panels`, but models whose ``scale_by`` is > 10× the smallest model's go on a right axis
    (dashed) in every panel except those named in ``one_axis`` (ratios, which share a scale). Each axis's scale is
    :func:`~ctxvar.figures.plotting.curve_scale` of the values drawn on it."""
    figure, axes = panels(1, len(columns), size=(2.7, 2.1))
    styles = model_style(models)
    typical = {m: float(np.nanmedian(layers.loc[layers["model"] == m, scale_by])) for m in models}
    left, right = scale_groups(typical)
    data = curve_data(layers, {k: v for k, (v, _) in columns.items()})
    data["axis"] = np.where(layers["model"].isin(right).to_numpy(), "right", "left")
    on_right = layers["model"].isin(right).to_numpy()
    for ax, (column, (values, label)) in zip(axes[0], columns.items()):
        layer_curves(ax, layers, left, values, styles)
        ax.set(xlabel=DEPTH_LABEL, ylabel=label)
        if right and column not in one_axis:
            twin = ax.twinx()
            twin.spines["right"].set_visible(True)
            layer_curves(twin, layers, right, values, styles, linestyle="--")
            twin.set_ylabel(f"{label} (dashed: right axis)")
            curve_scale(values[on_right]).apply(twin, "y")
            curve_scale(values[~on_right]).apply(ax, "y")
        else:
            layer_curves(ax, layers, right, values, styles)
            curve_scale(values).apply(ax, "y")
    found = {label: handle for a in figure.axes for handle, label in zip(*a.get_legend_handles_labels())}
    shown = [m for m in models] + ([FINAL_NORM_LABEL] if FINAL_NORM_LABEL in found else [])
    figure.legend([found[m] for m in shown], [legend_label(m) for m in shown], loc="outside right upper", frameon=False)
    return Plot(figure, data)


def whole_set_values(layers: pd.DataFrame, models: list[str]) -> Plot:
    """Fig. 19: Q(X), M(X), V(X) per layer, every model on one log axis: split axes made models near zero on
    the left look flat beside GPT-2's far larger values."""
    return layer_panels(layers, models, {c: (layers[c], f"${c}(X)$") for c in ("Q", "M", "V")}, log_scale=True)


def within_between(layers: pd.DataFrame, models: list[str]) -> Plot:
    """Fig. 20: V_W(X), V_B(X) (second axis where scales differ) and V_B(X)/V(X) per layer."""
    return twin_axis_panels(
        layers,
        models,
        {
            "V_W": (layers["V_W"], "$V_W(X)$"),
            "V_B": (layers["V_B"], "$V_B(X)$"),
            "V_B_over_V": (layers["V_B"] / layers["V"], "$V_B(X)/V(X)$"),
        },
        scale_by="V",
        one_axis=("V_B_over_V",),
    )


@paper_style
def variance_on_mean(stats: dict[str, TokenStats], analysis: dict) -> Plot:
    """Fig. 2: V(X_t) on M(X_t) at each model's middle layer, one panel per model.

    Points are coloured by log10 n_t on one scale shared by all panels; every type is in view; the line is OLS
    over the filtered types, drawn where both axes are linear
    (:func:`~ctxvar.figures.plotting.regression_panel`).
    """
    from matplotlib.colors import Normalize

    rows, cols = grid_shape(len(stats))
    figure, axes = panels(rows, cols, size=(2.8, 2.4))
    middle = {model: s.layer(middle_layer(s.n_layers)) for model, s in stats.items()}
    log_n = {model: np.log10(t["n"].to_numpy()) for model, t in middle.items()}
    norm = Normalize(min(v.min() for v in log_n.values()), max(v.max() for v in log_n.values()))
    fits = []
    for ax, (model, tokens) in zip(axes.flat, middle.items()):
        m, v = tokens["M"].to_numpy(), tokens["V"].to_numpy()
        fit = regression_panel(
            ax, m, v, filtered(tokens, analysis), colour=log_n[model], norm=norm, names=tokens["token"].to_numpy()
        )
        layer = middle_layer(stats[model].n_layers)
        ax.set(xlabel="$M(X_t)$", ylabel="$V(X_t)$", title=f"{model} (layer{NO_BREAK}{layer})\n{fit_label(fit)}")
        fits.append({"model": model, "layer": layer, **fit})
    hide_unused(axes, len(stats))
    figure.suptitle(
        f"Every type drawn; the line, slope and $R^2$ fit only the {analysis['min_log10_n']:g} ≤ $\\log_{{10}} n_t$ ≤ "
        f"{analysis['max_log10_n']:g} types",
        fontsize=8,
    )
    mappable = axes.flat[0].collections[0]
    figure.colorbar(mappable, ax=axes, label=r"$\log_{10} n_t$", shrink=0.8)
    return Plot(figure, pd.DataFrame(fits))


@paper_style
def frequency_histograms(stats: dict[str, TokenStats], analysis: dict, bins: int = 40) -> Plot:
    """Fig. 10: histogram of log10 n_t (layer 0, all types) per model; dashed lines mark the filter bounds that
    fall within the data (the x axis spans the data, and the figure's title gives both bounds)."""
    rows, cols = grid_shape(len(stats))
    figure, axes = panels(rows, cols)
    data, bounds, beyond = [], (analysis["min_log10_n"], analysis["max_log10_n"]), set()
    for ax, (model, s) in zip(axes.flat, stats.items()):
        log_n = np.log10(s.layer(0)["n"].to_numpy())
        counts, edges, _ = ax.hist(log_n, bins=bins, color="tab:blue")
        ax.set_xlim(*ax.get_xlim())  # the data's, whatever bound lies beyond them
        for bound in bounds:
            if edges[0] <= bound <= edges[-1]:
                ax.axvline(bound, color="black", linestyle="--", linewidth=0.8)
            else:
                beyond.add(bound)
        ax.set(
            xlabel=r"$\log_{10} n_t$", ylabel="token types", title=f"{model} (|T|{NO_BREAK}={NO_BREAK}{len(log_n):,})"
        )
        data += [
            {"model": model, "bin_left": lo, "bin_right": hi, "count": int(c)}
            for lo, hi, c in zip(edges[:-1], edges[1:], counts)
        ]
    hide_unused(axes, len(stats))
    title = f"dashed: the frequency filter, {bounds[0]:g} ≤ $\\log_{{10}} n_t$ ≤ {bounds[1]:g}"
    if beyond:
        title += f" (not drawn beyond the data: {', '.join(f'{bound:g}' for bound in sorted(beyond))})"
    figure.suptitle(title, fontsize=8)
    return Plot(figure, pd.DataFrame(data))


@paper_style
def sentence_lengths(sentences_path) -> Plot:
    """Fig. 9: histogram of sentence lengths in space-separated words, one bin per length."""
    words = read_table(sentences_path, columns=["n_words"]).column("n_words").to_numpy()  # as the corpus filter counts
    figure, axes = panels(1, 1, size=(3.2, 2.2))
    ax = axes[0, 0]
    edges = np.arange(words.min(), words.max() + 2) - 0.5
    counts, _, _ = ax.hist(words, bins=edges, color="tab:blue")
    ax.set(xlabel="sentence length (words)", ylabel="sentences", title=f"{len(words):,} sentences")
    return Plot(figure, pd.DataFrame({"words": (edges[:-1] + 0.5).astype(int), "count": counts.astype(int)}))
