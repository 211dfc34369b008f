"""Figures of the geometry metrics (geometry.csv), of Appendix I's C.V. of Q against n_min,
and across training checkpoints.

``geometry`` tables carry a ``model`` column (results/summary/geometry.csv, or a
model's geometry.csv with it added); curves are drawn by
:func:`ctxvar.figures.cross_model.layer_panels`, which rings final-norm layers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.errors import InsufficientData
from ctxvar.figures.cross_model import (
    BAND_GID,
    DEPTH_LABEL,
    batch_band,
    curve_data,
    figure_legend,
    layer_curves,
    layer_panels,
    model_style,
    spread_band,
)
from ctxvar.figures.plotting import Plot, legend_label, panels, paper_style, significant, step_axis
from ctxvar.stats.layers import ols
from ctxvar.stats.token_table import TokenStats

MIN_TYPES_FOR_CV = 10  # a threshold n_min with fewer types above it gives no C.V. point
LEGEND_ROWS = 16  # entries per legend column of the C.V.-against-n_min figure (a line per layer: 31 for SmolLM2)
LEGEND_ROW_HEIGHT = 0.2  # inches a 7-pt legend entry takes, with the space between entries
LEGEND_COLUMN_WIDTH = 1.6  # inches a legend column ("layer 30: slope −0.12") takes
CHECKPOINT_PANELS = (
    ("anisotropy", "anisotropy $\\lambda_1/\\mathrm{tr}\\,C$"),
    ("twonn", "TwoNN dimension"),
    ("cv_Q", "C.V. of $Q(X_t)$"),
    ("M_over_Q", "$M(X)/Q(X)$"),
)
BATCH_SPREADS = {"anisotropy": "anisotropy_batch", "twonn": "twonn_batch"}  # panel → its batch metric in geometry.csv


def isotropy(geometry: pd.DataFrame, models: list[str]) -> Plot:
    """Per layer and model: anisotropy, IsoScore, effective rank and participation ratio; with sample batches,
    the per-batch anisotropy's mean ± std shaded around the anisotropy."""
    return layer_panels(
        geometry,
        models,
        {
            "anisotropy": (geometry["anisotropy"], r"anisotropy $\lambda_1/\mathrm{tr}\,C$"),
            "isoscore": (geometry["isoscore"], "IsoScore"),
            "effective_rank": (geometry["effective_rank"], "effective rank"),
            "participation_ratio": (geometry["participation_ratio"], "participation ratio"),
        },
        bands={"anisotropy": "anisotropy_batch"},
    )


def cosine(geometry: pd.DataFrame, models: list[str]) -> Plot:
    """Per layer and model: mean cosine over all pairs, mean self-similarity, and their difference."""
    return layer_panels(
        geometry,
        models,
        {
            "mean_cosine": (geometry["mean_cosine"], "mean cosine (all pairs)"),
            "self_similarity": (geometry["self_similarity"], "self-similarity"),
            "self_similarity_adjusted": (geometry["self_similarity_adjusted"], "self-similarity − mean cosine"),
        },
    )


