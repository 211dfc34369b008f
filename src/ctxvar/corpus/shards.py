"""Plan a model's forward batches over the whole corpus and deal whole batches to shards of near-equal cost."""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pyarrow as pa

from ctxvar.config.entries import built_in_run
from ctxvar.corpus.sources import source_rows_at_most
from ctxvar.errors import CtxvarError
from ctxvar.files.atomic import verify_manifest
from ctxvar.files.parquet import ParquetInput, read_table, write_table
from ctxvar.models.batching import BATCH_TOKENS, padding_fraction, token_budget_batches

log = logging.getLogger(__name__)

# The plan cuts at least this many batches (2 per shard beyond 32 shards), so that every shard gets work and the
# shards' costs even out on a small corpus too, without making the batches depend on the shard count.
MIN_BATCHES = 64


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


def plan_batches(lengths: np.ndarray, n_shards: int, batch_tokens: int = BATCH_TOKENS) -> list[np.ndarray]:
    """The corpus's forward batches (sentence indices, longest first), planned once over all its sentences.

    Sentences sorted by token length are cut into batches of at most
    budget = min(``batch_tokens``, ⌈Σ lengths / B⌉) padded tokens (rows × longest) and
    ⌈n / B⌉ sentences, B = max(:data:`MIN_BATCHES`, 2 · ``n_shards``): so at least
    min(n, B/2) batches, and on a corpus of more than B · ``batch_tokens`` tokens the
    token budget alone decides. The batches depend on the lengths and ``batch_tokens``,
    and on ``n_shards`` only beyond B/2 = 32 shards.
    """
    lengths = np.asarray(lengths)
    if not len(lengths):
        return []
    most = max(MIN_BATCHES, 2 * n_shards)
    budget = max(1, min(batch_tokens, math.ceil(int(lengths.sum()) / most)))
    return token_budget_batches(lengths, budget, max_rows=math.ceil(len(lengths) / most))


def deal_batches(lengths: np.ndarray, batches: list[np.ndarray], n_shards: int) -> np.ndarray:
    """The shard of each batch, by its padded tokens (rows × longest; :func:`assign_shards`)."""
    cost = np.array([len(rows) * int(lengths[rows].max()) for rows in batches], dtype=np.int64)
    return assign_shards(cost, n_shards)


def write_shards(sentences_path, shard_paths: list, tokenizer, batch_tokens: int = BATCH_TOKENS) -> dict:
    """Split the sentences into ``len(shard_paths)`` files of near-equal forward cost for one model's tokenizer.

    Every sentence is tokenized as extraction does; :func:`plan_batches` plans the batches
    over the whole corpus and :func:`deal_batches` deals whole batches to shards. Shard i goes
    to ``shard_paths[i]``, its sentences in sample order, with the batch of each in a
    ``chunk`` column: extraction batches within a chunk only, so every sentence meets the
    same batch-mates, and gets bitwise the same float32 hidden states, whatever the number of
    shards. Each sentence's token ids go with it (``ids``, boundary tokens included), and the
    tokenizer's identity in the metadata (``tokenizer``: :func:`ctxvar.models.tokens.tokenizer_identity`):
    an extraction job with the same tokenizer takes them and tokenizes nothing
    (:func:`ctxvar.extraction.shard.read_shard`).
    Returns the plan's summary (also logged and stored in each shard's metadata).
    """
    from ctxvar.models.hashing import tokenizer_sha256
    from ctxvar.models.tokens import encode, tokenizer_identity

    table = read_table(sentences_path)
    n_shards = len(shard_paths)
    encoded = encode(tokenizer, table.column("text").to_pylist())
    lengths = encoded.lengths
    batches = plan_batches(lengths, n_shards, batch_tokens)
    shard_of_batch = deal_batches(lengths, batches, n_shards)
    chunk = np.empty(len(lengths), dtype=np.int64)
    for number, rows in enumerate(batches):
        chunk[rows] = number
    padded = np.bincount(
        shard_of_batch, weights=[len(rows) * int(lengths[rows].max()) for rows in batches], minlength=n_shards
    )
    plan = {
        "n_sentences": len(lengths),
        "n_tokens": int(lengths.sum()),
        "n_batches": len(batches),
        "padding_fraction": padding_fraction(lengths, batches),
        "shard_padded_tokens": padded.astype(int).tolist(),
    }
    log.info("plan: %s", plan)
    warning = fewer_sentences_warning(len(lengths), n_shards)
    if warning:
        log.warning("%s", warning)
    table = table.append_column("chunk", pa.array(chunk)).append_column("ids", token_lists(encoded))
    shard_of_sentence = shard_of_batch[chunk] if len(chunk) else chunk
    identity = tokenizer_identity(tokenizer, tokenizer_sha256(tokenizer))
    for index, path in enumerate(shard_paths):
        write_table(
            table.filter(pa.array(shard_of_sentence == index)),
            path,
            metadata={"shard": index, "n_shards": n_shards, "plan": plan, "tokenizer": identity},
        )
    return plan


