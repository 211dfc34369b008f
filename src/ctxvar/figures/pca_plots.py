"""Fig. 1 (PCA of the selected types' occurrences) and Fig. 8 (the selected types among all, V on M)."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from ctxvar.extraction.pca_points import projected_points
from ctxvar.figures.pca_selection import table2, table2_latex
from ctxvar.figures.plotting import (
    Plot,
    fit_label,
    panels,
    paper_style,
    place_labels,
    placeholder,
    regression_panel,
    save_plot,
)
from ctxvar.files.atomic import read_csv, write_csv, write_text
from ctxvar.stats.pca_components import read_components
from ctxvar.stats.provenance import SUMS_COLUMN, check_same_sums, table_sums
from ctxvar.stats.token_table import TokenStats, filtered

log = logging.getLogger(__name__)

SPECIAL_TOKEN = re.compile(r"\[[A-Z]+\]|<\|?[a-z/]+\|?>")  # [CLS], [SEP], <s>, </s>, <|endoftext|>


def point_summary(points: pd.DataFrame) -> pd.DataFrame:
    """Per token: occurrences collected, mean pc1, pc2 and mean squared norm (≈ Q_t)."""
    grouped = points.groupby("token", sort=True)
    return pd.DataFrame(
        {
            "points": grouped.size(),
            "mean_pc1": grouped["pc1"].mean(),
            "mean_pc2": grouped["pc2"].mean(),
            "mean_sq_norm": grouped["sq_norm"].mean(),
        }
    ).reset_index()


@paper_style
def pca_scatter(points: pd.DataFrame, selected: pd.DataFrame, model: str, layer: int) -> Plot:
    """Fig. 1: every occurrence of the selected types on the 2 PCA axes, coloured by log10 n_t; × marks the origin."""
    from matplotlib.colors import Normalize

    figure, axes = panels(1, 1, size=(5.0, 4.2))
    ax = axes[0, 0]
    log_n = np.log10(selected.set_index("token")["n"])
    norm = Normalize(log_n.min(), log_n.max())
    scatter = ax.scatter(
        points["pc1"],
        points["pc2"],
        c=log_n.loc[points["token"]].to_numpy(),
        cmap="rainbow",
        norm=norm,
        s=3,
        alpha=0.5,
        linewidths=0,
        rasterized=True,
    )
    ax.scatter(
        [0], [0], marker="x", s=60, color="black", linewidths=1.5, zorder=5, label="origin of the embedding space"
    )
    specials = [token for token in selected["token"] if SPECIAL_TOKEN.fullmatch(token)]
    title = f"{model}, layer {layer}: {len(points):,} occurrences of {len(selected)} token types"
    if specials:
        title += f"\n({int(points['token'].isin(specials).sum()):,} of them special tokens: {', '.join(specials)})"
    ax.set(xlabel="PC 1", ylabel="PC 2", title=title)
    figure.legend(loc="outside lower center", frameon=False)  # outside the axes: the × is no data point
    figure.colorbar(scatter, ax=ax, label=r"$\log_{10} n_t$")
    place_labels(ax, selected["pc1"], selected["pc2"], selected["token"])  # at each type's mean
    data = selected[["token", "n", "pc1", "pc2"]].merge(point_summary(points), on="token", how="left")
    return Plot(figure, data)


@paper_style
def selected_on_trade_off(tokens: pd.DataFrame, selected: pd.DataFrame, model: str, layer: int, analysis: dict) -> Plot:
    """Fig. 8: V on M for every type (grey, OLS over the filtered ones), the selected types coloured and named."""
    figure, axes = panels(1, 1, size=(4.6, 3.8))
    ax = axes[0, 0]
    m, v = tokens["M"].to_numpy(), tokens["V"].to_numpy()
    fit = regression_panel(ax, m, v, filtered(tokens, analysis), names=tokens["token"].to_numpy())
    log_n = np.log10(selected["n"])
    marks = ax.scatter(
        selected["M"], selected["V"], c=log_n, cmap="rainbow", s=18, edgecolors="black", linewidths=0.4, zorder=4
    )
    ax.set(xlabel="$M(X_t)$", ylabel="$V(X_t)$", title=f"{model}, layer {layer}: {fit_label(fit)}")
    figure.colorbar(marks, ax=ax, label=r"$\log_{10} n_t$ (selected tokens)")
    place_labels(ax, selected["M"], selected["V"], selected["token"], beside=True)
    return Plot(figure, selected[["token", "n", "M", "V"]].assign(**{f"fit_{k}": val for k, val in fit.items()}))


NO_SELECTION = (
    "no token type passes the Fig. 1 selection (figures.pca.min_chars characters, within the analysis "
    "frequency filter): the corpus is too small for it"
)


def unselected_outputs(model: str, outputs) -> None:
    """Placeholders for Figs. 1 and 8 and an empty Table 2, when no type could be selected."""
    log.warning(
        "figures fig01_pca and fig08_selected_tokens not drawn: %s (they are placeholders that say so)", NO_SELECTION
    )
    save_plot(placeholder("fig01_pca", NO_SELECTION), outputs.fig01, outputs.fig01_pdf, outputs.fig01_data)
    save_plot(placeholder("fig08_selected_tokens", NO_SELECTION), outputs.fig08, outputs.fig08_pdf, outputs.fig08_data)
    write_csv(table2(pd.DataFrame(columns=["token", "n", "Q", "M", "V"])), outputs.table2)
    write_text(f"% Table 2 of {model}: {NO_SELECTION}\n", outputs.table2_tex)


def pca_outputs(points_path, selection_path, components_path, tokens_path, model: str, analysis: dict, outputs) -> None:
    """Figs. 1 and 8 (PNG, PDF, CSV) and Table 2 (CSV, LaTeX) from the points the extraction jobs collected
    (:func:`ctxvar.extraction.pca_points.merge_points`), projected on the components of ``components_path``.

    ``outputs`` has fig01, fig01_pdf, fig01_data, fig08, fig08_pdf, fig08_data, table2, table2_tex. The
    selection must come from the sums of ``tokens_path`` (:func:`~ctxvar.stats.provenance.check_same_sums`).
    """
    selected = read_csv(selection_path, keep_default_na=False)
    stats = TokenStats(tokens_path)
    check_same_sums(
        model,
        {selection_path: table_sums(selected, selection_path), tokens_path: {stats.metadata.get(SUMS_COLUMN) or ""}},
    )
    if selected.empty:
        unselected_outputs(model, outputs)
        return
    layer = int(selected["layer"].iloc[0])
    points = projected_points(points_path, read_components(components_path))
    save_plot(pca_scatter(points, selected, model, layer), outputs.fig01, outputs.fig01_pdf, outputs.fig01_data)
    tokens = stats.layer(layer)
    save_plot(
        selected_on_trade_off(tokens, selected, model, layer, analysis),
        outputs.fig08,
        outputs.fig08_pdf,
        outputs.fig08_data,
    )
    table = table2(selected)
    write_csv(table, outputs.table2)
    write_text(table2_latex(table, model, layer), outputs.table2_tex)
