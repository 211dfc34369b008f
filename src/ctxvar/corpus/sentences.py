"""Load a corpus, sample it as the paper does, and filter by sentence length.

Every source goes through ``datasets``: Hub datasets with ``load_dataset(name)``,
local files with the ``text``/``parquet``/``json`` builders, and the synthetic corpus
and the Python documentation's prose (:mod:`ctxvar.corpus.python_docs`) with ``Dataset.from_dict``.
The HF cache and ``HF_HUB_OFFLINE`` apply as usual.
"""

from __future__ import annotations

import codecs
import contextlib
import glob
import json
import logging
import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ctxvar.config import corpus_paths
from ctxvar.config_hash import CORPUS_HASH, corpus_hash
from ctxvar.corpus import python_docs
from ctxvar.errors import CorpusError, first_line
from ctxvar.io import write_json
from ctxvar.models import hub
from ctxvar.parquet_files import write_table

log = logging.getLogger(__name__)

REPLACEMENT_CHARACTER = "\ufffd"
BYTE_ORDER_MARK = "\ufeff"
CONTROL_CHARACTERS = r"[\x00-\x08\x0A-\x1F]"  # C0 controls except tab (RE2 syntax)
# Byte-order marks, longest first (UTF-32 LE begins like UTF-16 LE), and the codec that reads past each.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "UTF-32 LE", "utf-32"),
    (codecs.BOM_UTF32_BE, "UTF-32 BE", "utf-32"),
    (codecs.BOM_UTF8, "UTF-8", "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "UTF-16 LE", "utf-16"),
    (codecs.BOM_UTF16_BE, "UTF-16 BE", "utf-16"),
)
LOCAL_BUILDERS = {"text": "text", "parquet": "parquet", "jsonl": "json"}

SENTENCES_SCHEMA = pa.schema([("sentence_id", pa.int64()), ("text", pa.string()), ("n_words", pa.int32())])


def load_source(corpus: dict):
    """The whole corpus as a ``datasets.Dataset`` with the text in ``corpus.text_column``."""
    import datasets

    source = corpus["source"]
    if source == "synthetic":
        return datasets.Dataset.from_dict(
            {corpus["text_column"]: synthetic_sentences(corpus["synthetic"], corpus["seed"])}
        )
    if source == "python-docs":
        return datasets.Dataset.from_dict({corpus["text_column"]: list(python_docs.python_docs_sentences())})
    if source == "hf" and not hub.offline() and not hub.hub_reachable():  # else datasets retries for minutes
        raise CorpusError(
            f"corpus: dataset {corpus['name']!r} cannot be loaded: the Hugging Face Hub cannot be reached; "
            "set HF_HUB_OFFLINE=1 to use the HF cache, or use a local file (corpus.source: text) or config/demo.yaml"
        )
    try:
        if source == "hf":
            dataset = datasets.load_dataset(
                corpus["name"], corpus.get("config_name"), split=corpus["split"], revision=hub_commit(corpus)
            )
        elif all(os.path.getsize(path) == 0 for path in corpus_paths(corpus)):
            return datasets.Dataset.from_dict(
                {corpus["text_column"]: []},
                features=datasets.Features({corpus["text_column"]: datasets.Value("string")}),
            )
        elif source == "parquet":
            dataset = datasets.load_dataset("parquet", data_files=literal_files(corpus_paths(corpus)), split="train")
        else:
            with as_utf8(corpus_paths(corpus)) as paths:
                # Undecodable bytes become U+FFFD; sample_sentences drops and counts such rows.
                dataset = datasets.load_dataset(
                    LOCAL_BUILDERS[source], data_files=literal_files(paths), split="train", encoding_errors="replace"
                )
    except CorpusError:
        raise
    except Exception as error:  # datasets raises many types; all mean "cannot load"
        if source == "jsonl" and (bad_line := first_bad_json_line(corpus_paths(corpus))):
            raise CorpusError(bad_line) from error
        cause = f"{type(error).__name__}: {first_line(error)}"
        if source != "hf":
            raise CorpusError(
                f"corpus: cannot read {corpus_paths(corpus)!r} as {source} ({cause}); check the files against "
                "corpus.source (text: one sentence per line; parquet; jsonl: one JSON object per line)"
            ) from error
        raise CorpusError(
            f"corpus: cannot load {corpus['name']!r} ({cause}); "
            "if the Hub is unreachable, use a cached dataset, a local file (corpus.source: text) or config/demo.yaml"
        ) from error
    if corpus["text_column"] not in dataset.column_names:
        raise CorpusError(
            f"corpus.text_column: column {corpus['text_column']!r} not found; available: {dataset.column_names}"
        )
    return dataset


