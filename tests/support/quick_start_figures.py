"""Every figure of the quick start with a decoder added, drawn from synthetic tables shaped like that run's:
all-MiniLM-L6-v2 (a 6-layer encoder: Q(X_t) 100–180, its [CLS] and [SEP] in every sentence, [SEP]'s M below
every other type's), SmolLM2-135M-Instruct (a decoder with a final norm: from layer 2 on, its sentence-start token
``<|im_start|>``, one hidden state in every sentence, at M ≈ 4·10⁷ with V ≈ 0, and a few other types with massive
activations, among types at M 10⁴–10⁵; C.V. of Q up to ≈ 28) and the Gaussian null (per-type means plus noise,
then a LayerNorm: two hidden states). Each figure is drawn by the function of its catalogue entry, with the
inputs its scope gives it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ctxvar.figures import scopes
from ctxvar.figures.catalogue import figure_named, figures_of
from ctxvar.files.parquet import parquet_writer, tagged_schema, write_table
from ctxvar.stats.geometry import geometry_columns
from ctxvar.stats.layers import frequency_filter, ols
from ctxvar.stats.token_table import TokenStats

ENCODER, DECODER, NULL = "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "gaussian-null"
MODELS = [ENCODER, DECODER, NULL]
ATTENTION = {ENCODER: "bidirectional", DECODER: "causal", NULL: "none"}
ANALYSIS = {"min_log10_n": 1, "max_log10_n": 5}
SENTENCES = 2887
START, START_M = "<|im_start|>", 6.3e8  # SmolLM2 from its layer 12 on
MASSIVE = {"Tri": (1, 1.6e8, 0.0), "Exit": (4, 8.1e7, 7.9e7), "Oper": (2, 4.7e7, 0.0), "Module": (7, 2.7e7, 3.4e7)}
DECODER_LAYERS = 9  # hidden states (SmolLM2 has 31: the same shapes, fewer rows to draw)
WORDS = [
    "the", "of", "and", "to", "is", "in", "a", "for", "be", "that", "object", "function", "value", "module",
    "class", "attribute", "method", "return", "argument", "exception", "statement", "expression", "name", "type",
]  # fmt: skip


def type_names(n_types: int) -> list[str]:
    return [WORDS[i] if i < len(WORDS) else f"{WORDS[i % len(WORDS)]}{i}" for i in range(n_types)]


def counts(rng, n_types: int) -> np.ndarray:
    """n_t of a small corpus: half the types seen at most 4 times, a third at least 10 times, a few thousands of
    times."""
    return np.round(10 ** rng.exponential(0.9, n_types).clip(0, 3.7)).astype(np.int64)


def per_type(tokens, n, m, v) -> pd.DataFrame:
    return pd.DataFrame({"token": tokens, "n": n, "Q": m + v, "M": m, "V": np.where(n == 1, 0.0, v)})


def encoder_layers(n_types=600, seed=0) -> list[pd.DataFrame]:
    """7 hidden states; [SEP] (in every sentence) has the smallest M of any type, [CLS] a V of 0."""
    rng = np.random.default_rng(seed)
    n, names = counts(rng, n_types), type_names(n_types)
    layers = []
    for layer in range(7):
        q = rng.uniform(100, 180, n_types)
        m = q * rng.uniform(0.55, 0.99, n_types)
        table = per_type(names, n, m, q - m)
        special = per_type(["[CLS]", "[SEP]"], np.array([SENTENCES] * 2), np.array([94.4, 0.9 * m.min()]), [1e-4, 13.1])
        layers.append(pd.concat([special, table], ignore_index=True))
    return layers


def decoder_layers(n_types=2400, n_layers=DECODER_LAYERS, seed=1) -> list[pd.DataFrame]:
    """Layer 0: M 4–29; layers 1 to L − 1: types at M 10⁴–10⁵ with V up to 10⁴, and from layer 2 the
    sentence-start token and the massive activations, so that C.V. of Q over the ≈ 800 filtered types is ≈ 28;
    layer L (after the final norm): M 770–3,900."""
    rng = np.random.default_rng(seed)
    n, names = counts(rng, n_types), type_names(n_types)
    layers = []
    for layer in range(n_layers):
        if layer == 0:
            m, v = rng.uniform(4, 29, n_types), rng.uniform(0, 2.7, n_types)
        elif layer == n_layers - 1:
            m, v = rng.uniform(770, 3900, n_types), rng.uniform(0, 1200, n_types)
        else:
            m, v = 10 ** rng.uniform(4.2, 4.9, n_types), 10 ** rng.uniform(2, 4, n_types)
        table = per_type(names, n, m, v)
        if 2 <= layer < n_layers - 1:
            massive = per_type(
                [START, *MASSIVE],
                np.array([SENTENCES, *(n for n, _, _ in MASSIVE.values())]),
                np.array([START_M, *(m for _, m, _ in MASSIVE.values())]),
                np.array([1e-3, *(v for _, _, v in MASSIVE.values())]),
            )
            table = pd.concat([massive, table], ignore_index=True)
        else:
            start = per_type([START], np.array([SENTENCES]), np.array([11.0 if layer == 0 else 1570.0]), [0.0])
            table = pd.concat([start, table])
        layers.append(table.reset_index(drop=True))
    return layers


def null_layers(n_types=600, d=384, seed=2) -> list[pd.DataFrame]:
    """Per-type means of squared norm 0.01 d plus unit noise (M = 0.01 d + d/n, V = d (1 − 1/n)), then a LayerNorm
    that scales each occurrence to about 1.08 d."""
    rng = np.random.default_rng(seed)
    n, names = counts(rng, n_types), type_names(n_types)
    m = 0.01 * d * rng.uniform(0.8, 1.2, n_types) + d / n
    v = d * (1 - 1 / n) * rng.uniform(0.95, 1.05, n_types)
    scale = d / (m + v) * rng.uniform(0.97, 1.03, n_types)  # LayerNorm's random γ: Q(X_t) within a few %
    return [per_type(names, n, m, v), per_type(names, n, m * scale * 1.08, v * scale * 1.08)]


def token_stats(path, layers: list[pd.DataFrame]) -> TokenStats:
    """tokens.parquet of these per-layer tables (one row group per layer), read back as the figures read it."""
    schema = pa.Schema.from_pandas(layers[0], preserve_index=False)
    with parquet_writer(path, tagged_schema(schema, {"model": "m"})) as writer:
        for table in layers:
            writer.write_table(pa.Table.from_pandas(table, schema=schema, preserve_index=False))
    return TokenStats(path)


def layer_rows(model: str, layers: list[pd.DataFrame], final_norm: bool) -> pd.DataFrame:
    """layers.csv's rows from the per-type tables: Q(X) and V_W as the n-weighted means of Q_t and V_t, M(X) a
    share of Q(X), and C.V., slopes and R² over the filtered types, as ctxvar computes them."""
    rows, last = [], len(layers) - 1
    for layer, table in enumerate(layers):
        n = table["n"].to_numpy()
        keep = frequency_filter(n, ANALYSIS["min_log10_n"], ANALYSIS["max_log10_n"])
        q, m, v = (table[column].to_numpy() for column in ("Q", "M", "V"))
        total_q, v_w = np.average(q, weights=n), np.average(v, weights=n)
        mean_sq = 0.05 * total_q * (1 + layer)
        slope, intercept, r2 = ols(m[keep], v[keep])
        row = {"model": model, "layer": layer, "depth": layer / last, "final_norm": final_norm and layer == last}
        row |= {"Q": total_q, "M": mean_sq, "V": total_q - mean_sq, "V_W": v_w, "V_B": total_q - mean_sq - v_w}
        row |= {"cv_Q": q[keep].std() / q[keep].mean(), "slope_VM": slope, "intercept_VM": intercept, "r2_VM": r2}
        for statistic, values in (("Q", q), ("M", m), ("V", v)):
            row[f"slope_log{statistic}"] = ols(np.log10(n[keep]), np.log10(1 + values[keep]))[0]
        rows.append(row)
    return pd.DataFrame(rows)


def geometry_rows(model: str, n_layers: int, final_norm: bool, seed: int, batches=4) -> pd.DataFrame:
    """geometry.csv's rows: a decoder's anisotropy near 1 where the sentence-start token dominates, an encoder's
    below 0.1; TwoNN 3–13 beside Gaussian references of 100–145; four sample batches."""
    rng = np.random.default_rng(seed)
    rows = []
    for layer in range(n_layers):
        depth = layer / max(n_layers - 1, 1)
        row = {column: rng.uniform(0.1, 1.0) for column in geometry_columns(10)}
        anisotropy = 0.995 if model == DECODER and 0 < depth < 1 else rng.uniform(0.04, 0.09)
        explained = np.sort(rng.uniform(0.001, 0.05, 10))[::-1]
        explained[0] = anisotropy
        row |= {f"explained_{i + 1}": value for i, value in enumerate(explained)}
        row |= {"model": model, "layer": layer, "depth": depth, "final_norm": final_norm and layer == n_layers - 1}
        row |= {
            "anisotropy": anisotropy,
            "effective_rank": rng.uniform(1, 300),
            "participation_ratio": rng.uniform(1, 80),
        }
        row |= {"twonn": 3 + 10 * depth * rng.uniform(0.8, 1), "twonn_gaussian": rng.uniform(100, 145)}
        row |= {"sample_batches": batches, "twonn_points": 4096}
        for metric, centre in (("anisotropy_batch", anisotropy), ("twonn_batch", row["twonn"])):
            row[f"{metric}_mean"] = centre * rng.uniform(0.98, 1.0)
            row[f"{metric}_std"] = centre * rng.uniform(0.001, 0.02)
        rows.append(row)
    return pd.DataFrame(rows)


def projection_points(matrices: tuple[str, ...], rows=2000, seed=0) -> pd.DataFrame:
    """embedding_projection.parquet: every row of each matrix on its first two right singular vectors."""
    rng = np.random.default_rng(seed)
    frames = []
    for name in matrices:
        for centred in (False, True):
            x, y = rng.normal(size=rows) + (0 if centred else 2.9), rng.normal(scale=0.4, size=rows)
            frames.append(pd.DataFrame({"matrix": name, "centred": centred, "row": np.arange(rows), "x": x, "y": y}))
    return pd.concat(frames, ignore_index=True)


def matrices_table(matrices: tuple[str, ...]) -> pd.DataFrame:
    rows = [(name, centred) for name in matrices for centred in (False, True)]
    isotropy = [0.843, 0.988, 0.61, 0.97][: len(rows)]
    return pd.DataFrame(
        {
            "matrix": [name for name, _ in rows],
            "centred": [centred for _, centred in rows],
            "isotropy": isotropy,
            "log_isotropy": np.log(isotropy),
            "mean_cosine": 0.018,
        }
    )


def pca_inputs(tokens: pd.DataFrame, seed=3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 1's selection (12 filtered types, [SEP] among them, with their PCA coordinates) and their occurrences."""
    rng = np.random.default_rng(seed)
    candidates = tokens[(tokens["n"] >= 10) & ~tokens["token"].str.startswith("[")]
    selected = pd.concat([tokens[tokens["token"] == "[SEP]"], candidates.iloc[:11]], ignore_index=True)
    selected = selected.assign(pc1=rng.normal(scale=3, size=12), pc2=rng.normal(scale=2, size=12))
    per_type = selected["n"].clip(upper=200).to_numpy()
    points = pd.DataFrame(
        {
            "token": np.repeat(selected["token"], per_type),
            "pc1": np.repeat(selected["pc1"], per_type) + rng.normal(size=per_type.sum()),
            "pc2": np.repeat(selected["pc2"], per_type) + rng.normal(size=per_type.sum()),
        }
    ).assign(sq_norm=150.0)
    return selected, points


