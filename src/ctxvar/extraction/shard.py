"""A shard for one model: its sentences read, fitted to the model's positions (``tokens.long_sentences``) and
dealt into token-budget batches that never mix chunks."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from ctxvar.errors import CorpusError
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.files.atomic import REMEDY
from ctxvar.files.parquet import ParquetInput
from ctxvar.models.batching import token_budget_batches
from ctxvar.models.hashing import tokenizer_sha256
from ctxvar.models.tokens import EncodedShard, boundary_tokens, encode, select, split_long, tokenizer_identity

log = logging.getLogger(__name__)


def read_shard(path, tokenizer, tokenizer_digest: str | None = None) -> tuple[EncodedShard, np.ndarray, np.ndarray]:
    """The shard's sentences as token ids, their chunk numbers and sentence ids. The ids are those the shard holds
    (``ids``, written by :func:`ctxvar.corpus.shards.write_shards`) when it names ``tokenizer``'s identity
    (:func:`ctxvar.models.tokens.tokenizer_identity`) as that of the tokenizer that made them; else (a shard of
    another tokenizer or library version, of an older ctxvar, or made by hand) its texts tokenized here
    (:func:`ctxvar.models.tokens.encode`), the log saying why. ``tokenizer_digest``: the tokenizer's SHA-256,
    where the caller has it (:func:`ctxvar.models.hashing.tokenizer_sha256`). Stored ids that are not what
    ``write_shards`` writes are a :class:`CorpusError`."""
    shard = ParquetInput(path)
    table = shard.read(["chunk", "sentence_id"])
    chunk, sentence_id = table.column("chunk").to_numpy(), table.column("sentence_id").to_numpy()
    identity = tokenizer_identity(tokenizer, tokenizer_digest or tokenizer_sha256(tokenizer))
    made_by = shard.metadata.get("tokenizer") if "ids" in shard.schema.names else None
    if made_by == identity:
        return stored_ids(path, shard.read(["ids"]).column("ids"), tokenizer), chunk, sentence_id
    log.info(
        "%s: %s; tokenizing its sentences here",
        path,
        "holds no token ids" if made_by is None else f"holds the token ids of another tokenizer ({made_by})",
    )
    texts = shard.read(["text"]).column("text").to_pylist()
    return encode(tokenizer, texts), chunk, sentence_id


def stored_ids(path, column, tokenizer) -> EncodedShard:
    """The shard's ``ids`` column as an :class:`EncodedShard`, checked to be what ``write_shards`` writes: lists of
    integer ids, none missing, each ``[bos] + … + [eos]`` of ``tokenizer`` and every id one of its own."""
    column = column.combine_chunks() if column.num_chunks else pa.array([], pa.large_list(pa.int32()))
    kind = column.type
    if not (pa.types.is_large_list(kind) or pa.types.is_list(kind)) or not pa.types.is_integer(kind.value_type):
        raise CorpusError(f"{path}: its ids column is {kind}, not lists of token ids; {REMEDY}")
    if column.null_count or column.values.null_count:
        raise CorpusError(f"{path}: its ids column has missing values; {REMEDY}")
    encoded = EncodedShard(
        ids=column.values.to_numpy().astype(np.int64), offsets=column.offsets.to_numpy().astype(np.int64)
    )
    bos, eos = boundary_tokens(tokenizer)
    starts, ends = encoded.offsets[:-1], encoded.offsets[1:] - 1
    if len(starts) and (
        (encoded.lengths < 2).any()
        or (encoded.ids[starts] != bos).any()
        or (encoded.ids[ends] != eos).any()
        or encoded.ids.min() < 0
        or encoded.ids.max() >= len(tokenizer)
    ):
        raise CorpusError(
            f"{path}: its ids are not [bos] + tokens + [eos] of the model's tokenizer (ids 0 to {len(tokenizer) - 1}); "
            f"{REMEDY}"
        )
    return encoded


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