@paper_style
def intrinsic_dimension(geometry: pd.DataFrame, models: list[str]) -> Plot:
    """Per layer and model: TwoNN on the sample (solid) and on Gaussian points of the same n and d (dashed, in the
    model's colour; its legend entry shows each model's dash); with sample batches, the batches' TwoNN mean ± std
    shaded around the first batch's value."""
    if not (geometry["twonn"] > 0).any():  # NaN without a sample, or with fewer than 3 distinct points
        raise InsufficientData("no layer of any model has a TwoNN dimension (geometry.twonn off, or too few points)")
    figure, axes = panels(1, 1, size=(3.6, 2.6))
    ax, styles = axes[0, 0], model_style(models)
    banded = batch_band(ax, geometry, models, geometry["twonn_batch_mean"], geometry["twonn_batch_std"], styles)
    layer_curves(ax, geometry, models, geometry["twonn"], styles)
    references = []
    for model in models:
        rows = (geometry["model"] == model).to_numpy()
        (reference,) = ax.plot(
            geometry["depth"][rows],
            geometry["twonn_gaussian"][rows],
            linestyle="--",
            color=styles[model]["color"],
            linewidth=0.8,
        )
        references.append(reference)
    ax.set(xlabel=DEPTH_LABEL, ylabel="TwoNN intrinsic dimension", yscale="log")
    figure_legend(figure, ax, len(models), extra={"Gaussian, same n and d": tuple(references)})
    return Plot(
        figure,
        curve_data(
            geometry,
            {
                "twonn": geometry["twonn"],
                "twonn_gaussian": geometry["twonn_gaussian"],
                "twonn_points": geometry["twonn_points"],
                **(
                    {column: geometry[column] for column in ("twonn_batch_mean", "twonn_batch_std", "sample_batches")}
                    if banded
                    else {}
                ),
            },
        ),
    )


def layer_colours(n_layers: int):
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    norm = Normalize(0, max(n_layers - 1, 1))
    return norm, (lambda layer: colormaps["viridis"](norm(layer)))


