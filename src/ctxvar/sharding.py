"""Deal items (chunks of sentences) to shards of near-equal forward-pass cost."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .io import read_table, write_table


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
    cost = sentence_cost(pc.utf8_length(table.column("text")).to_numpy(zero_copy_only=False))
    chunk = np.empty(len(cost), dtype=np.int64)
    chunk[np.argsort(cost, kind="stable")] = np.arange(len(cost)) // chunk_sentences
    shard_of_chunk = assign_shards(np.bincount(chunk, weights=cost), len(shard_paths))
    table = table.append_column("chunk", pa.array(chunk))
    for index, path in enumerate(shard_paths):
        write_table(table.filter(pa.array(shard_of_chunk[chunk] == index)), path, metadata={"shard": index, "n_shards": len(shard_paths)})
