"""Fig. 1, Fig. 8 and Table 2: the paper's token selection and its 2-D PCA (Appendix A).

Selection, at one layer: candidates are the frequency-filtered types with at
least ``min_chars`` characters. The range [min log10 n_t, max log10 n_t] of the
candidates is cut into ``n_bins`` equal intervals I_r, T_r being the candidates
in I_r; from each T_r, N_r = min(|T_r|, 2 + ⌊4·√(|T_r| / max_r |T_r|)⌋) types are
drawn without replacement by one ``RandomState(seed)``, bin by bin, from the
members sorted by token. (The paper's text writes ⌊√(4|T_r|/max|T_r|)⌋; the
authors' code, which this follows, uses 4·√.)

The selection reads only n_t, the type keys and the frequency filter, so it is made before extraction
(:func:`select_pca_types`, from the shards tokenized as the extraction jobs tokenize them), and the extraction
jobs collect the chosen types' points in their own pass (:mod:`ctxvar.extraction.pca_points`). After the
merge, :func:`select_pca_tokens` makes it again from tokens.parquet and refuses a different one. Only
:func:`select_pca_types` loads a tokenizer: importing the module imports neither torch nor transformers, which
the jobs after the merge (choosing again, drawing Fig. 1) do not use.

PCA: 2 components fitted on the selected types' means μ_t (from the merged sums) plus the zero vector.
After projecting, every point is shifted so that the projected origin is (0, 0);
the shifted coordinates of x are then simply x·w₁ and x·w₂: the points are projected
on the components W (2 × d), not on the fit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ctxvar.errors import ConfigError, InsufficientData, StatisticsError
from ctxvar.extraction.pca_points import TYPES_COLUMNS, read_types, shard_type_counts
from ctxvar.stats.finalize import finalize
from ctxvar.stats.pca_components import components_table
from ctxvar.stats.provenance import SUMS_COLUMN
from ctxvar.stats.sums import SumsFile
from ctxvar.stats.token_table import TokenStats, filtered

if TYPE_CHECKING:
    from ctxvar.extraction.settings import ExtractionSettings

log = logging.getLogger(__name__)

SELECTION_COLUMNS = ["layer", "token", "n", "Q", "M", "V", "bin", "pc1", "pc2"]


def frequency_bins(log_n: np.ndarray, n_bins: int) -> np.ndarray:
    """Index 0 … n_bins−1 of the equal-width interval of [min, max] holding each value (max in the last)."""
    edges = np.linspace(log_n.min(), log_n.max(), n_bins + 1)
    return np.clip(np.searchsorted(edges, log_n, side="right") - 1, 0, n_bins - 1)


def draws_per_bin(sizes: np.ndarray) -> np.ndarray:
    """N_r = min(|T_r|, 2 + ⌊4·√(|T_r| / max_r |T_r|)⌋)."""
    wanted = 2 + np.floor(4 * np.sqrt(sizes / sizes.max())).astype(int)
    return np.minimum(wanted, sizes)


def select_tokens(tokens: pd.DataFrame, analysis: dict, min_chars: int, n_bins: int, seed: int) -> pd.DataFrame:
    """The selected rows of ``tokens`` (columns token, n, …) with their ``bin``, in bin then token order."""
    candidates = tokens[filtered(tokens, analysis) & (tokens["token"].str.len() >= min_chars)]
    if candidates.empty:
        raise InsufficientData(
            f"figures.pca: no token type has ≥ {min_chars} characters and {analysis['min_log10_n']} ≤ log10 n_t ≤ "
            f"{analysis['max_log10_n']}; lower figures.pca.min_chars or use a larger corpus"
        )
    candidates = candidates.sort_values("token", kind="stable").reset_index(drop=True)
    bins = frequency_bins(np.log10(candidates["n"].to_numpy()), n_bins)
    sizes = np.bincount(bins, minlength=n_bins)
    rng = np.random.RandomState(seed)
    chosen = []
    for r, draws in enumerate(draws_per_bin(sizes)):
        members = np.flatnonzero(bins == r)
        if draws:
            chosen.append(np.sort(members[rng.choice(len(members), draws, replace=False)]))
    rows = np.concatenate(chosen)
    return candidates.iloc[rows].assign(bin=bins[rows]).reset_index(drop=True)


def pca_components(means: np.ndarray) -> np.ndarray:
    """(2, d) principal axes of the rows of ``means`` plus the zero vector; each axis's largest loading is positive."""
    points = np.vstack([means, np.zeros(means.shape[1])])
    _, _, vt = np.linalg.svd(points - points.mean(axis=0), full_matrices=False)
    components = vt[:2]
    signs = np.sign(components[np.arange(len(components)), np.abs(components).argmax(axis=1)])
    return components * signs[:, None]


def check_layer(layer: int | None, n_layers: int) -> int:
    """``layer``, or the middle layer when None; a one-line error when out of range."""
    if layer is None:
        return n_layers // 2
    if not 0 <= layer < n_layers:
        raise ConfigError(
            f"figures.pca.layer: {layer} is not a layer of this model (0 … {n_layers - 1}); pick one in range or "
            "null for the middle"
        )
    return layer