def literal_files(paths: list[str]) -> list[str]:
    """``paths`` as ``datasets`` data_files that match those files only: it reads data_files as glob patterns,
    so ``corpus [v2].txt`` would otherwise read ``corpus v.txt``."""
    return [glob.escape(path) for path in paths]


def first_bad_json_line(paths: list[str]) -> str | None:
    """Where the first line of the JSON Lines files ``paths`` that is not one JSON object is, and why; None if
    every non-blank line is one."""
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as error:
                    reason = getattr(error, "msg", error)
                    return (
                        f"corpus.path: {path} line {number} is not JSON ({reason}); each line must be one JSON object"
                    )
                if not isinstance(row, dict):
                    return (
                        f"corpus.path: {path} line {number} is a JSON {type(row).__name__}, not an object; each line "
                        'must be one JSON object such as {"text": "…"}'
                    )
    return None


JSON_TYPE_NAMES = {int: "a number", float: "a number", bool: "true or false", list: "a list", dict: "an object"}


def first_non_text_json_line(paths: list[str], column: str) -> str | None:
    """Where the first row of the JSON Lines files ``paths`` whose ``column`` holds something other than a string
    (or null) is, and what it holds; None if there is none (``datasets`` reads a column of mixed kinds as JSON)."""
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    value = json.loads(line).get(column) if line.strip() else None
                except (ValueError, AttributeError):
                    continue
                if value is not None and not isinstance(value, str):
                    return (
                        f"corpus.path: {path} line {number}: {column!r} is {JSON_TYPE_NAMES[type(value)]} "
                        f"({json.dumps(value)[:40]}), not text; each row's {column} must be a string"
                    )
    return None


ROWS_READ_LIMIT = 1 << 26  # characters source_rows_at_most reads at start-up before it gives up (64 M)


def source_rows_at_most(corpus: dict, enough: int) -> int | None:
    """An upper bound on the sentences the corpus keeps, known before any job runs: of R rows in the source,
    sampling keeps ⌊fraction · R⌋ (``paper``) or at most R (``hash``). R of the synthetic corpus is its size, of
    local Parquet files their row count, of text and jsonl files their lines (as ``str.splitlines`` counts them,
    what ``datasets`` makes rows of), read only until the bound reaches ``enough``, which it then returns.
    None for Hub datasets and the Python documentation, files that cannot be read, and text beyond
    :data:`ROWS_READ_LIMIT`."""
    source = corpus["source"]

    def kept(rows: int) -> int:
        return int(corpus["fraction"] * rows) if corpus["sampling"] == "paper" else rows

    if source == "synthetic":
        return kept(corpus["synthetic"]["n_sentences"])
    if source not in LOCAL_BUILDERS:
        return None
    rows = 0
    try:
        for path in corpus_paths(corpus):
            if source == "parquet":
                import pyarrow.parquet as pq

                rows += pq.ParquetFile(path).metadata.num_rows
                continue
            with open(path, encoding=text_encoding(path)[1], errors="replace", newline="") as handle:
                read = 0
                while block := handle.read(1 << 20):  # a line cut between blocks counts twice: still a bound
                    rows += len(block.splitlines())
                    read += len(block)
                    if kept(rows) >= enough:
                        return kept(rows)
                    if read > ROWS_READ_LIMIT:
                        return None
    except (OSError, ValueError, CorpusError):
        return None  # sample_corpus reports it
    return kept(rows)


