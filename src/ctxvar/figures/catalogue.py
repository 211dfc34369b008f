"""The catalogue of figures: file name, report group, one-line caption and inputs of each.

``MODEL_FIGURES`` go to results/{model}/figures/, one set per model;
``SUMMARY_FIGURES`` to results/figures/, one each across all models;
``PCA_FIGURES`` to results/{model}/figures/ of the model chosen in figures.pca.
``GEOMETRY_MODEL_FIGURES`` / ``GEOMETRY_SUMMARY_FIGURES`` likewise, for the
geometry metrics; ``CHECKPOINT_FIGURE`` goes to results/figures/checkpoints/,
one per model entry with ``revisions``. ``EMBEDDING_PROJECTION_FIGURE`` goes to results/{model}/figures/ of
each model with weights, drawn from its embedding_projection.parquet; ``EMBEDDING_CHECKPOINT_FIGURE`` to
results/figures/checkpoints/embedding_matrices/, one per model entry with ``revisions``, drawn from the
checkpoints' embedding_matrices.csv. ``ACROSS_CHECKPOINT_FIGURES`` go to results/figures/across_checkpoints/, one
each for every entry with ``revisions`` together, drawn from each checkpoint's geometry.csv or
embedding_matrices.csv.
Inputs: ``layers`` (layers.csv, per model or stacked in results/summary/layers.csv),
``geometry`` (geometry.csv, likewise), ``models`` (results/summary/models.csv, written with the stacked tables),
``tokens`` (tokens.parquet, per model), ``sentences`` (the sampled corpus), ``embedding_matrices``
(embedding_matrices.csv, per model). A geometry figure is drawn only when config ``geometry`` accumulates
the sums it shows (:func:`accumulated`).
The workflow reads this at start-up, so it imports nothing heavy; :mod:`ctxvar.figures.draw` draws.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FigureSpec:
    group: str  # the figure type, as the report groups it
    caption: str  # one line: what the figure shows
    needs: tuple[str, ...]  # inputs among layers, geometry, models, tokens, sentences, embedding_matrices
    draw: str  # "module.function" in ctxvar.figures that draws it (ctxvar.figures.draw calls it)
    geometry: str | None = None  # the geometry switch (covariance, cosine, twonn) whose sums it draws


def accumulated(figures: dict[str, FigureSpec], geometry: dict) -> dict[str, FigureSpec]:
    """The entries of ``figures`` whose sums config ``geometry`` accumulates: a figure of a switched-off
    metric would have nothing to draw (every value NaN), so the workflow does not ask for it."""
    return {name: spec for name, spec in figures.items() if spec.geometry is None or geometry[spec.geometry]}


MODEL_FIGURES = {
    "fig05_decomposition": FigureSpec(
        "Fig. 5: decomposition of Q(X)",
        "Per layer, the shares M(X)/Q(X), V_W(X)/Q(X) and V_B(X)/Q(X) of the mean squared norm, stacked (they "
        "sum to 1).",
        ("layers",),
        draw="per_model.decomposition_bars",
    ),
    "fig07_frequency": FigureSpec(
        "Fig. 7: Q, M, V against frequency",
        "Q(X_t), M(X_t) and V(X_t) of every token type against log10 n_t at the middle layer, with the slope and R² "
        "of the OLS fit over the filtered types, and its line where the panel's axes are linear.",
        ("tokens",),
        draw="per_model.frequency_scatter_middle",
    ),
    "fig11_frequency_grid": FigureSpec(
        "Figs. 11-13: log values against frequency",
        "At layers 0, L/4, L/2, 3L/4 and L: log10(1+Q), log10(1+M), log10(1+V) against log10 n_t, and V against "
        "M, with OLS fits (the line where the panel's axes are linear).",
        ("tokens",),
        draw="per_model.frequency_grid",
    ),
    "fig14_histograms": FigureSpec(
        "Figs. 14-16: histograms of Q, M, V",
        "Histograms of Q(X_t), M(X_t) and V(X_t) over the frequency-filtered token types, one row per layer (a log "
        "x axis where the values span orders of magnitude).",
        ("tokens",),
        draw="per_model.value_histograms",
    ),
}

SUMMARY_FIGURES = {
    "fig02_variance_on_mean": FigureSpec(
        "Fig. 2: V against M",
        "V(X_t) against M(X_t) at each model's middle layer, every type in view, coloured by log10 n_t on one shared "
        "scale, with the OLS slope and R², and the line where both axes are linear.",
        ("tokens",),
        draw="cross_model.variance_on_mean",
    ),
    "fig04_cv_slope_r2": FigureSpec(
        "Fig. 4: C.V. of Q, slope and R²",
        "Per layer (relative depth) and model: the C.V. of Q(X_t) (log axis where it spans orders of magnitude), "
        "and the slope and R² of the regression of V(X_t) on M(X_t).",
        ("layers",),
        draw="cross_model.cv_slope_r2",
    ),
    "fig06_within_share": FigureSpec(
        "Fig. 6: V_W/V",
        "Per layer and model, the within-type share V_W(X)/V(X) of the variance.",
        ("layers",),
        draw="cross_model.within_share",
    ),
    "fig09_sentence_lengths": FigureSpec(
        "Fig. 9: sentence lengths",
        "Histogram of the sampled sentences' lengths in space-separated words.",
        ("sentences",),
        draw="cross_model.sentence_lengths",
    ),
    "fig10_frequency_histogram": FigureSpec(
        "Fig. 10: token frequencies",
        "Histogram of log10 n_t over all token types, per model; dashed lines mark the frequency filter's bounds "
        "within the data.",
        ("tokens",),
        draw="cross_model.frequency_histograms",
    ),
    "fig17_log_slopes": FigureSpec(
        "Fig. 17: frequency slopes",
        "Per layer and model, the OLS slopes of log10(1+Q), log10(1+M) and log10(1+V) on log10 n_t.",
        ("layers",),
        draw="cross_model.log_slopes",
    ),
    "fig18_ratios": FigureSpec(
        "Fig. 18: ratios to Q(X)",
        "Per layer and model, M(X), V(X), V_W(X) and V_B(X) divided by Q(X).",
        ("layers",),
        draw="cross_model.ratios",
    ),
    "fig19_whole_set": FigureSpec(
        "Fig. 19: Q(X), M(X), V(X)",
        "Per layer and model, Q(X), M(X) and V(X); models on a >10x larger scale are dashed, on the right axis.",
        ("layers",),
        draw="cross_model.whole_set_values",
    ),
    "fig20_within_between": FigureSpec(
        "Fig. 20: V_W, V_B and V_B/V",
        "Per layer and model, V_W(X) and V_B(X) (larger-scale models dashed, right axis, each axis log where its "
        "values span orders of magnitude) and the between-type share V_B(X)/V(X).",
        ("layers",),
        draw="cross_model.within_between",
    ),
}

PCA_FIGURES = {
    "fig01_pca": FigureSpec(
        "Fig. 1: PCA of selected tokens",
        "Every occurrence of the selected token types on the first two principal axes of their means and the "
        "origin (x), coloured by log10 n_t.",
        (),
        draw="pca_plots.pca_scatter",
    ),
    "fig08_selected_tokens": FigureSpec(
        "Fig. 8: selected tokens on V against M",
        "V(X_t) against M(X_t) for all token types (grey, every one in view; OLS over the filtered ones) with the "
        "tokens of Fig. 1 named.",
        (),
        draw="pca_plots.selected_on_trade_off",
    ),
}

GEOMETRY_MODEL_FIGURES = {
    "geo04_spectrum": FigureSpec(
        "Covariance spectrum",
        "The leading explained-variance ratios λ_i/tr C of the covariance of all embeddings, one line per layer "
        "(dashed: after a final norm, where the model has one).",
        ("geometry",),
        draw="geometry_plots.spectrum",
        geometry="covariance",
    ),
    "geo05_cv_by_min_count": FigureSpec(
        "Appendix I: C.V. of Q against n_min",
        "C.V. of Q(X_t) over the types with n_t ≥ n_min, log-log, per layer, with fitted slopes and a slope −1/2 "
        "reference "
        "(LayerNorm outputs: C.V. = O(1/√n_min)).",
        ("tokens",),
        draw="geometry_plots.cv_against_min_count",
    ),
}

GEOMETRY_SUMMARY_FIGURES = {
    "geo01_isotropy": FigureSpec(
        "Isotropy",
        "Per layer and model: anisotropy λ₁/tr C, IsoScore, effective rank and participation ratio of the "
        "covariance of all embeddings (ring: after a final norm).",
        ("geometry",),
        draw="geometry_plots.isotropy",
        geometry="covariance",
    ),
    "geo02_cosine": FigureSpec(
        "Cosine similarity",
        "Per layer and model: exact mean cosine over all pairs of embeddings, mean self-similarity of "
        "the filtered token types, and their difference (Ethayarajh 2019).",
        ("geometry",),
        draw="geometry_plots.cosine",
        geometry="cosine",
    ),
    "geo03_intrinsic_dimension": FigureSpec(
        "Intrinsic dimension",
        "Per layer and model: TwoNN intrinsic dimension of the bottom-k sample (solid) and of "
        "Gaussian points of the same n and d (dashed in the model's colour, the estimator's high-dimensional bias).",
        ("geometry",),
        draw="geometry_plots.intrinsic_dimension",
        geometry="twonn",
    ),
    "geo06_anisotropy_encoders_decoders": FigureSpec(
        "Encoders and decoders",
        "Anisotropy λ₁/tr C per layer on relative depth, one line per model, in two panels sharing y: encoders "
        "(bidirectional attention) and decoders (causal); shaded: batch mean ± std (Razzhigaev et al. 2024, Fig. 1).",
        ("geometry", "models"),
        draw="geometry_plots.encoders_decoders",
        geometry="covariance",
    ),
}

CHECKPOINT_FIGURE = FigureSpec(
    "Training checkpoints",
    "Across training steps, per layer: anisotropy, TwoNN dimension, C.V. of Q(X_t) and M(X)/Q(X) "
    "(dashed: after a final norm).",
    ("layers", "geometry"),
    draw="geometry_plots.checkpoints",
)

EMBEDDING_PROJECTION_FIGURE = FigureSpec(
    "Embedding matrices",
    "Every row of the input and output embedding matrices (one if tied), uncentred and centred, on the matrix's "
    "first two right singular vectors, each panel titled with the matrix's I(W) (Machina & Mercer 2024).",
    ("projection",),
    draw="embedding_plots.projection",
)

EMBEDDING_CHECKPOINT_FIGURE = FigureSpec(
    "Training checkpoints",
    "Across training steps: the partition-function isotropy I(W) of the input and output embedding matrices "
    "(one if tied), uncentred and centred, and their mean cosine.",
    ("embedding_matrices",),
    draw="embedding_plots.checkpoints",
)

ACROSS_CHECKPOINT_FIGURES = {
    "twonn_by_step": FigureSpec(
        "Training checkpoints",
        "TwoNN dimension averaged over every hidden state (embedding output included) against the training step, "
        "one line per checkpoint family (Razzhigaev et al. 2024, Fig. 2).",
        ("geometry",),
        draw="geometry_plots.twonn_by_step",
        geometry="twonn",
    ),
    "isotropy_by_step": FigureSpec(
        "Training checkpoints",
        "I(W) of the input and output embedding matrices (one if tied), uncentred and centred, against the training "
        "step, one line per checkpoint family (Machina & Mercer 2024).",
        ("embedding_matrices",),
        draw="embedding_plots.isotropy_by_step",
    ),
}
