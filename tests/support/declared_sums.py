"""Sums files built in a test from points, for every sum the declarations keep (ctxvar.stats.declarations): a
test that writes sums, moments or partials by hand names no sum, so a sum declared later is in its files too.
:data:`READERS` reads each kind of these files, and :data:`LAYOUT_1` holds a file of each kind in the layout an
older ctxvar wrote."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from ctxvar.stats.declarations import kept_layer_sums, kept_sums
from ctxvar.stats.sample_file import SampleFile
from ctxvar.stats.sums import LayerSums, MomentsFile, SumsFile

COSINE = {"cosine": True}  # a geometry that keeps every switched per-type sum of the first files (Σ x/‖x‖)
READERS = {"sums": SumsFile, "moments": MomentsFile, "sample": SampleFile}

# The layouts before 'ctxvar sums 2', 'ctxvar moments 2' and 'ctxvar sample 2': vectors as fixed-size lists
LAYOUT_1 = {
    "sums": {
        "layer": [0],
        "token": ["a"],
        "n": [1],
        "sum_sq": [1.0],
        "sum": pa.array([[1.0, 0.0]], pa.list_(pa.float64(), 2)),
    },
    "moments": {
        "layer": [0],
        "n": [1],
        "sum": pa.array([[1.0, 0.0]], pa.list_(pa.float64(), 2)),
        "sum_outer": pa.array([[1.0, 0.0, 0.0, 0.0]], pa.list_(pa.float64(), 4)),
    },
    "sample": {"layer": [0], "key": [1], "token": ["a"], "x": pa.array([[1.0, 0.0]], pa.list_(pa.float32(), 2))},
}


def chunk_of(points: np.ndarray) -> SimpleNamespace:
    """``points`` (N, d) as the declarations' ``values`` read a chunk: rows, ‖x‖² and x/‖x‖, float64."""
    rows = np.asarray(points, np.float64)
    sq_norm = np.einsum("nd,nd->n", rows, rows)
    return SimpleNamespace(rows=rows, sq_norm=sq_norm, unit=rows / np.sqrt(sq_norm)[:, None])


def sum_names(geometry) -> tuple[str, ...]:
    """The names of the per-type sums ``geometry`` keeps, in declaration order."""
    return tuple(item.name for item in kept_sums(geometry))


def layer_sums_of(layer: int, types: np.ndarray, labels: np.ndarray, points: np.ndarray, geometry) -> LayerSums:
    """Layer ``layer``'s n_t and every per-type sum ``geometry`` keeps, by brute force over ``points`` (N, d),
    the i-th an occurrence of ``types[labels[i]]`` (``types`` sorted)."""
    chunk = chunk_of(points)
    count = np.bincount(labels, minlength=len(types)).astype(np.int64)
    return LayerSums(
        layer, types, count, {item.name: type_sum(item, chunk, labels, len(types)) for item in kept_sums(geometry)}
    )


def type_sum(item, chunk: SimpleNamespace, labels: np.ndarray, n_types: int) -> np.ndarray:
    """The declared sum ``item`` per type over the rows of ``chunk`` (:func:`chunk_of`), row i of type
    ``labels[i]``: (n_types,) or (n_types, d) float64."""
    values = np.asarray(item.values(chunk), np.float64)
    total = np.zeros((n_types, *values.shape[1:]))
    np.add.at(total, labels, values)
    return total


def random_layers(
    n_layers: int, n_types: int, d: int, geometry=COSINE, seed: int = 0, occurrences: int = 100
) -> list[LayerSums]:
    """``n_layers`` layers of sums of ``n_types`` types (``t000``, ``t001``, …), each type seen 1 to
    ``occurrences`` - 1 times at normal points of width ``d``, every kept sum computed from them."""
    rng = np.random.default_rng(seed)
    types = np.array([f"t{i:03d}" for i in range(n_types)], object)
    labels = np.repeat(np.arange(n_types), rng.integers(1, occurrences, n_types))
    return [
        layer_sums_of(layer, types, labels, rng.normal(size=(len(labels), d)), geometry) for layer in range(n_layers)
    ]


def layer_values(points: np.ndarray, geometry) -> dict[str, np.ndarray | float]:
    """Every per-layer sum ``geometry`` keeps over ``points`` (N, d): a d-vector, or a float."""
    chunk = chunk_of(points)
    found = {}
    for item in kept_layer_sums(geometry):
        total = np.asarray(item.values(chunk), np.float64).sum(axis=0)
        found[item.name] = total if item.vector else float(total)
    return found
