"""Sample a corpus as the paper does, filter it by sentence length, and write the sentences and their counts.

The corpus is read from its source by :mod:`ctxvar.corpus.sources`.
"""

from __future__ import annotations

import logging
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ctxvar.config.checks import rows_conflict
from ctxvar.config.hashes import CORPUS_HASH, corpus_hash
from ctxvar.corpus import python_docs
from ctxvar.corpus.sources import load_source
from ctxvar.errors import CorpusError
from ctxvar.files.atomic import write_json
from ctxvar.files.parquet import write_table

log = logging.getLogger(__name__)

REPLACEMENT_CHARACTER = "\ufffd"
BYTE_ORDER_MARK = "\ufeff"
CONTROL_CHARACTERS = r"[\x00-\x08\x0A-\x1F]"  # C0 controls except tab (RE2 syntax)
# Pieces cut from a running text (source enwik8) keep their line feeds, which are part of what is embedded; a
# U+FFFD in them is the text's own, since its bytes are decoded strictly (ctxvar.corpus.enwik8).
PIECE_SOURCES = ("enwik8",)
PIECE_CONTROL_CHARACTERS = r"[\x00-\x08\x0B-\x1F]"  # C0 controls except tab and line feed

SAMPLING_MODES = ("paper", "python-random", "hash")  # corpus.sampling

SENTENCES_SCHEMA = pa.schema([("sentence_id", pa.int64()), ("text", pa.string()), ("n_words", pa.int32())])


def sample_indices(n_rows: int, fraction: float, seed: int, mode: str, rows: int | None = None) -> np.ndarray:
    """Row indices of the sample: ``rows`` of them, or ``int(fraction·n)`` when ``rows`` is None.

    ``paper``: ``numpy.random.seed(seed); numpy.random.choice(n, k, replace=False)``, the legacy global
    RandomState, in the order drawn (reproduces the paper's sample).
    ``python-random``: ``random.seed(seed); random.sample(range(n), k)`` with Python's own ``random`` (a private
    ``random.Random(seed)``, which draws what the seeded global one draws), in the order drawn (reproduces
    Razzhigaev et al.'s 128 pieces of enwik8 with ``rows`` 128 and ``seed`` 0).
    ``hash``: rows whose SplitMix64 hash of (seed, row) falls below ``fraction``, in row order; streaming-friendly
    and stable when rows are appended. It keeps rows by a threshold, so it cannot draw ``rows`` of them.

    ``rows`` above ``n_rows`` is a :class:`CorpusError`, never a smaller sample, and so are ``rows`` with a
    ``fraction`` other than 1.0 or with ``hash`` (:func:`~ctxvar.config.checks.rows_conflict`).
    """
    if mode not in SAMPLING_MODES:
        raise CorpusError(f"corpus.sampling: unknown mode {mode!r}; use one of {', '.join(SAMPLING_MODES)}")
    if conflict := rows_conflict(rows, fraction, mode):
        raise CorpusError(conflict)
    if rows is not None and rows > n_rows:
        raise CorpusError(
            f"corpus.rows: {rows} rows asked of a source of {n_rows} rows; set corpus.rows to at most {n_rows}, "
            "or use a larger corpus"
        )
    k = int(fraction * n_rows) if rows is None else rows
    if mode == "paper":
        return np.random.RandomState(seed).choice(n_rows, k, replace=False)
    if mode == "python-random":
        return np.array(random.Random(seed).sample(range(n_rows), k), dtype=np.int64)
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps by design
        keys = _splitmix64(np.arange(n_rows, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15))
    return np.flatnonzero(keys < np.uint64(min(fraction, 1.0) * 2.0**64 - 1))


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def word_counts(texts: pa.Array) -> np.ndarray:
    """``len(text.split(' '))`` for every text, vectorised (punctuation counts as words)."""
    return pc.list_value_length(pc.split_pattern(texts, " ")).to_numpy(zero_copy_only=False)


