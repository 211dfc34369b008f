"""The catalogue of figures: :data:`FIGURES`, one :class:`Figure` per figure, with its name, its scope, its report
group, its one-line caption, the inputs it needs and the function that draws it.

The scopes (:mod:`ctxvar.figures.scopes`) say where a figure's files go and for which models it is drawn: ``MODEL``
to results/{model}/figures/{figure}, one set per model that runs over the corpus; ``SUMMARY`` to
results/figures/{figure}, one each across those models; ``CORPUS`` there too, of the sampled corpus alone; ``PCA``
to results/{model}/figures/ of the model of figures.pca; ``CHECKPOINTS`` to results/figures/checkpoints/{family},
one per model entry with ``revisions`` (a checkpoint family) that runs over the corpus; ``EMBEDDING_PROJECTION`` to
results/{model}/figures/, one per model with weights; ``EMBEDDING_CHECKPOINTS`` to
results/figures/checkpoints/embedding_matrices/{family}, one per family; ``ACROSS_CHECKPOINTS`` to
results/figures/across_checkpoints/{figure}, one each for every family together. Inputs (``needs``,
:data:`~ctxvar.figures.scopes.NEEDS`): ``layers`` (layers.csv, per model or stacked in results/summary/layers.csv),
``geometry`` (geometry.csv, likewise), ``models`` (results/summary/models.csv, written with the stacked tables),
``tokens`` (tokens.parquet, per model), ``sentences`` (the sampled corpus), ``projection``
(embedding_projection.parquet, per model) and ``embedding_matrices`` (embedding_matrices.csv, per model). A geometry
figure is drawn only when config ``geometry`` accumulates the sums it shows (:meth:`Figure.drawn_with`).

The workflow reads this at start-up; the drawing modules it imports import matplotlib only when they draw, so it
imports no matplotlib. :func:`ctxvar.figures.draw.draw` draws a figure as its scope says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ctxvar.figures import cross_model, embedding_plots, geometry_plots, pca_plots, per_model
from ctxvar.figures.plotting import Plot
from ctxvar.figures.scopes import (
    ACROSS_CHECKPOINTS,
    CHECKPOINTS,
    CORPUS,
    EMBEDDING_CHECKPOINTS,
    EMBEDDING_PROJECTION,
    MODEL,
    PCA,
    SCOPES,
    SUMMARY,
    FigureRun,
    Scope,
)

__all__ = ["FIGURES", "SCOPES", "Figure", "FigureRun", "Scope", "figure_named", "figures_of"]


@dataclass(frozen=True)
class Figure:
    name: str  # its files' name (in a scope of one figure, the name the scope's path gives them)
    scope: Scope  # where its files go, for which models, how it is drawn
    group: str  # the figure type, as the report groups it
    caption: str  # one line: what the figure shows
    needs: tuple[str, ...]  # inputs among those its scope reads (scope.inputs)
    draw: Callable[..., Plot]  # the function that draws it, called as its scope's call says
    geometry: str | None = None  # the geometry switch (covariance, cosine, twonn) whose sums it draws

    def drawn_with(self, geometry: dict) -> bool:
        """Whether config ``geometry`` accumulates the sums it draws: a figure of a switched-off metric would have
        nothing to draw (every value NaN), so the workflow does not ask for it."""
        return self.geometry is None or geometry[self.geometry]


FIGURES = (
    Figure(
        "fig05_decomposition",
        MODEL,
        "Fig. 5: decomposition of Q(X)",
        "Per layer, the shares M(X)/Q(X), V_W(X)/Q(X) and V_B(X)/Q(X) of the mean squared norm, stacked (they "
        "sum to 1).",
        ("layers",),
        draw=per_model.decomposition_bars,
    ),
    Figure(
        "fig07_frequency",
        MODEL,
        "Fig. 7: Q, M, V against frequency",
        "Q(X_t), M(X_t) and V(X_t) of every token type against log10 n_t at the middle layer, with the slope and R² "
        "of the OLS fit over the filtered types, and its line where the panel's axes are linear.",
        ("tokens",),
        draw=per_model.frequency_scatter_middle,
    ),
    Figure(
        "fig11_frequency_grid",
        MODEL,
        "Figs. 11-13: log values against frequency",
        "At layers 0, L/4, L/2, 3L/4 and L: log10(1+Q), log10(1+M), log10(1+V) against log10 n_t, and V against "
        "M, with OLS fits (the line where the panel's axes are linear).",
        ("tokens",),
        draw=per_model.frequency_grid,
    ),
    Figure(
        "fig14_histograms",
        MODEL,
        "Figs. 14-16: histograms of Q, M, V",
        "Histograms of Q(X_t), M(X_t) and V(X_t) over the frequency-filtered token types, one row per layer (a log "
        "x axis where the values span orders of magnitude).",
        ("tokens",),
        draw=per_model.value_histograms,
    ),
    Figure(
        "geo04_spectrum",
        MODEL,
        "Covariance spectrum",
        "The leading explained-variance ratios λ_i/tr C of the covariance of all embeddings, one line per layer "
        "(dashed: after a final norm, where the model has one).",
        ("geometry",),
        draw=geometry_plots.spectrum,
        geometry="covariance",
    ),
    Figure(
        "geo05_cv_by_min_count",
        MODEL,
        "Appendix I: C.V. of Q against n_min",
        "C.V. of Q(X_t) over the types with n_t ≥ n_min, log-log, per layer, with fitted slopes and a slope −1/2 "
        "reference "
        "(LayerNorm outputs: C.V. = O(1/√n_min)).",
        ("tokens",),
        draw=geometry_plots.cv_against_min_count,
    ),
    Figure(
        "fig02_variance_on_mean",
        SUMMARY,
        "Fig. 2: V against M",
        "V(X_t) against M(X_t) at each model's middle layer, every type in view, coloured by log10 n_t on one shared "
        "scale, with the OLS slope and R², and the line where both axes are linear.",
        ("tokens",),
        draw=cross_model.variance_on_mean,
    ),
    Figure(
        "fig04_cv_slope_r2",
        SUMMARY,
        "Fig. 4: C.V. of Q, slope and R²",
        "Per layer (relative depth) and model: the C.V. of Q(X_t) (log axis where it spans orders of magnitude), "
        "and the slope and R² of the regression of V(X_t) on M(X_t).",
        ("layers",),
        draw=cross_model.cv_slope_r2,
    ),
    Figure(
        "fig06_within_share",
        SUMMARY,
        "Fig. 6: V_W/V",
        "Per layer and model, the within-type share V_W(X)/V(X) of the variance.",
        ("layers",),
        draw=cross_model.within_share,
    ),
    Figure(
        "fig09_sentence_lengths",
        CORPUS,
        "Fig. 9: sentence lengths",
        "Histogram of the sampled sentences' lengths in space-separated words.",
        ("sentences",),
        draw=cross_model.sentence_lengths,
    ),
    Figure(
        "fig10_frequency_histogram",
        SUMMARY,
        "Fig. 10: token frequencies",
        "Histogram of log10 n_t over all token types, per model; dashed lines mark the frequency filter's bounds "
        "within the data.",
        ("tokens",),
        draw=cross_model.frequency_histograms,
    ),
    Figure(
        "fig17_log_slopes",
        SUMMARY,
        "Fig. 17: frequency slopes",
        "Per layer and model, the OLS slopes of log10(1+Q), log10(1+M) and log10(1+V) on log10 n_t.",
        ("layers",),
        draw=cross_model.log_slopes,
    ),
    Figure(
        "fig18_ratios",
        SUMMARY,
        "Fig. 18: ratios to Q(X)",
        "Per layer and model, M(X), V(X), V_W(X) and V_B(X) divided by Q(X).",
        ("layers",),
        draw=cross_model.ratios,
    ),
    Figure(
        "fig19_whole_set",
        SUMMARY,
        "Fig. 19: Q(X), M(X), V(X)",
        "Per layer and model, Q(X), M(X) and V(X); models on a >10x larger scale are dashed, on the right axis.",
        ("layers",),
        draw=cross_model.whole_set_values,
    ),
    Figure(
        "fig20_within_between",
        SUMMARY,
        "Fig. 20: V_W, V_B and V_B/V",
        "Per layer and model, V_W(X) and V_B(X) (larger-scale models dashed, right axis, each axis log where its "
        "values span orders of magnitude) and the between-type share V_B(X)/V(X).",
        ("layers",),
        draw=cross_model.within_between,
    ),
    Figure(
        "geo01_isotropy",
        SUMMARY,
        "Isotropy",
        "Per layer and model: anisotropy λ₁/tr C, IsoScore, effective rank and participation ratio of the "
        "covariance of all embeddings (ring: after a final norm).",
        ("geometry",),
        draw=geometry_plots.isotropy,
        geometry="covariance",
    ),
    Figure(
        "geo02_cosine",
        SUMMARY,
        "Cosine similarity",
        "Per layer and model: exact mean cosine over all pairs of embeddings, mean self-similarity of "
        "the filtered token types, and their difference (Ethayarajh 2019).",
        ("geometry",),
        draw=geometry_plots.cosine,
        geometry="cosine",
    ),
    Figure(
        "geo03_intrinsic_dimension",
        SUMMARY,
        "Intrinsic dimension",
        "Per layer and model: TwoNN intrinsic dimension of the bottom-k sample (solid) and of "
        "Gaussian points of the same n and d (dashed in the model's colour, the estimator's high-dimensional bias).",
        ("geometry",),
        draw=geometry_plots.intrinsic_dimension,
        geometry="twonn",
    ),
    Figure(
        "geo06_anisotropy_encoders_decoders",
        SUMMARY,
        "Encoders and decoders",
        "Anisotropy λ₁/tr C per layer on relative depth, one line per model, in two panels sharing y: encoders "
        "(bidirectional attention) and decoders (causal); shaded: batch mean ± std (Razzhigaev et al. 2024, Fig. 1).",
        ("geometry", "models"),
        draw=geometry_plots.encoders_decoders,
        geometry="covariance",
    ),
    Figure(
        "fig01_pca",
        PCA,
        "Fig. 1: PCA of selected tokens",
        "Every occurrence of the selected token types on the first two principal axes of their means and the "
        "origin (x), coloured by log10 n_t.",
        (),
        draw=pca_plots.pca_scatter,
    ),
    Figure(
        "fig08_selected_tokens",
        PCA,
        "Fig. 8: selected tokens on V against M",
        "V(X_t) against M(X_t) for all token types (grey, every one in view; OLS over the filtered ones) with the "
        "tokens of Fig. 1 named.",
        (),
        draw=pca_plots.selected_on_trade_off,
    ),
    Figure(
        "checkpoints",
        CHECKPOINTS,
        "Training checkpoints",
        "Across training steps, per layer: anisotropy, TwoNN dimension, C.V. of Q(X_t) and M(X)/Q(X) "
        "(dashed: after a final norm).",
        ("layers", "geometry"),
        draw=geometry_plots.checkpoints,
    ),
    Figure(
        "emb01_projection",
        EMBEDDING_PROJECTION,
        "Embedding matrices",
        "Every row of the input and output embedding matrices (one if tied), uncentred and centred, on the matrix's "
        "first two right singular vectors, each panel titled with the matrix's I(W) (Machina & Mercer 2024).",
        ("projection", "embedding_matrices"),
        draw=embedding_plots.projection,
    ),
    Figure(
        "embedding_checkpoints",
        EMBEDDING_CHECKPOINTS,
        "Training checkpoints",
        "Across training steps: the partition-function isotropy I(W) of the input and output embedding matrices "
        "(one if tied), uncentred and centred, and their mean cosine.",
        ("embedding_matrices",),
        draw=embedding_plots.checkpoints,
    ),
    Figure(
        "twonn_by_step",
        ACROSS_CHECKPOINTS,
        "Training checkpoints",
        "TwoNN dimension averaged over every hidden state (embedding output included) against the training step, "
        "one line per checkpoint family (Razzhigaev et al. 2024, Fig. 2).",
        ("geometry",),
        draw=geometry_plots.twonn_by_step,
        geometry="twonn",
    ),
    Figure(
        "isotropy_by_step",
        ACROSS_CHECKPOINTS,
        "Training checkpoints",
        "I(W) of the input and output embedding matrices (one if tied), uncentred and centred, against the training "
        "step, one line per checkpoint family (Machina & Mercer 2024).",
        ("embedding_matrices",),
        draw=embedding_plots.isotropy_by_step,
    ),
)


def figure_named(name: str) -> Figure:
    """The figure of :data:`FIGURES` called ``name``."""
    (figure,) = [figure for figure in FIGURES if figure.name == name]
    return figure


def figures_of(scope: Scope) -> tuple[Figure, ...]:
    """The figures of ``scope``, in the order of :data:`FIGURES`."""
    return tuple(figure for figure in FIGURES if figure.scope is scope)
