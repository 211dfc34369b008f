"""Brute-force oracle: every embedding in memory, statistics by definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from transformers import AutoModel, AutoTokenizer

from ctxvar.models.tokens import boundary_tokens, type_key, word_marker


def brute_force_embeddings(model_dir, texts, window: int | None = None):
    """``(keys, X)``: type key per occurrence and X (layers, occurrences, d) in float64; where the last hidden state
    has another width (OPT's ``project_out``), X is a list of (occurrences, width) arrays, one per layer.

    With ``window``, a sentence longer than that runs as [bos] + piece + [eos] windows.
    """
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()
    bos, eos = boundary_tokens(tokenizer)
    marker = word_marker(tokenizer)
    keys, layers = [], []
    with torch.no_grad():
        for text in texts:
            inner = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
            step = window - 2 if window and len(inner) + 2 > window else max(len(inner), 1)
            for start in range(0, max(len(inner), 1), step):
                ids = [bos, *inner[start : start + step], eos]
                hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
                layers.append([state[0].double().numpy() for state in hidden])
                keys += [type_key(t, marker) for t in tokenizer.convert_ids_to_tokens(ids)]
    X = [np.concatenate(layer) for layer in zip(*layers)]
    return np.array(keys, dtype=object), np.stack(X) if len({x.shape for x in X}) == 1 else X


def brute_force_tokens(keys, X) -> pd.DataFrame:
    """Per layer and type, from every occurrence's embedding held in memory: n, Q = mean ‖x‖², M = ‖mean x‖²,
    V = mean ‖x − mean x‖²."""
    order = np.argsort(keys, kind="stable")  # each type's occurrences side by side, found once for every layer
    names, starts, counts = np.unique(keys[order], return_index=True, return_counts=True)
    rows = []
    for layer in range(len(X)):
        for key, start, count in zip(names, starts, counts):
            x = X[layer][order[start : start + count]]
            mu = x.mean(0)
            rows.append((layer, key, len(x), (x**2).sum(1).mean(), (mu**2).sum(), ((x - mu) ** 2).sum(1).mean()))
    return pd.DataFrame(rows, columns=["layer", "token", "n", "Q", "M", "V"])


def assert_tokens_match(tokens: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Same (layer, token) set and counts; Q, M, V within 1e-6 of the type's Q."""
    merged = tokens.merge(expected, on=["layer", "token"], how="outer", suffixes=("", "_oracle"), indicator=True)
    assert (merged["_merge"] == "both").all(), "token sets differ"
    assert (merged["n"] == merged["n_oracle"]).all()
    for column in ("Q", "M", "V"):
        error = np.abs(merged[column] - merged[f"{column}_oracle"])
        assert (error <= 1e-6 * merged["Q_oracle"]).all(), column


def moments_of(x: np.ndarray):
    """``(N, Σx, Σxxᵀ)`` of the rows of ``x``, the moments the sums files hold, by brute force."""
    return len(x), x.sum(0), x.T @ x


def clusters(seed=0, n_types=40, d=6, offset=0.0):
    """Per-type point clouds with Zipf-ish counts; returns (points, type labels)."""
    rng = np.random.default_rng(seed)
    counts = np.maximum(1, (2000 / np.arange(1, n_types + 1) ** 1.1).astype(int))
    labels = np.repeat(np.arange(n_types), counts)
    means = rng.normal(size=(n_types, d)) * rng.uniform(0.2, 3, size=(n_types, 1))
    points = offset + means[labels] + rng.normal(size=(len(labels), d)) * rng.uniform(0.1, 2, size=(n_types, 1))[labels]
    return points, labels


def sums_of(points, labels):
    """``(n_t, Σx, Σ‖x‖²)`` per type of ``points`` labelled by type index ``labels``, by brute force."""
    n_types = labels.max() + 1
    count = np.bincount(labels, minlength=n_types)
    sum_ = np.zeros((n_types, points.shape[1]))
    np.add.at(sum_, labels, points)
    return count, sum_, np.bincount(labels, weights=(points**2).sum(1), minlength=n_types)