def sample_sentences(corpus: dict, folder=None) -> tuple[pa.Table, dict]:
    """The sampled, filtered sentences and counts of what each step kept (a local corpus is read through a
    private copy in ``folder``, :func:`~ctxvar.corpus.sources.load_source`).

    Order of operations as in the paper: sample rows, then keep sentences with at
    most ``max_words`` space-separated words. U+FEFF (a byte-order mark, or a
    zero-width no-break space) is removed from every sentence, so it never becomes
    part of a type; rows that had it are counted. Empty or whitespace-only rows, rows
    with bytes that are not UTF-8 (decoded as U+FFFD) and rows with C0 control
    characters other than tab (NUL, for one) are dropped and counted; enwik8's pieces
    keep their line feeds and any U+FFFD (:data:`PIECE_SOURCES`). No sentence
    left is a :class:`CorpusError` that says what was dropped. Sentences that repeat an earlier kept one verbatim
    are kept, as the paper keeps BookCorpus's, and counted (``repeated_sentences``): an encoder gives every copy
    the same hidden states, so a type seen only in copies of one sentence has V = 0 exactly.
    """
    with load_source(corpus, folder) as dataset:
        indices = sample_indices(
            len(dataset), corpus["fraction"], corpus["seed"], corpus["sampling"], corpus.get("rows")
        )
        texts = text_column(dataset, corpus["text_column"]).take(pa.array(indices, type=pa.int64())).combine_chunks()
        rows_in_source = len(dataset)
    texts = texts.cast(pa.string())
    had_mark = _matches(texts, BYTE_ORDER_MARK)
    texts = pc.replace_substring(texts, BYTE_ORDER_MARK, "")
    n_words = word_counts(texts)
    blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(texts), ""), True).to_numpy(zero_copy_only=False)
    pieces = corpus["source"] in PIECE_SOURCES
    invalid = (np.zeros(len(texts), bool) if pieces else _matches(texts, REPLACEMENT_CHARACTER)) & ~blank
    controls = PIECE_CONTROL_CHARACTERS if pieces else CONTROL_CHARACTERS
    control = pc.fill_null(pc.match_substring_regex(texts, controls), False).to_numpy(zero_copy_only=False)
    control &= ~blank & ~invalid
    too_long = (n_words > corpus["max_words"]) & ~blank & ~invalid & ~control
    keep = ~(blank | invalid | control | too_long)
    table = pa.table(
        {
            "sentence_id": pa.array(np.asarray(indices, dtype=np.int64)[keep]),
            "text": texts.filter(pa.array(keep)),
            "n_words": pa.array(n_words[keep].astype(np.int32)),
        },
        schema=SENTENCES_SCHEMA,
    )
    counts = {
        "rows_in_source": rows_in_source,
        "rows_sampled": len(indices),
        "dropped_blank": int(blank.sum()),
        "dropped_invalid_utf8": int(invalid.sum()),
        "dropped_control_characters": int(control.sum()),
        "dropped_too_long": int(too_long.sum()),
        "removed_byte_order_mark": int(had_mark.sum()),
        "sentences": table.num_rows,
        "repeated_sentences": table.num_rows - pc.count_distinct(table["text"]).as_py(),
    }
    log.info("corpus: %s", counts)
    if not table.num_rows:
        dropped = ", ".join(
            f"{value} {key[len('dropped_') :].replace('_', ' ')}"
            for key, value in counts.items()
            if key.startswith("dropped_") and value
        )
        raise CorpusError(
            f"corpus: no sentence kept of {len(indices)} sampled rows ({dropped or 'the source is empty'}); "
            "check corpus.path, its encoding (UTF-8, or a byte-order mark), corpus.fraction and corpus.max_words"
        )
    return table, counts


def text_column(dataset, column: str) -> pa.ChunkedArray:
    """The memory-mapped Arrow column ``column`` of ``dataset`` in row order. Only a dataset with an indices
    mapping (none that :func:`~ctxvar.corpus.sources.load_source` yields has one) is flattened first, which writes
    a whole copy of its table: for a local corpus a third copy of its text beside the run's outputs."""
    if dataset._indices is not None:
        dataset = dataset.flatten_indices()
    return dataset.data.column(column)


def _matches(texts: pa.Array, substring: str) -> np.ndarray:
    return pc.fill_null(pc.match_substring(texts, substring), False).to_numpy(zero_copy_only=False)


def write_sentences(corpus: dict, sentences_path, counts_path) -> dict:
    """Sample the corpus once and write the sentences (Parquet) and the step counts (JSON), with the text's
    provenance for the Python-docs source (its Python version decides the text), what identified the corpus's
    files at start-up (``inputs``, which the files read are checked against) and the sample's identity
    (``corpus_hash``, :func:`ctxvar.config.hashes.corpus_hash`). Local files are copied beside the outputs to be
    read, and the copies removed."""
    table, counts = sample_sentences(corpus, os.path.dirname(os.path.abspath(sentences_path)))
    counts = {**counts, CORPUS_HASH: corpus_hash(corpus)}
    if corpus["source"] == "python-docs":
        counts = {**counts, "text": python_docs.provenance()}
    if corpus.get("inputs"):
        counts = {**counts, "inputs": corpus["inputs"]}
    write_table(table, sentences_path)
    write_json(counts, counts_path)
    return counts