def select_pca_types(shard_paths, job: ExtractionSettings, settings: dict, analysis: dict) -> pd.DataFrame:
    """types.csv, the selection made before extraction: layer, token, n, bin of the types figures.pca
    ``settings`` chooses from the counts of the model's shards ``shard_paths``, tokenized as the extraction jobs
    with ``job`` tokenize them (their sum is the merged n_t). Empty, with a warning, when no type can be chosen."""
    from ctxvar.models import loading

    tokenizer = loading.load_tokenizer(job.model, job.source)
    config = loading.load_config(job.model, job.source)
    layer = check_layer(settings["layer"], config.num_hidden_layers + 1)
    counts = [shard_type_counts(path, tokenizer, loading.max_positions(config), job) for path in shard_paths]
    tokens = (
        pd.concat([pd.DataFrame({"token": types, "n": n}) for types, n in counts], ignore_index=True)
        .groupby("token", sort=True)["n"]
        .sum()
        .reset_index()
    )
    try:
        chosen = select_tokens(tokens, analysis, settings["min_chars"], settings["n_bins"], settings["seed"])
    except InsufficientData as error:
        log.warning("Fig. 1, Fig. 8 and Table 2 will be placeholders: %s", error)
        return pd.DataFrame(columns=TYPES_COLUMNS)
    log.info("chose %d types at layer %d from %d types", len(chosen), layer, len(tokens))
    return chosen.assign(layer=layer)[TYPES_COLUMNS]


def check_same_choice(chosen: pd.DataFrame, before: pd.DataFrame, types_path) -> None:
    """Refuse a selection from the merged sums (``chosen``) other than the one made before extraction."""
    columns = ["layer", "token", "n", "bin"]
    if not (len(chosen) == len(before) and (chosen[columns].to_numpy(str) == before[columns].to_numpy(str)).all()):
        raise StatisticsError(
            f"figures.pca: the types chosen before extraction ({types_path}) are not those the merged sums choose "
            f"({len(before)} against {len(chosen)} types): the partials and the shards disagree; delete "
            f"{types_path} and rerun"
        )


def selection(
    stats_path, tokens: pd.DataFrame, layer: int, settings: dict, analysis: dict
) -> tuple[pd.DataFrame, np.ndarray]:
    """(selected types with n, Q, M, V, bin and their means' coordinates pc1, pc2; components (2, d)).

    ``tokens`` is the layer's per-type table; the means come from the merged sums at ``stats_path``.
    """
    chosen = select_tokens(tokens, analysis, settings["min_chars"], settings["n_bins"], settings["seed"])
    sums = SumsFile(stats_path).layer(layer, columns=["token", "n", "sum", "sum_sq"])
    rows = np.searchsorted(sums.types, chosen["token"].to_numpy())
    mean, q, m, v = finalize(sums.count[rows], sums.sum[rows], sums.sum_sq[rows])
    components = pca_components(mean)
    coordinates = mean @ components.T
    table = pd.DataFrame(
        {
            "layer": layer,
            "token": chosen["token"],
            "n": sums.count[rows],
            "Q": q,
            "M": m,
            "V": v,
            "bin": chosen["bin"],
            "pc1": coordinates[:, 0],
            "pc2": coordinates[:, 1],
        }
    )
    return table[SELECTION_COLUMNS], components


def select_pca_tokens(
    stats_path, tokens_path, settings: dict, analysis: dict, types_path=None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """selection.csv and components.csv (rows pc1, pc2; one column per dimension) for figures.pca ``settings``.
    selection.csv ends with ``config_hash``, the sums of the tokens.parquet it was selected from. With
    ``types_path`` (types.csv of :func:`select_pca_types`), a selection other than that one is refused.

    When no type can be selected (a tiny corpus), both are empty and a warning says why: Figs. 1 and 8
    become placeholders, and the run goes on.
    """
    stats = TokenStats(tokens_path)
    layer = check_layer(settings["layer"], stats.n_layers)
    try:
        table, components = selection(stats_path, stats.layer(layer), layer, settings, analysis)
    except InsufficientData as error:
        log.warning("Fig. 1, Fig. 8 and Table 2 will be placeholders: %s", error)
        table, components = pd.DataFrame(columns=SELECTION_COLUMNS), None
    if types_path is not None:
        check_same_choice(table, read_types(types_path), types_path)
    table = table.assign(**{SUMS_COLUMN: stats.metadata.get(SUMS_COLUMN)})
    if components is None:
        return table, pd.DataFrame(columns=["component"])
    return table, components_table(components)


def table2(selected: pd.DataFrame) -> pd.DataFrame:
    """Table 2: n_t, Q, M and V of the selected types, most frequent first."""
    return (
        selected[["token", "n", "Q", "M", "V"]]
        .sort_values(["n", "token"], ascending=[False, True])
        .reset_index(drop=True)
    )


def table2_latex(table: pd.DataFrame, model: str, layer: int) -> str:
    """Table 2 as a LaTeX table (booktabs rules), token strings escaped."""
    return table.rename(columns={"n": "$n_t$", "Q": "$Q(X_t)$", "M": "$M(X_t)$", "V": "$V(X_t)$"}).to_latex(
        index=False,
        escape=False,
        formatters={"token": _latex_escape},
        float_format="%.1f",
        caption=f"$n_t$, $Q(X_t)$, $M(X_t)$ and $V(X_t)$ of the tokens in Fig.~1 "
        f"({_latex_escape(model)}, layer {layer}).",
        label="tab:selected-tokens",
        column_format="lrrrr",
    )


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))