def text_encoding(path) -> tuple[str, str]:
    """``(name, codec)`` of a text file from its byte-order mark; UTF-8 without one.

    Raises :class:`CorpusError` for text that looks like UTF-16 without a byte-order
    mark (NUL bytes at every second position; UTF-32 without one has them too and is
    refused the same way), which UTF-8 decoding would turn into sentences full of NULs.
    """
    with open(path, "rb") as handle:
        head = handle.read(4096)
    for mark, name, codec in BYTE_ORDER_MARKS:
        if head.startswith(mark):
            return name, codec
    even, odd = head[0::2], head[1::2]
    for width, share in (("UTF-16 LE", odd), ("UTF-16 BE", even)):
        if len(head) >= 8 and share.count(0) > 0.9 * len(share):
            raise CorpusError(
                f"corpus.path: {path} looks like {width} text without a byte-order mark (NUL bytes at every "
                "second position); save it as UTF-8, or as UTF-16 with a byte-order mark"
            )
    return "UTF-8", "utf-8"


@contextlib.contextmanager
def as_utf8(paths: list[str]):
    """Yield ``paths`` with every UTF-16 or UTF-32 file (by its byte-order mark) transcoded to a temporary
    UTF-8 copy; UTF-8 files are read as they are (a UTF-8 mark becomes U+FEFF, removed with every other)."""
    with tempfile.TemporaryDirectory(prefix="ctxvar-corpus-") as folder:
        readable = []
        for index, path in enumerate(paths):
            name, codec = text_encoding(path)
            if codec in ("utf-8", "utf-8-sig"):
                readable.append(path)
                continue
            log.info("corpus: %s is %s (byte-order mark); read as such", path, name)
            copy = os.path.join(folder, f"{index}-{os.path.basename(path)}")
            with (
                open(path, encoding=codec, errors="replace", newline="") as reader,
                open(copy, "w", encoding="utf-8", newline="") as writer,
            ):
                shutil.copyfileobj(reader, writer, 1 << 20)
            readable.append(copy)
        yield readable


def synthetic_sentences(spec: dict, seed: int) -> list[str]:
    """A Zipf-distributed corpus of pseudo-words, deterministic in ``seed``.

    Word ranks follow p(r) ∝ r^(−zipf_exponent) over ``vocab_size`` words; sentence
    lengths are log-normal so that some exceed the usual word limit; a few
    punctuation marks are ordinary words, as in BookCorpus's pre-split text.
    """
    rng = np.random.default_rng(seed)
    vocab = _pseudo_words(rng, spec["vocab_size"])
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    probs = ranks ** -spec["zipf_exponent"]
    probs /= probs.sum()
    lengths = np.clip(
        rng.lognormal(np.log(spec["mean_words"]), 0.6, spec["n_sentences"]).astype(int), 1, 8 * spec["mean_words"]
    )
    words = vocab[rng.choice(len(vocab), size=int(lengths.sum()), p=probs)]
    ends = np.cumsum(lengths)
    return [" ".join(chunk) for chunk in np.split(words, ends[:-1])]