@paper_style
def spectrum(geometry: pd.DataFrame, model: str) -> Plot:
    """One model: the leading explained-variance ratios λ_i/tr C against i, one line per layer (dashed: after a final
    norm, and the colorbar's label says so only where there is one)."""
    from matplotlib.ticker import MaxNLocator

    columns = [c for c in geometry.columns if c.startswith("explained_")]
    figure, axes = panels(1, 1, size=(3.4, 2.4))
    ax = axes[0, 0]
    norm, colour = layer_colours(len(geometry))
    rank = np.arange(1, len(columns) + 1)
    for _, row in geometry.iterrows():
        ax.plot(
            rank,
            row[columns].to_numpy(dtype=float),
            color=colour(row["layer"]),
            marker="o",
            linestyle="--" if row["final_norm"] else "-",
        )
    ax.set(
        xlabel="component $i$",
        ylabel=r"$\lambda_i/\mathrm{tr}\,C$",
        yscale="log",
        title=f"{model}: covariance spectrum",
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # a component's index: 2.5 names none
    final = geometry["final_norm"].astype(bool).any()
    layer_colorbar(figure, norm, ax=ax, label="layer (dashed: after final norm)" if final else "layer")
    data = geometry[["layer", *columns]].melt(id_vars="layer", var_name="component", value_name="explained")
    data["component"] = data["component"].str.removeprefix("explained_").astype(int)
    return Plot(figure, data)


def _scalar_mappable(norm):
    from matplotlib.cm import ScalarMappable

    return ScalarMappable(norm=norm, cmap="viridis")


def layer_colorbar(figure, norm, **options):
    """The colorbar of :func:`layer_colours`' ``norm``, ticked at whole layers only (a model of few layers got
    0.5, 1.5, …); ``options`` as :meth:`matplotlib.figure.Figure.colorbar`'s."""
    from matplotlib.ticker import MaxNLocator

    colorbar = figure.colorbar(_scalar_mappable(norm), **options)
    colorbar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return colorbar


def cv_by_min_count(stats: TokenStats, analysis: dict, thresholds_per_decade: int = 4) -> pd.DataFrame:
    """C.V. of Q(X_t) (std/mean, ddof 0) over the types with n_min ≤ n_t ≤ 10^max_log10_n, per layer and n_min.

    n_min runs over a log grid from 10^min_log10_n while at least :data:`MIN_TYPES_FOR_CV` types remain.
    """
    rows = []
    for layer in range(stats.n_layers):
        tokens = stats.layer(layer)
        n, q = tokens["n"].to_numpy(), tokens["Q"].to_numpy()
        upper = n <= 10 ** analysis["max_log10_n"]
        top = np.log10(max(n[upper].max(), 1)) if upper.any() else analysis["min_log10_n"]
        grid = np.unique(np.ceil(10 ** np.arange(analysis["min_log10_n"], top + 1e-9, 1 / thresholds_per_decade)))
        for n_min in grid:
            keep = upper & (n >= n_min)
            if keep.sum() >= MIN_TYPES_FOR_CV:
                rows.append(
                    {
                        "layer": layer,
                        "n_min": int(n_min),
                        "n_types": int(keep.sum()),
                        "cv_Q": float(q[keep].std() / q[keep].mean()),
                    }
                )
    return pd.DataFrame(rows, columns=["layer", "n_min", "n_types", "cv_Q"])


@paper_style
def cv_against_min_count(stats: TokenStats, model: str, analysis: dict) -> Plot:
    """Appendix I: C.V. of Q(X_t) against n_min, log-log, one line per layer, with the fitted slope of each
    and a reference line of slope −1/2 (the prediction for LayerNorm outputs, C.V. = O(1/√n_min)). The legend
    has a column per :data:`LEGEND_ROWS` entries, and the figure is as tall as its longest column."""
    table = cv_by_min_count(stats, analysis)
    columns = -(-(stats.n_layers + 1) // LEGEND_ROWS)
    rows = min(stats.n_layers + 1, LEGEND_ROWS)
    figure, axes = panels(1, 1, size=(3.8 + LEGEND_COLUMN_WIDTH * (columns - 1), max(2.6, LEGEND_ROW_HEIGHT * rows)))
    ax = axes[0, 0]
    norm, colour = layer_colours(stats.n_layers)
    slopes = {}
    drawn = table[table["cv_Q"] > 0]  # C.V. 0 (every type's Q equal) has no place on a log axis: said in the title
    flat = sorted(set(table["layer"]) - set(drawn["layer"]))
    for layer, part in drawn.groupby("layer"):
        slope = ols(np.log10(part["n_min"]), np.log10(part["cv_Q"]))[0]
        slopes[layer] = slope
        ax.plot(
            part["n_min"],
            part["cv_Q"],
            color=colour(layer),
            marker="o",
            label=f"layer {layer}: slope {significant(slope, 2)}",
        )
    if len(drawn):
        start = drawn.loc[drawn["n_min"] == drawn["n_min"].min()]
        anchor_n, anchor_cv = float(start["n_min"].iloc[0]), float(start["cv_Q"].max())
        n_grid = np.array([anchor_n, drawn["n_min"].max()])
        ax.plot(n_grid, anchor_cv * (n_grid / anchor_n) ** -0.5, color="black", linestyle=":", label=r"slope $-1/2$")
    flat_note = f"\nC.V. 0 (every Q equal) at layer {', '.join(map(str, flat))}: not drawn" if flat else ""
    ax.set(
        xscale="log",
        yscale="log" if len(drawn) else "linear",
        xlabel=r"$n_{\min}$ (types with $n_t \geq n_{\min}$)",
        ylabel="C.V. of $Q(X_t)$",
        title=f"{model}: Appendix I{flat_note}",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, ncols=columns)
    table["slope"] = table["layer"].map(slopes)
    return Plot(figure, table)


def checkpoint_table(
    steps: dict[str, int], layers: dict[str, pd.DataFrame], geometry: dict[str, pd.DataFrame]
) -> pd.DataFrame:
    """One row per (checkpoint, layer): step, anisotropy, TwoNN, C.V. of Q, M(X)/Q(X), final_norm, and the sample
    batches' mean and std of anisotropy and TwoNN with ``sample_batches`` where geometry.csv has them."""
    batch = [
        "sample_batches",
        *(f"{metric}_{moment}" for metric in BATCH_SPREADS.values() for moment in ("mean", "std")),
    ]
    frames = []
    for model, step in steps.items():
        present = [column for column in batch if column in geometry[model]]
        merged = layers[model][["layer", "final_norm", "cv_Q", "M", "Q"]].merge(
            geometry[model][["layer", "anisotropy", "twonn", *present]], on="layer"
        )
        frames.append(merged.assign(model=model, step=step, M_over_Q=merged["M"] / merged["Q"]))
    table = pd.concat(frames, ignore_index=True)
    present = [column for column in batch if column in table]
    return table[["model", "step", "layer", "final_norm", *[c for c, _ in CHECKPOINT_PANELS], *present]]


@paper_style
def checkpoints(table: pd.DataFrame, family: str) -> Plot:
    """Across training checkpoints: each metric of :data:`CHECKPOINT_PANELS` against the step, one line per
    layer (colour = layer; dashed = after a final norm, said in the title where there is one). A symlog step axis
    when steps span > 2 decades.
    A metric without any value (its geometry switch off, e.g. TwoNN with geometry.twonn: false) gets no panel.
    Anisotropy and TwoNN measured over more than one sample batch get their batches' mean ± std shaded."""
    drawn = [(column, label) for column, label in CHECKPOINT_PANELS if table[column].notna().any()]
    if not drawn:
        raise InsufficientData("no checkpoint metric has a value")
    figure, axes = panels(1, len(drawn), size=(2.5, 2.2))
    n_layers = int(table["layer"].max()) + 1
    norm, colour = layer_colours(n_layers)
    for ax, (column, label) in zip(axes[0], drawn):
        for layer, part in table.groupby("layer"):
            part = part.sort_values("step")
            ax.plot(
                part["step"],
                part[column],
                color=colour(layer),
                marker="o",
                linestyle="--" if part["final_norm"].any() else "-",
            )
            if column in BATCH_SPREADS and f"{BATCH_SPREADS[column]}_std" in part:
                mean, std = part[f"{BATCH_SPREADS[column]}_mean"], part[f"{BATCH_SPREADS[column]}_std"]
                batched = (part["sample_batches"] > 1) & std.notna()
                if batched.any():
                    spread_band(ax, part["step"][batched], mean[batched], std[batched], colour(layer))
        ax.set_ylabel(label)
        step_axis(ax, table["step"])
    banded = any(c.get_gid() == BAND_GID for ax in axes[0] for c in ax.collections)
    layer_colorbar(figure, norm, ax=axes, label="layer", shrink=0.9)
    # The legend of the line styles in the title: a colorbar label this long ran off a figure one panel high.
    styles = ["colour: layer"]
    styles += ["dashed: after final norm"] if table["final_norm"].astype(bool).any() else []
    styles += ["shaded: batch mean ± std"] if banded else []
    figure.suptitle(f"{family} across checkpoints ({'; '.join(styles)})")
    undrawn = [column for column, _ in CHECKPOINT_PANELS if column not in dict(drawn)]
    spreads = [f"{BATCH_SPREADS[c]}_{moment}" for c in undrawn if c in BATCH_SPREADS for moment in ("mean", "std")]
    return Plot(figure, table.drop(columns=undrawn + [column for column in spreads if column in table]))


ATTENTION_GROUPS = (("Encoders", "bidirectional"), ("Decoders", "causal"))  # panel → models.csv's attention


@paper_style
def encoders_decoders(geometry: pd.DataFrame, models_table: pd.DataFrame, models: list[str]) -> Plot:
    """Razzhigaev et al.'s Fig. 1: the anisotropy λ₁/tr C per layer on relative depth, one line per model, encoders
    (attention ``bidirectional`` in models.csv) and decoders (``causal``) in two panels side by side that share the
    y axis (a panel only for a group with models); with sample batches, the per-batch anisotropy's mean ± std
    shaded around each line. Models of neither kind (the Gaussian null's ``none``, or not known) are left out, and
    the legend's title names them. Colours are those of the other cross-model figures."""
    if "attention" not in models_table:
        models_table = models_table.assign(attention=np.nan)  # a models.csv made before ctxvar recorded it
    attention = models_table.set_index("model")["attention"].reindex(models)
    groups = [(title, [m for m in models if attention[m] == kind]) for title, kind in ATTENTION_GROUPS]
    groups = [(title, members) for title, members in groups if members]
    if not groups:
        raise InsufficientData(
            "no model is known as an encoder or a decoder (summary/models.csv's attention; sums extracted before "
            "ctxvar recorded it leave it empty: extract them again)"
        )
    figure, axes = panels(1, len(groups), size=(3.0, 2.4), sharey=True)
    styles, frames = model_style(models), []
    mean, std = geometry["anisotropy_batch_mean"], geometry["anisotropy_batch_std"]
    for ax, (title, members) in zip(axes[0], groups):
        banded = batch_band(ax, geometry, members, mean, std, styles)
        layer_curves(ax, geometry, members, geometry["anisotropy"], styles)
        ax.set(xlabel=DEPTH_LABEL, ylabel=r"anisotropy $\lambda_1/\mathrm{tr}\,C$", title=title)
        rows = geometry["model"].isin(members)
        spreads = ("anisotropy_batch_mean", "anisotropy_batch_std", "sample_batches") if banded else ()
        frames.append(
            curve_data(
                geometry[rows],
                {
                    "group": [title.lower()] * int(rows.sum()),
                    "attention": attention[geometry["model"][rows]].to_numpy(),
                    "anisotropy": geometry["anisotropy"][rows],
                    **{column: geometry[column][rows] for column in spreads},
                },
            )
        )
    figure_legend(figure, list(axes[0]), len(models))
    drawn = {m for _, members in groups for m in members}
    kinds = attention.replace({"none": "no attention"}).fillna("attention not known")
    left_out = [f"{m} ({kinds[m]})" for m in models if m not in drawn]
    if left_out:  # said where the models are named, the legend
        figure.legends[-1].set_title(legend_label(f"left out: {', '.join(left_out)}"), prop={"size": 7})
    return Plot(figure, pd.concat(frames, ignore_index=True))


@paper_style
def twonn_by_step(table: pd.DataFrame) -> Plot:
    """Razzhigaev et al.'s Fig. 2: the TwoNN dimension (``twonn``) averaged over the layers against the training
    step, one line per checkpoint family. The mean is over every hidden state with a TwoNN value (the embedding
    output, layer 0, included; a layer of fewer than 3 distinct points has none); the data say which layers and
    how many. ``table``: each checkpoint's geometry.csv stacked, with ``family``, ``model`` and ``step``."""
    rows = []
    for (family, model, step), part in table.groupby(["family", "model", "step"], sort=False):
        valued = part[np.isfinite(part["twonn"])]
        if len(valued):
            rows.append(
                {
                    "family": family,
                    "model": model,
                    "step": step,
                    "twonn_mean_over_layers": float(valued["twonn"].mean()),
                    "n_layers": len(valued),
                    "layers": f"{int(valued['layer'].min())}-{int(valued['layer'].max())}",
                }
            )
    if not rows:
        raise InsufficientData("no checkpoint has a TwoNN dimension (geometry.twonn off, or too few points)")
    families = list(dict.fromkeys(table["family"]))
    data = pd.DataFrame(rows)
    data = pd.concat([data[data["family"] == f].sort_values("step") for f in families], ignore_index=True)
    figure, axes = panels(1, 1, size=(3.6, 2.6))
    ax, styles = axes[0, 0], model_style(families)
    for family in families:
        part = data[data["family"] == family]
        ax.plot(part["step"], part["twonn_mean_over_layers"], label=family, **styles[family])
    ax.set_ylabel("TwoNN dimension,\nmean over layers")
    step_axis(ax, data["step"])
    figure_legend(figure, ax, len(families))
    return Plot(figure, data)
