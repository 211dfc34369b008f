"""Every mergeable sum per (layer, token type), declared once, and the per-type columns it finalizes into.

A :class:`TypeSum` says what one sum is: its column in the sums files, its formula, whether it holds one
float64 or a d-vector per (layer, type), the ``geometry`` switch that keeps it, the per-token values a batch
adds to it (scatter-added by type on the device) and the ``tokens.parquet`` columns it finalizes into. Every
sum adds across shards, so the merge is the same for all of them. The registry :data:`TYPE_SUMS` drives:

- the accumulator (:class:`ctxvar.extraction.accumulator.TypeSums`) and its device bytes
  (:func:`ctxvar.extraction.accumulator.state_bytes`, :func:`~ctxvar.extraction.accumulator.batch_bytes`);
- the sums files' columns (:func:`ctxvar.stats.sums.sums_schema`, :class:`ctxvar.stats.sums.SumsFile`);
- the merge (:func:`ctxvar.stats.merge.merge_layer`) and ``tokens.parquet`` (:func:`ctxvar.stats.merge.token_table`);
- the disk estimate (:func:`ctxvar.disk.sums_bytes`) and the docs' tables (:func:`docs_rows`, tested against
  ``docs/outputs.md``).

n_t, the occurrences of each type, is the key every sum is divided by: it is counted once per batch, the same
in every layer, and is not a declaration. A sum's ``values`` reads a :class:`RowChunk`-like object: ``rows``
(C, d) float64 hidden states of C tokens of one layer, ``sq_norm`` (C,) their ‖x‖² and ``unit`` (C, d) their
x/‖x‖, each computed once per chunk whichever sums read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from ctxvar.stats.finalize import clamp_variance, self_similarity


@dataclass(frozen=True)
class TokenColumn:
    """A float64 column of ``tokens.parquet``: ``compute`` maps the layer's n (``"n"``, (U,) int64), its sums
    (by name) and the columns computed before it (by name) to (U,) values."""

    name: str
    doc: str
    compute: Callable[[Mapping[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class TypeSum:
    """One sum per (layer, type t) over t's occurrences x: Σ values(x).

    ``vector``: d float64 values (stored as fixed_size_binary(8·d)), else one float64. ``switch``: the
    ``geometry`` key that keeps it (None: always kept). ``values``: per-token values of a chunk, (C,) or (C, d)
    float64 on the device. ``unit_rows``: whether ``values`` reads the chunk's unit rows (a (C, d) float64
    buffer on the device). ``columns``: what it finalizes into, in ``tokens.parquet``'s order.
    """

    name: str
    formula: str
    vector: bool
    switch: str | None
    values: Callable
    columns: tuple[TokenColumn, ...] = ()
    unit_rows: bool = False

    def width(self, d: int) -> int:
        """float64 values per (layer, type)."""
        return d if self.vector else 1


def _mean_squared_norm(c):
    return c["sum_sq"] / c["n"].astype(np.float64)


def _squared_norm_of_mean(c):
    mean = c["sum"] / c["n"].astype(np.float64)[:, None]
    return np.einsum("ud,ud->u", mean, mean)


TYPE_SUMS: tuple[TypeSum, ...] = (
    TypeSum(
        "sum_sq",
        "Σ‖x‖²",
        vector=False,
        switch=None,
        values=lambda chunk: chunk.sq_norm,
        columns=(TokenColumn("Q", "Q_t = Σ‖x‖² / n_t, the mean squared norm", _mean_squared_norm),),
    ),
    TypeSum(
        "sum",
        "Σx",
        vector=True,
        switch=None,
        values=lambda chunk: chunk.rows,
        columns=(
            TokenColumn("M", "M_t = ‖Σx / n_t‖², the squared norm of the mean", _squared_norm_of_mean),
            TokenColumn(
                "V",
                "V_t = Q_t − M_t, the variance summed over dimensions",
                lambda c: clamp_variance(c["Q"] - c["M"], c["Q"]),
            ),
        ),
    ),
    TypeSum(
        "sum_unit",
        "Σ x/‖x‖",
        vector=True,
        switch="cosine",
        values=lambda chunk: chunk.unit,
        columns=(
            TokenColumn(
                "self_similarity",
                "S_t = (‖Σ x/‖x‖‖² − n_t) / (n_t(n_t − 1)), NaN for n_t = 1",
                lambda c: self_similarity(c["n"], c["sum_unit"]),
            ),
        ),
        unit_rows=True,
    ),
)


def is_on(switch: str | None, geometry) -> bool:
    """Whether ``switch`` is on in ``geometry``: a config's ``geometry`` mapping or an object with the
    switches as attributes (:class:`ctxvar.extraction.accumulator.GeometryOptions`)."""
    if switch is None:
        return True
    return bool(geometry.get(switch, False) if isinstance(geometry, Mapping) else getattr(geometry, switch, False))


def kept_sums(geometry) -> tuple[TypeSum, ...]:
    """The declared sums that ``geometry`` keeps (see :func:`is_on`), in declaration order."""
    return tuple(declared for declared in TYPE_SUMS if is_on(declared.switch, geometry))


def declared(name: str) -> TypeSum:
    """The declaration of the sum named ``name``."""
    for candidate in TYPE_SUMS:
        if candidate.name == name:
            return candidate
    raise KeyError(name)


def token_columns(sums) -> tuple[TokenColumn, ...]:
    """The ``tokens.parquet`` columns that the sums ``sums`` (declarations) finalize into, in order."""
    return tuple(column for declared_sum in sums for column in declared_sum.columns)


TOKEN_ROW_KEY_BYTES = 32  # tokens.parquet: layer, token and n per row, roughly


def token_row_bytes(sums) -> int:
    """Bytes per (layer, type) row of ``tokens.parquet`` for the declarations ``sums``: its keys and a float64
    per column they finalize into."""
    return TOKEN_ROW_KEY_BYTES + 8 * len(token_columns(sums))


def finalize_columns(count: np.ndarray, values: Mapping[str, np.ndarray], sums) -> dict[str, np.ndarray]:
    """The per-type columns of the declarations ``sums`` from n (U,) and the layer's sums ``values`` (by name)."""
    context: dict[str, np.ndarray] = {"n": count, **values}
    for column in token_columns(sums):
        context[column.name] = column.compute(context)
    return {column.name: context[column.name] for column in token_columns(sums)}


def docs_rows() -> tuple[list[str], list[str]]:
    """The rows ``docs/outputs.md`` gives the declared sums in its sums-file table and the declared columns in
    its ``tokens.parquet`` list, generated from :data:`TYPE_SUMS` (tests compare them with the docs)."""
    sums = []
    for item in TYPE_SUMS:
        parquet_type = "fixed_size_binary(8·d)" if item.vector else "float64"
        contents = f"{item.formula}, d float64" if item.vector else item.formula
        switch = f" (`geometry.{item.switch}` only)" if item.switch else ""
        sums.append(f"| | `{item.name}` | {parquet_type} | {contents}{switch} |")
    columns = [
        f"| `{column.name}` | {column.doc}" + (f" (`geometry.{item.switch}` only)" if item.switch else "") + " |"
        for item in TYPE_SUMS
        for column in item.columns
    ]
    return sums, columns