def draw_quick_start_with_a_decoder(folder, figures: set[str] | None = None) -> dict:
    """Every figure such a run draws, {name: Plot}, or those of it named in ``figures`` (names of the catalogue); a
    model's figures are named ``{figure}/{model}``."""

    def drawn(name: str) -> bool:
        return figures is None or name in figures

    tables = {ENCODER: encoder_layers(), DECODER: decoder_layers(), NULL: null_layers()}
    stats = {model: token_stats(folder / f"{model}.parquet", layers) for model, layers in tables.items()}
    layers = pd.concat(
        [layer_rows(model, tables[model], final_norm=model == DECODER) for model in MODELS], ignore_index=True
    )
    geometry = pd.concat(
        [
            geometry_rows(model, len(tables[model]), final_norm=model == DECODER, seed=i)
            for i, model in enumerate(MODELS)
        ],
        ignore_index=True,
    )
    sentences = folder / "sentences.parquet"
    n_words = np.random.default_rng(0).integers(3, 64, SENTENCES)
    write_table(pa.table({"n_words": n_words}), sentences)
    plots = {}
    for model in MODELS:
        inputs = {"layers": layers[layers["model"] == model], "geometry": geometry[geometry["model"] == model]}
        for figure in figures_of(scopes.MODEL):
            if not drawn(figure.name):
                continue
            args = [stats[model] if need == "tokens" else inputs[need] for need in figure.needs]
            plots[f"{figure.name}/{model}"] = figure.draw(
                *args, model, *([ANALYSIS] if "tokens" in figure.needs else [])
            )
    summary = {"layers": layers, "geometry": geometry, "models": pd.DataFrame({"model": MODELS})}
    summary["models"]["attention"] = summary["models"]["model"].map(ATTENTION)
    for figure in figures_of(scopes.SUMMARY):
        if not drawn(figure.name):
            continue
        if figure.needs == ("tokens",):
            plots[figure.name] = figure.draw(stats, ANALYSIS)
        else:
            plots[figure.name] = figure.draw(*(summary[need] for need in figure.needs), MODELS)
    for figure in figures_of(scopes.CORPUS):
        if drawn(figure.name):
            plots[figure.name] = figure.draw(sentences)
    middle = stats[ENCODER].layer(3)
    selected, points = pca_inputs(middle)
    if drawn("fig01_pca"):
        plots["fig01_pca"] = figure_named("fig01_pca").draw(points, selected, ENCODER, 3)
    if drawn("fig08_selected_tokens"):
        plots["fig08_selected_tokens"] = figure_named("fig08_selected_tokens").draw(
            middle, selected, ENCODER, 3, ANALYSIS
        )
    if drawn("emb01_projection"):
        for model, matrices in ((ENCODER, ("input",)), (DECODER, ("tied",))):
            plots[f"emb01_projection/{model}"] = figure_named("emb01_projection").draw(
                projection_points(matrices), model, matrices_table(matrices)
            )
    return plots
