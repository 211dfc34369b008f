"""Deal items (chunks of sentences) to shards of near-equal forward-pass cost."""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ctxvar.errors import CtxvarError
from ctxvar.io import ParquetInput, read_table, write_table

log = logging.getLogger(__name__)


def sentence_cost(n_chars: np.ndarray) -> np.ndarray:
    """Forward cost proxy, tokenizer-free so that shards serve every model.

    Subword counts grow with characters; 2 stands for the added [bos]/[eos].
    """
    return np.asarray(n_chars, dtype=np.int64) + 2


def assign_shards(cost: np.ndarray, n_shards: int) -> np.ndarray:
    """Shard index per item: costs sorted descending, dealt in snake order 0…S−1, S−1…0.

    Deterministic (stable sort), vectorised, and every shard's total is within
    one item's cost of every other's.
    """
    order = np.argsort(-np.asarray(cost), kind="stable")
    lap = np.arange(len(order)) % (2 * n_shards)
    snake = np.where(lap < n_shards, lap, 2 * n_shards - 1 - lap)
    shard = np.empty(len(order), dtype=np.int64)
    shard[order] = snake
    return shard


def write_shards(sentences_path, shard_paths: list, chunk_sentences: int) -> None:
    """Split the sentences into ``len(shard_paths)`` files of near-equal token cost.

    Sentences sorted by length are cut into chunks of ``chunk_sentences``; whole
    chunks are dealt to shards (:func:`assign_shards`). Extraction batches within a
    chunk only, so every sentence meets the same batch-mates, and gets bitwise the
    same float32 hidden states, whatever the number of shards. Shard i goes to
    ``shard_paths[i]`` with a ``chunk`` column; sentences keep sample order.
    """
    table = read_table(sentences_path)
    warning = empty_shards_warning(table.num_rows, chunk_sentences, len(shard_paths))
    if warning:
        log.warning("%s", warning)
    cost = sentence_cost(pc.utf8_length(table.column("text")).to_numpy(zero_copy_only=False))
    chunk = np.empty(len(cost), dtype=np.int64)
    chunk[np.argsort(cost, kind="stable")] = np.arange(len(cost)) // chunk_sentences
    shard_of_chunk = assign_shards(np.bincount(chunk, weights=cost), len(shard_paths))
    table = table.append_column("chunk", pa.array(chunk))
    for index, path in enumerate(shard_paths):
        write_table(
            table.filter(pa.array(shard_of_chunk[chunk] == index)),
            path,
            metadata={"shard": index, "n_shards": len(shard_paths)},
        )


def empty_shards_warning(n_sentences: int | None, chunk_sentences: int, n_shards: int) -> str | None:
    """Why some shards would be empty (whole chunks are dealt to shards), or None; None also when unknown."""
    if n_sentences is None:
        return None
    chunks = math.ceil(n_sentences / chunk_sentences)
    if n_shards <= chunks:
        return None
    return (
        f"shards: {n_shards - chunks} of the {n_shards} shards will be empty: {n_sentences} sentences make only "
        f"{chunks} chunk(s) of chunk_sentences {chunk_sentences}, and each still costs an extraction job per model; "
        f"set shards: {max(chunks, 1)} or lower chunk_sentences"
    )


def known_sentence_count(corpus: dict, sentences_path) -> int | None:
    """The corpus's sentence count where it is known before any job runs: the sampled file if it exists,
    else at most ``fraction`` of a synthetic corpus; None otherwise."""
    if os.path.exists(sentences_path):
        try:
            return ParquetInput(sentences_path).num_rows
        except CtxvarError:
            return None  # the jobs that read it report it
    if corpus["source"] == "synthetic":
        return math.ceil(corpus["fraction"] * corpus["synthetic"]["n_sentences"])
    return None