def _pseudo_words(rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` distinct lowercase strings; the most frequent ranks are short, like real words."""
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    punctuation = np.array([".", ",", "'", "!", "?"])
    seen, words = set(punctuation), list(punctuation)
    while len(words) < size:
        length = 1 + min(rng.geometric(0.25), 11) + len(words) // max(size // 4, 1)
        word = "".join(rng.choice(letters, size=length))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return np.array(words[:size], dtype=object)


def sample_indices(n_rows: int, fraction: float, seed: int, mode: str) -> np.ndarray:
    """Row indices of the sample.

    ``paper``: ``numpy.random.seed(seed); numpy.random.choice(n, int(fraction·n), replace=False)``,
    the legacy global RandomState, in the order drawn (reproduces the paper's sample).
    ``hash``: rows whose SplitMix64 hash of (seed, row) falls below ``fraction``, in row
    order; streaming-friendly and stable when rows are appended.
    """
    if mode == "paper":
        return np.random.RandomState(seed).choice(n_rows, int(fraction * n_rows), replace=False)
    if mode == "hash":
        with np.errstate(over="ignore"):  # uint64 arithmetic wraps by design
            keys = _splitmix64(np.arange(n_rows, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15))
        return np.flatnonzero(keys < np.uint64(min(fraction, 1.0) * 2.0**64 - 1))
    raise CorpusError(f"corpus.sampling: unknown mode {mode!r}; use 'paper' or 'hash'")


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def word_counts(texts: pa.Array) -> np.ndarray:
    """``len(text.split(' '))`` for every text, vectorised (punctuation counts as words)."""
    return pc.list_value_length(pc.split_pattern(texts, " ")).to_numpy(zero_copy_only=False)


def sample_sentences(corpus: dict) -> tuple[pa.Table, dict]:
    """The sampled, filtered sentences and counts of what each step kept.

    Order of operations as in the paper: sample rows, then keep sentences with at
    most ``max_words`` space-separated words. U+FEFF (a byte-order mark, or a
    zero-width no-break space) is removed from every sentence, so it never becomes
    part of a type; rows that had it are counted. Empty or whitespace-only rows, rows
    with bytes that are not UTF-8 (decoded as U+FFFD) and rows with C0 control
    characters other than tab (NUL, for one) are dropped and counted. No sentence
    left is a :class:`CorpusError` that says what was dropped.
    """
    dataset = load_source(corpus)
    indices = sample_indices(len(dataset), corpus["fraction"], corpus["seed"], corpus["sampling"])
    column = dataset.flatten_indices().data.column(corpus["text_column"])  # memory-mapped Arrow
    texts = column.take(pa.array(indices, type=pa.int64())).combine_chunks()
    if not pa.types.is_string(texts.type) and not pa.types.is_large_string(texts.type):
        if corpus["source"] == "jsonl" and (
            line := first_non_text_json_line(corpus_paths(corpus), corpus["text_column"])
        ):
            raise CorpusError(line)
        raise CorpusError(f"corpus.text_column: column {corpus['text_column']!r} holds {texts.type}, not text")
    texts = texts.cast(pa.string())
    had_mark = _matches(texts, BYTE_ORDER_MARK)
    texts = pc.replace_substring(texts, BYTE_ORDER_MARK, "")
    n_words = word_counts(texts)
    blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(texts), ""), True).to_numpy(zero_copy_only=False)
    invalid = _matches(texts, REPLACEMENT_CHARACTER) & ~blank
    control = pc.fill_null(pc.match_substring_regex(texts, CONTROL_CHARACTERS), False).to_numpy(zero_copy_only=False)
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
        "rows_in_source": len(dataset),
        "rows_sampled": len(indices),
        "dropped_blank": int(blank.sum()),
        "dropped_invalid_utf8": int(invalid.sum()),
        "dropped_control_characters": int(control.sum()),
        "dropped_too_long": int(too_long.sum()),
        "removed_byte_order_mark": int(had_mark.sum()),
        "sentences": table.num_rows,
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


def _matches(texts: pa.Array, substring: str) -> np.ndarray:
    return pc.fill_null(pc.match_substring(texts, substring), False).to_numpy(zero_copy_only=False)


def hub_commit(corpus: dict) -> str | None:
    """The Hub dataset's commit resolved at start-up (``inputs.commit``, see :mod:`ctxvar.inputs`), if any."""
    return (corpus.get("inputs") or {}).get("commit")


def write_sentences(corpus: dict, sentences_path, counts_path) -> dict:
    """Sample the corpus once and write the sentences (Parquet) and the step counts (JSON), with the text's
    provenance for the Python-docs source (its Python version decides the text), what identified the corpus's
    files at start-up (``inputs``) and the sample's identity (``corpus_hash``,
    :func:`ctxvar.config_hash.corpus_hash`)."""
    table, counts = sample_sentences(corpus)
    counts = {**counts, CORPUS_HASH: corpus_hash(corpus)}
    if corpus["source"] == "python-docs":
        counts = {**counts, "text": python_docs.provenance()}
    if corpus.get("inputs"):
        counts = {**counts, "inputs": corpus["inputs"]}
    write_table(table, sentences_path)
    write_json(counts, counts_path)
    return counts
