"""Figures of one model: Figs. 5, 7, 11–13 and 14–16 of the paper.

Scatter panels draw every token type and fit the regression over the
frequency-filtered types only (10^min ≤ n_t ≤ 10^max), as the paper does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.figures.plotting import (
    Plot,
    axis_scale,
    fit_label,
    grid_layers,
    middle_layer,
    panels,
    paper_style,
    regression_panel,
    scale_grid,
)
from ctxvar.stats.token_table import TokenStats, filtered

DECOMPOSITION_PARTS = (
    ("M", "$M(X)/Q(X)$", "tab:blue"),
    ("V_W", "$V_W(X)/Q(X)$", "tab:orange"),
    ("V_B", "$V_B(X)/Q(X)$", "tab:green"),
)
STATISTICS = ("Q", "M", "V")


@paper_style
def decomposition_bars(layers: pd.DataFrame, model: str) -> Plot:
    """Fig. 5: per layer, bars of M(X)/Q(X), V_W/Q(X) and V_B/Q(X) stacked; they sum to 1."""
    figure, axes = panels(1, 1, size=(max(3.0, 0.25 * len(layers) + 1.5), 2.4))
    ax = axes[0, 0]
    data = pd.DataFrame({"layer": layers["layer"]})
    bottom = np.zeros(len(layers))
    for column, label, colour in DECOMPOSITION_PARTS:
        share = (layers[column] / layers["Q"]).to_numpy()
        ax.bar(layers["layer"], share, bottom=bottom, label=label, color=colour, width=0.8)
        data[f"{column}_over_Q"] = share
        bottom += share
    ax.set(xlabel="layer", ylabel="share of $Q(X)$", ylim=(0, 1.0), title=model)
    final = layers["final_norm"].astype(bool) if "final_norm" in layers else pd.Series(False, index=layers.index)
    ax.set_xticks(layers["layer"], [f"{layer}*" if f else str(layer) for layer, f in zip(layers["layer"], final)])
    if final.any():
        ax.set_xlabel("layer (* after final norm)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return Plot(figure, data)


@paper_style
def frequency_scatter(tokens: pd.DataFrame, layer: int, model: str, analysis: dict) -> Plot:
    """Fig. 7: Q, M and V of each type against log10 n_t at one layer, with OLS lines."""
    figure, axes = panels(1, 3)
    keep = filtered(tokens, analysis)
    log_n = np.log10(tokens["n"].to_numpy())
    rows = []
    for ax, statistic in zip(axes[0], STATISTICS):
        fit = regression_panel(ax, log_n, tokens[statistic].to_numpy(), keep, names=tokens["token"].to_numpy())
        ax.set(xlabel=r"$\log_{10} n_t$", ylabel=f"${statistic}(X_t)$", title=fit_label(fit))
        rows.append({"layer": layer, "statistic": statistic, **fit})
    figure.suptitle(f"{model}, layer {layer}")
    return Plot(figure, pd.DataFrame(rows))


@paper_style
def frequency_grid(stats: TokenStats, model: str, analysis: dict) -> Plot:
    """Figs. 11–13: at layers 0, L/4, L/2, 3L/4, L: log10(1 + Q/M/V) against log10 n_t, and V against M."""
    layers = grid_layers(stats.n_layers)
    figure, axes = panels(len(layers), 4, size=(2.1, 1.8))
    rows = []
    for row, layer in zip(axes, layers):
        tokens = stats.layer(layer)
        keep = filtered(tokens, analysis)
        log_n = np.log10(tokens["n"].to_numpy())
        for ax, statistic in zip(row, STATISTICS):
            fit = regression_panel(ax, log_n, np.log10(1 + tokens[statistic].to_numpy()), keep)
            ax.set(xlabel=r"$\log_{10} n_t$", ylabel=rf"$\log_{{10}}(1+{statistic}(X_t))$", title=fit_label(fit))
            rows.append({"layer": layer, "y": f"log10(1+{statistic})", "x": "log10 n", **fit})
        fit = regression_panel(
            row[3], tokens["M"].to_numpy(), tokens["V"].to_numpy(), keep, names=tokens["token"].to_numpy()
        )
        row[3].set(xlabel="$M(X_t)$", ylabel="$V(X_t)$", title=fit_label(fit))
        rows.append({"layer": layer, "y": "V", "x": "M", **fit})
        row[0].set_ylabel(f"layer {layer}\n" + row[0].get_ylabel(), fontweight="bold")
    figure.suptitle(model)
    return Plot(figure, pd.DataFrame(rows))


@paper_style
def value_histograms(stats: TokenStats, model: str, analysis: dict, bins: int = 50) -> Plot:
    """Figs. 14–16: histograms of Q, M and V over the filtered types, one row per layer. A panel whose values
    span orders of magnitude (:func:`~ctxvar.figures.plotting.axis_scale`) gets a log (or symlog) x axis and
    bins of equal width on it."""
    figure, axes = panels(stats.n_layers, 3, size=(2.1, 1.1))
    rows = []
    for layer, row in enumerate(axes):
        tokens = stats.layer(layer)
        tokens = tokens[filtered(tokens, analysis)]
        for ax, statistic in zip(row, STATISTICS):
            values = tokens[statistic].to_numpy()
            scale = axis_scale(values)
            scale.apply(ax, "x")
            edges = (
                linear_edges(values, bins)
                if scale.name == "linear"
                else scale_grid(ax.xaxis, values.min(), values.max(), bins + 1)
            )
            counts, edges, _ = ax.hist(values, bins=edges, color="tab:blue")
            rows += [
                {
                    "layer": layer,
                    "statistic": statistic,
                    "bin_left": lo,
                    "bin_right": hi,
                    "count": int(c),
                    "x_scale": scale.name,
                }
                for lo, hi, c in zip(edges[:-1], edges[1:], counts)
            ]
            ax.set(xlabel=f"${statistic}(X_t)$", ylabel="types")
        row[0].set_ylabel(f"layer {layer}\ntypes")
    for ax, statistic in zip(axes[0], STATISTICS):
        ax.set_title(f"${statistic}(X_t)$")
    figure.suptitle(model)
    return Plot(figure, pd.DataFrame(rows))


FLAT_SPAN = 1e-9  # values whose range is below this share of their magnitude are binned around their value


def linear_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """``bins`` + 1 evenly spaced edges from the smallest to the largest of ``values``, or, where their range is
    below :data:`FLAT_SPAN` × their magnitude (a LayerNorm output of constant Q), across ±10⁻⁶ of it: numpy
    cannot split a range narrower than the float spacing into bins; numpy's default range, [0, 1], for no value (a
    layer whose every type is filtered out)."""
    if not len(values):
        return np.linspace(0.0, 1.0, bins + 1)
    lo, hi = float(np.min(values)), float(np.max(values))
    if hi - lo <= FLAT_SPAN * max(abs(lo), abs(hi), 1.0):
        half = 1e-6 * max(abs(hi), 1.0)
        lo, hi = lo - half, hi + half
    return np.linspace(lo, hi, bins + 1)


def frequency_scatter_middle(stats: TokenStats, model: str, analysis: dict) -> Plot:
    """Fig. 7 at the model's middle layer."""
    layer = middle_layer(stats.n_layers)
    return frequency_scatter(stats.layer(layer), layer, model, analysis)
