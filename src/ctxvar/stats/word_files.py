"""The files of the sums for Ethayarajh's measures (geometry.ethayarajh; see :mod:`ctxvar.extraction.word_sums`).

Words file (layout :data:`WORDS_LAYOUT`): one row group per layer, rows sorted by id:

    layer     int16                     hidden-state index
    id        int64                     the raw token id (a "word")
    token     string                    the tokenizer's string for it
    n         int64                     occurrences n_w among the sentences' inner tokens
    sum_unit  fixed_size_binary(8·d)    Σ x/‖x‖ over them: d little-endian float64

Sentences file (layout :data:`SENTENCES_LAYOUT`): row group i = layer i, with d rows,
row j for dimension j (the shape of the moments file):

    layer             int16     hidden-state index
    n_contexts        int64     contexts S (input sequences) with an inner token (the same on every row)
    intra_sum         float64   Σ_s IntraSim(s) (the same on every row)
    sum_mean_unit_sq  float64   Σ_s ‖ū_s‖² (the same on every row)
    sum_mean_unit     float64   (Σ_s ū_s)_j

Both merge by adding, like the sums files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ctxvar.errors import StatisticsError
from ctxvar.files.parquet import tagged_schema, vector_column, vector_rows
from ctxvar.stats.sums import LayerFile

WORDS_LAYOUT = "ctxvar words 1"
SENTENCES_LAYOUT = "ctxvar sentences 1"


def words_schema(d: int, metadata: dict) -> pa.Schema:
    fields = [
        pa.field("layer", pa.int16(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("token", pa.string(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),
        pa.field("sum_unit", pa.binary(8 * d), nullable=False),
    ]
    return tagged_schema(pa.schema(fields), metadata, WORDS_LAYOUT)


def sentences_schema(metadata: dict) -> pa.Schema:
    fields = [
        pa.field("layer", pa.int16(), nullable=False),
        pa.field("n_contexts", pa.int64(), nullable=False),
        pa.field("intra_sum", pa.float64(), nullable=False),
        pa.field("sum_mean_unit_sq", pa.float64(), nullable=False),
        pa.field("sum_mean_unit", pa.float64(), nullable=False),
    ]
    return tagged_schema(pa.schema(fields), metadata, SENTENCES_LAYOUT)


@dataclass
class LayerWords:
    """One layer's per-word sums, rows sorted by ``ids``."""

    layer: int
    ids: np.ndarray  # (W,) int64
    tokens: np.ndarray  # (W,) str
    count: np.ndarray  # (W,) int64
    sum_unit: np.ndarray  # (W, d) float64

    def to_table(self, schema: pa.Schema) -> pa.Table:
        return pa.table(
            [
                pa.array(np.full(len(self.ids), self.layer, np.int16)),
                pa.array(self.ids, pa.int64()),
                pa.array(self.tokens, pa.string()),
                pa.array(self.count, pa.int64()),
                vector_column(self.sum_unit),
            ],
            schema=schema,
        )


@dataclass
class LayerSentences:
    """One layer's sentence sums."""

    layer: int
    n_contexts: int
    intra_sum: float
    sum_mean_unit_sq: float
    sum_mean_unit: np.ndarray  # (d,)

    def to_table(self, schema: pa.Schema) -> pa.Table:
        d = len(self.sum_mean_unit)
        return pa.table(
            [
                pa.array(np.full(d, self.layer, np.int16)),
                pa.array(np.full(d, self.n_contexts, np.int64)),
                pa.array(np.full(d, self.intra_sum, np.float64)),
                pa.array(np.full(d, self.sum_mean_unit_sq, np.float64)),
                pa.array(np.asarray(self.sum_mean_unit, np.float64)),
            ],
            schema=schema,
        )

    def __add__(self, other: "LayerSentences") -> "LayerSentences":
        return LayerSentences(
            self.layer,
            self.n_contexts + other.n_contexts,
            self.intra_sum + other.intra_sum,
            self.sum_mean_unit_sq + other.sum_mean_unit_sq,
            self.sum_mean_unit + other.sum_mean_unit,
        )


class WordsFile(LayerFile):
    """A words file, one layer at a time; its merge adds the shards' words over the union of their ids."""

    LAYOUT = WORDS_LAYOUT
    ROW_GROUP = "words, layer"

    def from_table(self, layer: int, table: pa.Table) -> LayerWords:
        return LayerWords(
            layer,
            table.column("id").to_numpy(),
            table.column("token").to_numpy(zero_copy_only=False),
            table.column("n").to_numpy(),
            vector_rows(table.column("sum_unit")),
        )

    @classmethod
    def merged_schema(cls, first: "WordsFile", metadata: dict) -> pa.Schema:
        return words_schema(metadata["d"], metadata)

    @classmethod
    def merged_table(cls, layer: int, parts: list[LayerWords], schema: pa.Schema, metadata: dict) -> pa.Table:
        return add_words(parts).to_table(schema)


class SentencesFile(LayerFile):
    """A sentences file, one layer at a time; its merge adds the shards' sentence sums."""

    LAYOUT = SENTENCES_LAYOUT
    ROW_GROUP = "sentences, layer"

    def from_table(self, layer: int, table: pa.Table) -> LayerSentences:
        if len(table) == 0:
            raise StatisticsError(f"{self.path}: layer {layer} holds no rows; delete it and re-run")
        return LayerSentences(
            layer,
            int(table.column("n_contexts")[0].as_py()),
            float(table.column("intra_sum")[0].as_py()),
            float(table.column("sum_mean_unit_sq")[0].as_py()),
            table.column("sum_mean_unit").to_numpy(),
        )

    @classmethod
    def merged_schema(cls, first: "SentencesFile", metadata: dict) -> pa.Schema:
        return sentences_schema(metadata)

    @classmethod
    def merged_table(cls, layer: int, parts: list[LayerSentences], schema: pa.Schema, metadata: dict) -> pa.Table:
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total.to_table(schema)


def add_words(parts: list[LayerWords]) -> LayerWords:
    """The sum of one layer's words over ``parts`` (in shard order), rows aligned to the union of their ids."""
    ids, first = np.unique(np.concatenate([p.ids for p in parts]), return_index=True)
    tokens = np.concatenate([p.tokens for p in parts])[first] if len(ids) else np.zeros(0, dtype=object)
    count = np.zeros(len(ids), np.int64)
    sum_unit = np.zeros((len(ids), parts[0].sum_unit.shape[1]))
    for part in parts:
        at = np.searchsorted(ids, part.ids)
        if not np.array_equal(tokens[at], part.tokens):
            raise StatisticsError(
                "merge: two words files spell a token id differently (other tokenizers); delete them and re-run"
            )
        count[at] += part.count
        sum_unit[at] += part.sum_unit
    return LayerWords(parts[0].layer, ids, tokens, count, sum_unit)
