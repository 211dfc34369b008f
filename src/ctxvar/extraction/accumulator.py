"""Accumulate sums of hidden states on the device, in float64, for the layers of one pass.

Per (layer, type t): n_t and the sums of :data:`ctxvar.stats.declarations.TYPE_SUMS` the geometry keeps
(Σ‖x‖², Σx; with ``cosine``, Σ x/‖x‖).
Per layer, with ``covariance``: Σxxᵀ (d × d), and the declared per-layer sums kept
(:data:`ctxvar.stats.declarations.LAYER_SUMS`). With ``sample_size`` m > 0: the
hidden states of the shard's m sampled token positions, m = B · k for geometry.batches B
of geometry.sample_size k (see :mod:`ctxvar.extraction.position_sample`).
With ``ethayarajh``: Σ x/‖x‖ per (layer, raw token id) over the sentences' inner tokens, and per-layer
sentence sums (see :mod:`ctxvar.extraction.word_sums`).

Layers are added one at a time, into buffers reused from batch to batch: on a CPU,
fresh (L·N, d) float64 buffers cost more in page faults than the sums themselves.
On a CPU the float64 work goes in chunks of C = CPU_CHUNK_ROWS rows, which stay in
cache between the gather, the copy, the norms and the scatter-add (measured 1.7×
faster than whole batches on a 2-core VM); on a GPU, C = N.

Their device memory, and how many layers one pass holds: :mod:`ctxvar.extraction.budget`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ctxvar.config.schema import SCHEMA
from ctxvar.errors import StatisticsError
from ctxvar.extraction.host_copy import finite, to_host
from ctxvar.extraction.word_sums import WordSums
from ctxvar.models.batching import to_device
from ctxvar.stats.declarations import TypeSum, declared_switches, keeps_moments, kept_layer_sums, kept_sums

BUILT_IN_SWITCHES = ("covariance", "cosine", "ethayarajh")  # geometry switches whose keys the files' metadata
# records even when off, as the first sums files did; any other (a declared sum's) is recorded only when on


@dataclass(frozen=True, init=False)
class GeometryOptions:
    """Which sums beyond the paper's n, Σx, Σ‖x‖² a job accumulates (config ``geometry``): ``switches``, the
    geometry switches that are on (``covariance``: Σxxᵀ per layer; ``cosine``: Σ x/‖x‖ per (layer, type);
    ``ethayarajh``: Σ x/‖x‖ per (layer, raw token id) and the sentence sums, word_sums.py; and any declared sum's
    switch, :mod:`ctxvar.stats.declarations`), and ``sample_size``, the points per layer in the sample (B batches
    of k for TwoNN; 0: none). Made as ``GeometryOptions(covariance=True, sample_size=8)``: a switch given True is
    on."""

    switches: frozenset[str]
    sample_size: int

    def __init__(self, *, sample_size: int = 0, switches=frozenset(), **on: bool):
        unknown = set(on).union(switches) - {*BUILT_IN_SWITCHES, *declared_switches()}
        if unknown:
            raise TypeError(f"GeometryOptions: no geometry switch {sorted(unknown)}")
        object.__setattr__(self, "switches", frozenset(switches) | {key for key, value in on.items() if value})
        object.__setattr__(self, "sample_size", sample_size)

    covariance = property(lambda self: "covariance" in self.switches)
    cosine = property(lambda self: "cosine" in self.switches)
    ethayarajh = property(lambda self: "ethayarajh" in self.switches)

    @classmethod
    def default(cls) -> "GeometryOptions":
        """The default geometry: config ``geometry`` as the schema fills it in when a config leaves it out."""
        keys = SCHEMA["properties"]["geometry"]["properties"]
        return cls.from_config({key: value["default"] for key, value in keys.items()})

    @classmethod
    def from_config(cls, geometry: dict) -> "GeometryOptions":
        """From config ``geometry`` (or :func:`ctxvar.config.hashes.extraction_geometry`, which leaves out
        batches: 1)."""
        points = geometry["sample_size"] * geometry.get("batches", 1) if geometry["twonn"] else 0
        switches = {key for key in (*BUILT_IN_SWITCHES, *declared_switches()) if geometry.get(key, False)}
        return cls(sample_size=points, switches=frozenset(switches))

    def record(self) -> dict:
        """The options as the sums files' metadata records them (JSON): ``covariance``, ``cosine``,
        ``sample_size`` and ``ethayarajh``, then each other switch that is on, as True (none for the shipped sums,
        whose metadata stays as it was)."""
        recorded = {"covariance": self.covariance, "cosine": self.cosine, "sample_size": self.sample_size}
        others = sorted(self.switches.difference(BUILT_IN_SWITCHES))
        return recorded | {"ethayarajh": self.ethayarajh} | dict.fromkeys(others, True)

    @property
    def moments(self) -> bool:
        """Whether the job writes a moments file: Σxxᵀ or a declared per-layer sum kept."""
        return keeps_moments(self)


NO_GEOMETRY = GeometryOptions()
CPU_CHUNK_ROWS = 256  # float64 rows per step on a CPU: a chunk's 1.5 MB (d = 768) stays in cache
SPLIT_CHUNK_ROWS = 4096  # rows per fp32 product of the split Σxxᵀ before it is added into float64


def gram_block(d: int) -> int:
    """Rows per block of the Gram matrix: 4 block rows of its upper triangle take 5/8 of the full product's flops."""
    return -(-d // 4)


def chunk_rows(device: torch.device, n_rows: int) -> int:
    """Rows per step of the float64 work on ``n_rows`` rows: CPU_CHUNK_ROWS on a CPU, all of them elsewhere."""
    return CPU_CHUNK_ROWS if device.type == "cpu" else max(n_rows, 1)


def full_width(states: torch.Tensor, d: int, width: int | None = None) -> torch.Tensor:
    """Hidden states (…, w) as (…, d): a state of the blocks' width d as it is; the last hidden state of a model
    whose tail projects it to w < d (``width``, OPT's ``project_out``) with d − w zero coordinates appended, which
    leave every sum of it the same at its own width (‖x‖², the first w coordinates of Σx and Σxxᵀ; the files record
    w, :func:`ctxvar.stats.sums.layer_width`). Any other width is a :class:`StatisticsError`."""
    got = states.shape[-1]
    if got == d:
        return states
    if got != width or got > d:
        raise StatisticsError(f"a hidden state is {got} wide, where the model's are {d} (its last {width})")
    return torch.nn.functional.pad(states, (0, d - got))


def column_sums(points: torch.Tensor) -> torch.Tensor:
    """Σ over the rows of ``points`` (N, d), as float64 (d,), in chunks: on a CPU, ``sum(dtype=float64)`` first
    copies its whole input to float64 (for a 16,384 × 768 batch: 100 MB of fresh pages, 31 ms against 3 ms)."""
    step = chunk_rows(points.device, points.shape[0])
    total = torch.zeros(points.shape[1], dtype=torch.float64, device=points.device)
    for start in range(0, points.shape[0], step):
        total += points[start : start + step].sum(0, dtype=torch.float64)
    return total


class EmbeddingSums:
    """All sums of one pass over a shard, for the hidden states ``layers`` (i-th of them: row block i).

    Gathers each batch's real-token rows one layer at a time into a reused buffer
    and adds them, as float64, to every part. Nothing here synchronises with the
    host. ``n_hidden`` is the model's number of hidden states;
    ``sample_tokens`` the shard token indices of the sampled points (slot order);
    ``forward_dtype`` the model's, which picks the product of Σxxᵀ (:func:`splits_gram`), unless ``split`` says
    (sums kept in host memory for a GPU job take the GPU's product, so that every layer's is the same method);
    ``last_width``: the last hidden state's width where the model's tail projects it (:func:`full_width`).
    """

    def __init__(
        self,
        layers: Sequence[int],
        n_hidden: int,
        n_types: int,
        d: int,
        device: torch.device,
        options: GeometryOptions = NO_GEOMETRY,
        sample_tokens: np.ndarray | None = None,
        n_words: int = 0,
        forward_dtype: torch.dtype = torch.float32,
        split: bool | None = None,
        last_width: int | None = None,
    ):
        self.layers, self.n_hidden, self.d, self.device = list(layers), n_hidden, d, torch.device(device)
        self.last_width = d if last_width is None else last_width
        n_layers = len(self.layers)
        self.types = TypeSums(n_layers, n_types, d, device, kept_sums(options))
        self.words = WordSums(n_layers, n_words, d, device) if options.ethayarajh else None
        split = splits_gram(forward_dtype, device) if split is None else split
        self.moments = SecondMoments(n_layers, d, device, split) if options.covariance else None
        self.layer_sums = {  # the declared per-layer sums kept: (L, d) or (L,) each
            item.name: (
                item,
                torch.zeros((n_layers, d) if item.vector else n_layers, dtype=torch.float64, device=device),
            )
            for item in kept_layer_sums(options)
        }
        self.sample = PointSample(n_layers, d, device, sample_tokens) if sample_tokens is not None else None
        self._gather: torch.Tensor | None = None  # one layer's rows of a batch as the forward gives them

    def accumulate(
        self,
        hidden_states: Sequence[torch.Tensor],
        positions: torch.Tensor,
        type_index: torch.Tensor,
        sample_hits: tuple[torch.Tensor, torch.Tensor] | None = None,
        word_index: torch.Tensor | None = None,
    ) -> None:
        """Add the rows ``positions`` of the flattened (B·T, d) hidden states of each of ``layers``.

        ``hidden_states``: n_hidden tensors (B, T, d); ``positions``, ``type_index``:
        (N,) int64 on the device; ``sample_hits``: the batch's entry of
        :meth:`PointSample.locate` (None: no sampled token in the batch); ``word_index``
        (N,) int64: each token's raw-id word, −1 for boundary tokens (with ``ethayarajh``).
        """
        assert len(hidden_states) == self.n_hidden, (len(hidden_states), self.n_hidden)
        assert hidden_states[0].shape[-1] in (self.d, self.last_width), (hidden_states[0].shape, self.d)
        n = positions.shape[0]
        self.types.count_tokens(type_index)
        if self.words is not None:
            assert word_index is not None, "geometry.ethayarajh: accumulate needs each token's word_index"
            n_rows, width = hidden_states[0].shape[:2]
            self.words.start_batch(word_index, torch.div(positions, width, rounding_mode="floor"), n_rows)
        step = chunk_rows(positions.device, n)
        for i, layer in enumerate(self.layers):
            last = self.last_width if layer == self.n_hidden - 1 else None
            states = full_width(hidden_states[layer], self.d, last).reshape(-1, self.d)
            points = self._gather_rows(states, positions) if self.moments is not None else None
            if self.words is not None:
                self.words.start_layer()
            for start in range(0, n, step):
                chunk = slice(start, start + step)
                rows = points[chunk] if points is not None else self._gather_rows(states, positions[chunk])
                added = self.types.add(i, rows, type_index[chunk])
                for item, total in self.layer_sums.values():
                    total[i] += item.values(added).sum(0)
                if self.words is not None:
                    self.words.add(i, chunk, added.rows, added.unit)
            if self.words is not None:
                self.words.end_layer(i)
            if self.sample is not None and sample_hits is not None:
                self.sample.add(i, states, positions, *sample_hits)
            if points is not None:
                self.moments.add(i, points)  # fp32 rows are centred in place: the gather is not read again

    def release_buffers(self) -> None:
        """Free the buffers the batches reuse (gathered rows, float64 rows, x/‖x‖, Σxxᵀ's chunks, sentence sums),
        keeping the sums: called once the last batch is added, so that a layer whose sums wait to be handed over
        holds no batch buffers beside the next layer's (:mod:`ctxvar.extraction.hand_over`)."""
        self._gather = None
        self.types.release_buffers()
        if self.moments is not None:
            self.moments._parts = self.moments._centred = None
        if self.words is not None:
            self.words.release_buffers()

    def _gather_rows(self, states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rows ``positions`` of ``states`` (B·T, d), in a reused buffer (forward dtype) grown as needed: fresh rows
        for every layer of every batch cost more (page faults on a CPU) than the copies."""
        size = positions.shape[0]
        if self._gather is None or self._gather.shape[0] < size or self._gather.dtype != states.dtype:
            self._gather = torch.empty(size, self.d, dtype=states.dtype, device=states.device)
        return torch.index_select(states, 0, positions, out=self._gather[:size])

    def all_finite(self) -> bool:
        """One host sync: whether every sum is finite (fp16 overflow gives inf/nan)."""
        return (
            self.types.all_finite()
            and (self.moments is None or finite(self.moments.outer))
            and all(finite(total) for _, total in self.layer_sums.values())
            and (self.words is None or self.words.all_finite())
        )


class RowChunk:
    """A chunk's float64 rows and what declared sums read of them, each made once, on first use: ``sq_norm``
    (C,) = ‖x‖², ``unit`` (C, d) = x/‖x‖ (0 for a zero vector, never seen in practice), in ``unit_buffer``."""

    def __init__(self, rows: torch.Tensor, unit_buffer):
        self.rows = rows
        self._unit_buffer = unit_buffer  # () -> a (≥ C, d) float64 buffer
        self._sq_norm: torch.Tensor | None = None
        self._unit: torch.Tensor | None = None

    @property
    def sq_norm(self) -> torch.Tensor:
        if self._sq_norm is None:
            self._sq_norm = torch.linalg.vecdot(self.rows, self.rows)
        return self._sq_norm

    @property
    def unit(self) -> torch.Tensor:
        if self._unit is None:
            inverse_norm = torch.where(self.sq_norm > 0, self.sq_norm.rsqrt(), 0.0)
            self._unit = torch.mul(self.rows, inverse_norm[:, None], out=self._unit_buffer()[: self.rows.shape[0]])
        return self._unit


class TypeSums:
    """n_t and the declared sums ``sums`` (:mod:`ctxvar.stats.declarations`) per (layer i, type t), at flat row
    i · U + t.

    Each sum's per-token values of a layer's rows are added with one ``index_add_`` into that layer's block of
    rows, in token order.
    """

    def __init__(self, n_layers: int, n_types: int, d: int, device: torch.device, sums: Sequence[TypeSum] = ()):
        self.n_layers, self.n_types, self.d = n_layers, n_types, d
        self.declared = tuple(sums)
        self.count = torch.zeros(n_types, dtype=torch.int64, device=device)  # (U,)
        self.sums = {  # (L·U, d) or (L·U,) each
            item.name: torch.zeros(
                (n_layers * n_types, d) if item.vector else n_layers * n_types, dtype=torch.float64, device=device
            )
            for item in self.declared
        }
        self._rows: torch.Tensor | None = None  # reused float64 rows and x/‖x‖ rows, grown to the largest chunk
        self._unit: torch.Tensor | None = None

    def count_tokens(self, type_index: torch.Tensor) -> None:
        """Add one batch's occurrences to n_t (once per batch, whatever the number of layers)."""
        self.count.index_add_(0, type_index, torch.ones_like(type_index))

    def add(self, layer: int, points: torch.Tensor, type_index: torch.Tensor) -> RowChunk:
        """``points``: (N, d) rows of row block ``layer`` as the forward gives them; ``type_index``: (N,).
        They are added as float64 (exact: every fp32, bf16 and fp16 value is a float64). Returns their
        :class:`RowChunk` (the float64 rows and what the sums made of them), valid until the next call."""
        n = points.shape[0]
        if self._rows is None or self._rows.shape[0] < n:
            self._rows = torch.empty(n, self.d, dtype=torch.float64, device=points.device)
            self._unit = None
        rows = self._rows[:n]
        rows.copy_(points)
        chunk = RowChunk(rows, self._unit_rows)
        block = slice(layer * self.n_types, (layer + 1) * self.n_types)
        for item in self.declared:
            self.sums[item.name][block].index_add_(0, type_index, item.values(chunk))
        return chunk

    def release_buffers(self) -> None:
        self._rows = self._unit = None

    def _unit_rows(self) -> torch.Tensor:
        if self._unit is None:
            self._unit = torch.empty_like(self._rows)
        return self._unit

    def all_finite(self) -> bool:
        return all(finite(values) for values in self.sums.values())

    def to_numpy(self) -> dict[str, np.ndarray]:
        """``count`` (U,) and each sum by name, (L, U, d) or (L, U), on the host."""
        L, U = self.n_layers, self.n_types
        arrays = {"count": to_host(self.count)}
        for item in self.declared:
            arrays[item.name] = to_host(self.sums[item.name]).reshape((L, U, self.d) if item.vector else (L, U))
        return arrays


class SecondMoments:
    """Σxxᵀ per layer, (L, d, d) float64.

    Per batch and layer, with c the batch's mean rounded and y = x − c in fp32,
    Σxxᵀ = Σyyᵀ + c(Σx)ᵀ + (Σx − N·c)cᵀ; the rank-one terms and the sum over
    batches are float64, and centring makes the rounding of Σyyᵀ relative to the
    batch's spread, not to ‖mean‖². Σyyᵀ is taken for the block rows of its upper
    triangle only (the blocks below are mirrored in :meth:`to_numpy`), either

    - as one fp32 product (c rounded to fp32; the forward pass's own precision, half the
      cost of fp64 on a CPU, a 32nd to a 64th on consumer GPUs), or, with ``split``,
    - on tensor cores (:func:`splits_gram`): c rounded to bf16, so that y is exact in
      fp32 for bf16 rows; y split into bf16 parts hi = bf16(y), lo = bf16(y − hi); per
      chunk of at most :data:`SPLIT_CHUNK_ROWS` rows, hiᵀhi + hiᵀlo + loᵀhi as one
      product with fp32 accumulation (one bf16 product of the rows [hi, hi, lo] by
      [hi, lo, hi]), added into float64. The omitted loᵀlo and the fp32 accumulation
      leave the covariance within the bound of ``docs/numerics.md``.

    Batches are the same whatever the sharding, so merged shards give the one-shard
    sums up to float64 rounding.
    """

    def __init__(self, n_layers: int, d: int, device: torch.device, split: bool = False):
        self.outer = torch.zeros(
            n_layers, d, d, dtype=torch.float64, device=device
        )  # valid on and above the diagonal blocks
        self._block = gram_block(d)
        self.split = split
        self._parts: torch.Tensor | None = None  # (4·C, d) bf16: a chunk's hi, hi, lo, hi (split)
        self._centred: torch.Tensor | None = None  # (C, d) fp32: a chunk's y, then y − hi (split)

    def add(self, layer: int, points: torch.Tensor) -> None:
        """``points``: (N, d) rows of the batch for row block ``layer`` as the forward gives them; fp32 rows are
        centred in place (the fp32 product)."""
        n_rows = points.shape[0]
        if n_rows == 0:
            return
        total = column_sums(points)
        outer = self.outer[layer]
        if self.split:
            centre = (total / n_rows).bfloat16()
            for start in range(0, n_rows, SPLIT_CHUNK_ROWS):
                self._add_split(outer, points[start : start + SPLIT_CHUNK_ROWS], centre.float())
        else:
            centre = (total / n_rows).float()
            points = points.float().sub_(centre)
            for start in range(0, outer.shape[0], self._block):
                outer[start : start + self._block, start:].add_(
                    points[:, start : start + self._block].T @ points[:, start:]
                )
        centre = centre.double()
        outer.addr_(centre, total).addr_(total - n_rows * centre, centre)

    def _add_split(self, outer: torch.Tensor, points: torch.Tensor, centre: torch.Tensor) -> None:
        """Add hiᵀhi + hiᵀlo + loᵀhi of the rows ``points`` (≤ SPLIT_CHUNK_ROWS) centred on ``centre`` (fp32)."""
        n, d = points.shape
        if self._centred is None or self._centred.shape[0] < n:  # grown to the largest chunk, then reused
            self._parts = torch.empty(4 * n, d, dtype=torch.bfloat16, device=points.device)
            self._centred = torch.empty(n, d, dtype=torch.float32, device=points.device)
        parts, centred = self._parts[: 4 * n], self._centred[:n]
        torch.sub(points, centre, out=centred)
        parts[:n].copy_(centred)  # hi
        centred.sub_(parts[:n])  # y − hi, exact in fp32
        parts[2 * n : 3 * n].copy_(centred)  # lo
        parts[n : 2 * n].copy_(parts[:n])
        parts[3 * n :].copy_(parts[:n])
        left, right = parts[: 3 * n], parts[n:]  # [hi, hi, lo] and [hi, lo, hi]
        for start in range(0, d, self._block):
            outer[start : start + self._block, start:].add_(
                bf16_product(left[:, start : start + self._block], right[:, start:])
            )

    def to_numpy(self) -> np.ndarray:
        """Σxxᵀ (L, d, d), the blocks below the diagonal blocks mirrored from above."""
        outer = to_host(self.outer)
        for start in range(0, outer.shape[1], self._block):
            stop = start + self._block
            outer[:, stop:, start:stop] = outer[:, start:stop, stop:].transpose(0, 2, 1)
        return outer


def splits_gram(forward_dtype: torch.dtype, device: torch.device) -> bool:
    """Whether :class:`SecondMoments` of a ``forward_dtype`` model on ``device`` takes the split product: bf16 and
    fp16 models on a CUDA device whose torch multiplies bf16 into fp32 (``torch.mm``'s ``out_dtype``, torch ≥ 2.8).
    fp32 models keep the fp32 product (split TF32 products can exceed their forward pass's own rounding), and so do
    CPUs, which have no faster product than fp32's."""
    return (
        forward_dtype in (torch.bfloat16, torch.float16)
        and device.type == "cuda"
        and "dtype" in torch.ops.aten.mm.overloads()
    )


def bf16_product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """leftᵀ right (fp32) of bf16 ``left`` (K, m) and ``right`` (K, n), accumulated in fp32: on tensor cores on a
    CUDA device; elsewhere as the fp32 product of the same values (each product of two bf16 is exact in fp32)."""
    if left.device.type == "cuda":
        return torch.mm(left.T, right, out_dtype=torch.float32)
    return left.T.float() @ right.float()


class PointSample:
    """The hidden states of chosen token positions, (L, k, d) float32 (the forward pass's values, exact in fp32).

    ``sample_tokens`` (k,) are shard token indices; slot j holds token
    ``sample_tokens[j]``. Finding the batches' sampled tokens is host work on host
    arrays, done once for all batches; only the (few) indices move to the device.
    """

    def __init__(self, n_layers: int, d: int, device: torch.device, sample_tokens: np.ndarray):
        self.points = torch.zeros(n_layers, len(sample_tokens), d, dtype=torch.float32, device=device)
        self._order = np.argsort(sample_tokens)
        self._sorted = np.asarray(sample_tokens)[self._order]

    def locate(self, tokens: np.ndarray, real: np.ndarray) -> list[tuple[torch.Tensor, torch.Tensor] | None]:
        """Per batch b, whose shard token indices are ``tokens[real[b]:real[b+1]]``: ``(slots, index)`` on the
        device, the sample slots of its sampled tokens and their rows in the batch; None for a batch without any.
        One host pass and one copy to the device for all batches."""
        n_batches = len(real) - 1
        if len(self._sorted) == 0 or len(tokens) == 0:
            return [None] * n_batches
        where = np.searchsorted(self._sorted, tokens).clip(max=len(self._sorted) - 1)
        hit = np.flatnonzero(self._sorted[where] == tokens)  # in token order, so batch by batch
        batch = np.searchsorted(real, hit, side="right") - 1
        located = to_device(np.stack([self._order[where[hit]], hit - real[batch]]).astype(np.int64), self.points.device)
        bounds = np.searchsorted(batch, np.arange(n_batches + 1))
        return [
            (located[0, start:stop], located[1, start:stop]) if stop > start else None
            for start, stop in zip(bounds[:-1], bounds[1:])
        ]

    def add(
        self, layer: int, states: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor, index: torch.Tensor
    ) -> None:
        """Copy rows ``positions[index]`` of ``states`` (B·T, d), row block ``layer``, into ``slots`` (as fp32)."""
        self.points[layer].index_copy_(0, slots, states.index_select(0, positions[index]).to(torch.float32))

    def to_numpy(self) -> np.ndarray:
        return to_host(self.points)
