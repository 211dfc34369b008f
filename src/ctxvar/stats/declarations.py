"""Every mergeable sum per (layer, token type) and per layer, declared once, with the columns it finalizes into.

A :class:`TypeSum` says what one sum is: its column in the sums files, its formula, whether it holds one
float64 or a d-vector per (layer, type), the ``geometry`` switch that keeps it, the per-token values a batch
adds to it (scatter-added by type on the device) and the ``tokens.parquet`` columns it finalizes into. Every
sum adds across shards, so the merge is the same for all of them. The registry :data:`TYPE_SUMS` drives:

- the accumulator (:class:`ctxvar.extraction.accumulator.TypeSums`) and its device bytes
  (:func:`ctxvar.extraction.budget.state_bytes`, :func:`~ctxvar.extraction.budget.batch_bytes`), and the jobs'
  memory request (:func:`ctxvar.run.resources.host_sums_bytes`), both of the sums' bytes through
  :func:`declared_sums_bytes`;
- the sums files' columns (:func:`ctxvar.stats.sums.sums_schema`, :class:`ctxvar.stats.sums.SumsFile`);
- the merge (:func:`ctxvar.stats.merge.merge_layer`) and ``tokens.parquet`` (:func:`ctxvar.stats.merge.token_table`);
- the disk estimate (:func:`ctxvar.run.disk.sums_bytes`) and the docs' tables (:func:`docs_rows`, tested against
  ``docs/outputs.md``).

A :class:`LayerSum` is the same for one sum per layer over all its tokens (:data:`LAYER_SUMS`): it is kept in
the moments file, added by the moments' merge and finalized into ``geometry.csv``
(:func:`ctxvar.stats.geometry.geometry_table`); the budget, the disk estimate and the docs count it too.

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
class DeclaredSum:
    """What every declared sum has: ``name``, ``formula``; ``vector``: d float64 values, else one float64;
    ``switch``: the ``geometry`` key that keeps it (None: always kept); ``values``: per-token values of a chunk,
    (C,) or (C, d) float64 on the device."""

    name: str
    formula: str
    vector: bool
    switch: str | None
    values: Callable

    def width(self, d: int) -> int:
        """float64 values per (layer, type) or per layer."""
        return d if self.vector else 1


@dataclass(frozen=True)
class TypeSum(DeclaredSum):
    """One sum per (layer, type t) over t's occurrences x: Σ values(x); a d-vector sum is stored as
    fixed_size_binary(8·d), a number as float64. ``unit_rows``: whether ``values`` reads the chunk's unit rows
    (a (C, d) float64 buffer on the device). ``columns``: what it finalizes into, in ``tokens.parquet``'s order.
    """

    columns: tuple[TokenColumn, ...] = ()
    unit_rows: bool = False


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


@dataclass(frozen=True)
class LayerColumn:
    """A float64 column of ``geometry.csv``: ``compute`` maps the layer's token count (``"n"``, N) and its
    per-layer sums (by name) to one value."""

    name: str
    doc: str
    compute: Callable[[Mapping[str, np.ndarray]], float]


@dataclass(frozen=True)
class LayerSum(DeclaredSum):
    """One sum per layer over all its N tokens x: Σ values(x), kept in the moments file (d rows per layer: a
    d-vector's component j on row j, one value repeated on every row) beside N, Σx and, with covariance, Σxxᵀ.
    ``columns``: what it finalizes into, in ``geometry.csv``.
    """

    columns: tuple[LayerColumn, ...] = ()


LAYER_SUMS: tuple[LayerSum, ...] = ()  # the moments file's N and Σx, and Σxxᵀ (geometry.covariance), are its keys


def is_on(switch: str | None, geometry) -> bool:
    """Whether ``switch`` is on in ``geometry``: a config's ``geometry`` mapping, or an object whose set
    ``switches`` holds those on (:class:`ctxvar.extraction.accumulator.GeometryOptions`)."""
    if switch is None:
        return True
    if isinstance(geometry, Mapping):
        return bool(geometry.get(switch, False))
    return switch in geometry.switches


# The sums of the first sums files, (kind, name, formula, vector): runs that keep no other kept the extraction hash
# they had before the declared sums entered it. Any other sum a run keeps, or one of these under a new name,
# formula or shape, enters the hash (:func:`hashed_sums`).
FIRST_SUMS = (
    ("type", "sum_sq", "Σ‖x‖²", False),
    ("type", "sum", "Σx", True),
    ("type", "sum_unit", "Σ x/‖x‖", True),
)


def hashed_sums(geometry) -> list[list]:
    """What the extraction hash (:func:`ctxvar.config.hashes.extraction_config_hash`) holds of the declared sums
    that ``geometry`` keeps, per (layer, type) and per layer: ``[kind, name, formula, vector]`` of each not in
    :data:`FIRST_SUMS`, in declaration order. A new or changed sum re-extracts the runs that keep it, and only
    those (a sum behind a switch that is off changes nothing); empty for the first sums alone."""
    kept = [("type", item) for item in kept_sums(geometry)] + [("layer", item) for item in kept_layer_sums(geometry)]
    identities = [(kind, item.name, item.formula, item.vector) for kind, item in kept]
    return [list(identity) for identity in identities if identity not in FIRST_SUMS]


def declared_switches() -> tuple[str, ...]:
    """The ``geometry`` keys that keep a declared sum, per (layer, type) or per layer, in declaration order."""
    switches = (item.switch for item in (*TYPE_SUMS, *LAYER_SUMS) if item.switch is not None)
    return tuple(dict.fromkeys(switches))


def kept_sums(geometry) -> tuple[TypeSum, ...]:
    """The declared sums that ``geometry`` keeps (see :func:`is_on`), in declaration order."""
    return _kept(TYPE_SUMS, geometry)


def kept_layer_sums(geometry) -> tuple[LayerSum, ...]:
    """The declared per-layer sums that ``geometry`` keeps, in declaration order."""
    return _kept(LAYER_SUMS, geometry)


def _kept(registry: tuple, geometry) -> tuple:
    return tuple(item for item in registry if is_on(item.switch, geometry))


def values_per_type(d: int, geometry) -> int:
    """float64 values per (layer, type) of the declared sums ``geometry`` keeps: the sum of their widths (d for a
    vector, 1 for a number); n_t, one count per type, is not among them."""
    return sum(item.width(d) for item in kept_sums(geometry))


def declared_sums_bytes(n_layers: int, n_types: int, d: int, geometry) -> int:
    """Bytes of the declared sums ``geometry`` keeps over ``n_layers`` layers of ``n_types`` types, and each type's
    count: 8 · (U · (L · w + 1) + L · w_layer), w and w_layer the float64 values per (layer, type) and per layer."""
    per_layer = sum(item.width(d) for item in kept_layer_sums(geometry))
    return 8 * (n_types * (n_layers * values_per_type(d, geometry) + 1) + n_layers * per_layer)


def keeps_moments(geometry) -> bool:
    """Whether a run with ``geometry`` writes the moments file: with geometry.covariance (Σxxᵀ) or a per-layer
    sum it keeps."""
    return is_on("covariance", geometry) or bool(kept_layer_sums(geometry))


def sums_files(prefix, geometry) -> dict[str, str]:
    """The files beside the sums file ``{prefix}.parquet`` that ``geometry`` (a config's mapping, or
    :class:`ctxvar.extraction.accumulator.GeometryOptions`) keeps, by kind, as an extraction job writes them and a
    merge adds them: ``moments`` (:func:`keeps_moments`), ``words`` and ``sentences`` (geometry.ethayarajh), ``sample``
    (geometry.twonn, or a sample size above 0)."""
    kinds = [
        *(["moments"] if keeps_moments(geometry) else []),
        *(["words", "sentences"] if is_on("ethayarajh", geometry) else []),
        *(["sample"] if keeps_sample(geometry) else []),
    ]
    return {kind: f"{prefix}.{kind}.parquet" for kind in kinds}


def keeps_sample(geometry) -> bool:
    """Whether a run with ``geometry`` writes the position sample: geometry.twonn in a config's mapping (whose
    ``sample_size`` the schema keeps at 3 or more), a sample size above 0 in
    :class:`ctxvar.extraction.accumulator.GeometryOptions` (0 without twonn)."""
    if isinstance(geometry, Mapping):
        return bool(geometry.get("twonn", False))
    return bool(getattr(geometry, "sample_size", 0))


def layer_columns() -> tuple[LayerColumn, ...]:
    """Every declared per-layer sum's ``geometry.csv`` columns (NaN where the sum is not kept)."""
    return tuple(column for item in LAYER_SUMS for column in item.columns)


