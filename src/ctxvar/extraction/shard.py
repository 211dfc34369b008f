"""A shard for one model: its sentences read, fitted to the model's positions (``tokens.long_sentences``) and
dealt into token-budget batches that never mix chunks."""

from __future__ import annotations

import logging

import numpy as np

from ctxvar.errors import CorpusError
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.files.atomic import REMEDY
from ctxvar.files.parquet import ParquetInput
from ctxvar.models.batching import token_budget_batches
from ctxvar.models.hashing import tokenizer_sha256
from ctxvar.models.tokens import EncodedShard, encode, select, split_long

log = logging.getLogger(__name__)


def read_shard(path, tokenizer) -> tuple[EncodedShard, np.ndarray, np.ndarray]:
    """The shard's sentences as token ids, their chunk numbers and sentence ids. The ids are those the shard holds
    (``ids``, written by :func:`ctxvar.corpus.shards.write_shards`) when it names ``tokenizer``'s SHA-256 as the
    tokenizer that made them; else (a shard of another tokenizer, of an older ctxvar, or made by hand) its texts
    tokenized here (:func:`ctxvar.models.tokens.encode`), the log saying why."""
    shard = ParquetInput(path)
    table = shard.read(["chunk", "sentence_id"])
    chunk, sentence_id = table.column("chunk").to_numpy(), table.column("sentence_id").to_numpy()
    made_by = shard.metadata.get("tokenizer_sha256") if "ids" in shard.schema.names else None
    if made_by is not None and made_by == tokenizer_sha256(tokenizer):
        ids = shard.read(["ids"]).column("ids").combine_chunks()
        encoded = EncodedShard(ids=ids.values.to_numpy().astype(np.int64), offsets=ids.offsets.to_numpy())
        if len(encoded.offsets) == len(chunk) + 1:
            return encoded, chunk, sentence_id
        raise CorpusError(f"{path}: {len(chunk)} sentences but {len(encoded.offsets) - 1} rows of ids; {REMEDY}")
    log.info(
        "%s: %s; tokenizing its sentences here",
        path,
        "holds no token ids" if made_by is None else "holds the token ids of another tokenizer",
    )
    texts = shard.read(["text"]).column("text").to_pylist()
    return encode(tokenizer, texts), chunk, sentence_id


def chunk_batches(lengths: np.ndarray, chunk: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Token-budget batches of sequence indices, never mixing chunks (see corpus.write_shards)."""
    batches = []
    for number in np.unique(chunk):
        members = np.flatnonzero(chunk == number)
        batches += [members[b] for b in token_budget_batches(lengths[members], batch_tokens)]
    return batches


def fit_to_positions(encoded: EncodedShard, limit: int | None, settings: ExtractionSettings):
    """Apply ``tokens.long_sentences`` to sentences longer than the model's positions; never truncate.

    Returns ``(encoded, source_row, counts)``: the sequences to run, the sentence
    each comes from, and how many sentences were skipped or split.
    """
    lengths = encoded.lengths
    too_long = lengths > limit if limit else np.zeros(len(lengths), dtype=bool)
    counts = {"n_skipped_too_long": 0, "n_split_too_long": 0}
    if not too_long.any():
        return encoded, np.arange(len(lengths)), counts
    message = (
        f"{int(too_long.sum())} sentence(s) exceed the {limit} positions of model {settings.model['id']!r} "
        f"(longest {int(lengths.max())} tokens)"
    )
    if settings.long_sentences == "error":
        raise CorpusError(f"{message}; lower corpus.max_words or set tokens.long_sentences: skip or split")
    log.warning(
        "%s: %s", message, "splitting them into windows" if settings.long_sentences == "split" else "skipping them"
    )
    if settings.long_sentences == "split":
        counts["n_split_too_long"] = int(too_long.sum())
        return (*split_long(encoded, limit), counts)
    counts["n_skipped_too_long"] = int(too_long.sum())
    keep = np.flatnonzero(~too_long)
    return select(encoded, keep), keep, counts
