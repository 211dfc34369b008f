"""The second pass for Fig. 1: every occurrence of a few selected types at one layer.

The job runs the model like an extraction job but only over the sentences that
contain a selected type, and keeps, per occurrence, its coordinates on the two
PCA components and its squared norm (float64). Per type, the mean coordinates
and mean squared norm of these points equal the first pass's μ_t·W and Q_t up
to float32 batch-composition rounding: the two passes check each other.

Memory: 3 float64 per kept occurrence, on the device until the shard ends.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import pyarrow as pa
import torch

from ctxvar.extraction.extract import prepare_shard, release_device, released_on_error
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.shard import chunk_batches
from ctxvar.io import read_csv
from ctxvar.parquet_files import write_table
from ctxvar.stats.pca_components import read_components

log = logging.getLogger(__name__)

POINTS_SCHEMA = pa.schema(
    [("token", pa.string()), ("pc1", pa.float64()), ("pc2", pa.float64()), ("sq_norm", pa.float64())]
)


class TypeProjections:
    """Occurrences of selected types at one layer, projected on ``components``; same interface as EmbeddingSums.

    Boolean selection of the kept rows synchronises with the host once per batch;
    this pass covers a handful of types, so it is not worth avoiding.
    """

    def __init__(self, layer: int, n_layers: int, selected: torch.Tensor, components: torch.Tensor):
        self.layer, self.n_layers = layer, n_layers
        self.selected = selected  # (U,) bool over the shard's types
        self.components = components  # (2, d) float64
        self.parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def accumulate(
        self, hidden_states: Sequence[torch.Tensor], positions: torch.Tensor, type_index: torch.Tensor, sample_hits=None
    ) -> None:
        """``hidden_states``: L tensors (B, T, d); ``positions``, ``type_index``: (N,) int64; ``sample_hits`` unused."""
        assert len(hidden_states) == self.n_layers, (len(hidden_states), self.n_layers)
        keep = self.selected[type_index]  # (N,)
        d = hidden_states[self.layer].shape[-1]
        rows = hidden_states[self.layer].reshape(-1, d).index_select(0, positions[keep]).to(torch.float64)  # (K, d)
        self.parts.append((type_index[keep], rows @ self.components.T, torch.einsum("kd,kd->k", rows, rows)))

    def to_numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(type index (K,), coordinates (K, 2), squared norms (K,))``."""
        if not self.parts:
            return np.zeros(0, np.int64), np.zeros((0, 2)), np.zeros(0)
        return tuple(torch.cat(part).cpu().numpy() for part in zip(*self.parts))


def sequences_with(type_index: np.ndarray, offsets: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Indices of the sequences (``offsets`` delimit them) holding at least one token whose type is ``wanted``."""
    hits = np.concatenate([[0], np.cumsum(wanted[type_index])])
    return np.flatnonzero(hits[offsets[1:]] > hits[offsets[:-1]])


def collect_points(shard_path, out_path, settings: ExtractionSettings, selection_path, components_path) -> int:
    """Write every occurrence in the shard of the types in selection.csv, at its layer, as (token, pc1, pc2,
    sq_norm) with the components of components.csv; returns the number of occurrences."""
    selection = read_csv(selection_path, keep_default_na=False)
    if selection.empty:  # no type could be selected (see select_pca_tokens): nothing to collect
        write_table(
            POINTS_SCHEMA.empty_table(), out_path, metadata={"model_id": settings.model["id"], "shard": settings.shard}
        )
        return 0
    layer, components = int(selection["layer"].iloc[0]), read_components(components_path)
    job = prepare_shard(shard_path, settings, hash_weights=False)  # the points carry no provenance hash
    with released_on_error(job):
        wanted = np.isin(job.types, selection["token"].to_numpy())
        rows = sequences_with(job.type_index, job.encoded.offsets, wanted)
        batches = [rows[b] for b in chunk_batches(job.encoded.lengths[rows], job.chunk[rows], settings.batch_tokens)]
        log.info(
            "%s layer %d: %d of %d sequences hold a selected type",
            settings.model["id"],
            layer,
            len(rows),
            len(job.encoded.lengths),
        )
        collector = TypeProjections(
            layer,
            job.n_layers,
            torch.from_numpy(wanted).to(job.device),
            torch.from_numpy(np.ascontiguousarray(components, dtype=np.float64)).to(job.device),
        )
        job.run(collector, settings, job.padded(batches))
        type_index, coordinates, sq_norm = collector.to_numpy()
        del collector  # its device tensors go before the device is released
    release_device(job)  # the points are in host memory: the next job may use the GPU while these are written
    table = pa.table(
        [pa.array(job.types[type_index], pa.string()), coordinates[:, 0], coordinates[:, 1], sq_norm],
        schema=POINTS_SCHEMA,
    )
    write_table(table, out_path, metadata={"model_id": settings.model["id"], "layer": layer, "shard": settings.shard})
    return table.num_rows