def finalize_layer(n: int, values: Mapping[str, np.ndarray]) -> dict[str, float]:
    """The ``geometry.csv`` values of the per-layer sums held in ``values`` (by name), from N = ``n``."""
    context = {"n": n, **values}
    return {
        column.name: column.compute(context) for item in LAYER_SUMS if item.name in values for column in item.columns
    }


def declared_layer(name: str) -> LayerSum:
    """The declaration of the per-layer sum named ``name``."""
    return _named(LAYER_SUMS, name)


def declared(name: str) -> TypeSum:
    """The declaration of the sum named ``name``."""
    return _named(TYPE_SUMS, name)


def _named(registry: tuple, name: str):
    """The declaration in ``registry`` named ``name``; KeyError if none is."""
    for candidate in registry:
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


def layer_docs_rows() -> tuple[list[str], list[str]]:
    """The rows ``docs/outputs.md`` gives the declared per-layer sums in its moments-file table, and those
    ``docs/geometry.md`` gives their ``geometry.csv`` columns (both empty while none is declared)."""
    sums = [
        f"| | `{item.name}` | float64 | {item.formula}"
        + (", component j on row j" if item.vector else ", the same on each row")
        + (f" (`geometry.{item.switch}` only)" if item.switch else "")
        + " |"
        for item in LAYER_SUMS
    ]
    columns = [f"| `{column.name}` | {column.doc} | |" for column in layer_columns()]
    return sums, columns