def token_lists(encoded) -> pa.Array:
    """Each sentence's ids of an :class:`ctxvar.models.tokens.EncodedShard` as one list per row (int32 ids where
    every id fits; 64-bit offsets: a corpus may hold more than 2³¹ tokens)."""
    kind = pa.int32() if not len(encoded.ids) or int(encoded.ids.max()) < 2**31 else pa.int64()
    return pa.LargeListArray.from_arrays(pa.array(encoded.offsets, pa.int64()), pa.array(encoded.ids, kind))


def split_corpus(sentences_path, shard_paths: list, entry: dict, source: str, batch_tokens: int = BATCH_TOKENS):
    """:func:`write_shards` with the tokenizer of model ``entry`` from ``source`` (checked against its manifest)."""
    from ctxvar.models import loading

    if os.path.isdir(source):
        verify_manifest(source, built_in_run(entry))  # locally built models carry one
    return write_shards(sentences_path, shard_paths, loading.load_tokenizer(entry, source), batch_tokens)


def fewer_sentences_warning(n_sentences: int | None, n_shards: int, at_most: bool = False) -> str | None:
    """What happens to the shards when the corpus has fewer sentences than shards (at most ``n_sentences``
    with ``at_most``), or None; None also when the count is unknown or 0 (sampling stops with its own line)."""
    if not n_sentences or n_sentences >= n_shards:
        return None
    count, empty = (f"at most {n_sentences}", "at least ") if at_most else (str(n_sentences), "")
    return (
        f"shards: the corpus has {count} sentence(s), fewer than shards: {n_shards}, so {empty}"
        f"{n_shards - n_sentences} shard(s) get none and their extraction jobs write empty sums; "
        f"set shards: {max(n_sentences, 1)} to skip those jobs"
    )


def known_sentence_count(corpus: dict, sentences_path, enough: int) -> tuple[int, bool] | None:
    """``(count, exact)`` of the corpus's sentences where known before any job runs: the sampled file's rows if
    it exists (exact), else an upper bound from the source (:func:`ctxvar.corpus.sources.source_rows_at_most`,
    reading at most until the bound reaches ``enough``); None when neither is known."""
    if os.path.exists(sentences_path):
        try:
            return ParquetInput(sentences_path).num_rows, True
        except CtxvarError:
            return None  # the jobs that read it report it
    bound = source_rows_at_most(corpus, enough)
    return (bound, False) if bound is not None else None


def start_up_warning(corpus: dict, sentences_path, n_shards: int) -> str | None:
    """:func:`fewer_sentences_warning` from what is known before any job runs (:func:`known_sentence_count`)."""
    known = known_sentence_count(corpus, sentences_path, n_shards)
    return fewer_sentences_warning(known[0], n_shards, at_most=not known[1]) if known else None
