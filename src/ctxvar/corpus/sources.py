"""Read a corpus from its source: a Hub dataset, local files, the synthetic corpus or the Python documentation.

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

from ctxvar.config import corpus_paths
from ctxvar.corpus import python_docs
from ctxvar.errors import CorpusError, first_line
from ctxvar.models import hub

log = logging.getLogger(__name__)

# Byte-order marks, longest first (UTF-32 LE begins like UTF-16 LE), and the codec that reads past each.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "UTF-32 LE", "utf-32"),
    (codecs.BOM_UTF32_BE, "UTF-32 BE", "utf-32"),
    (codecs.BOM_UTF8, "UTF-8", "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "UTF-16 LE", "utf-16"),
    (codecs.BOM_UTF16_BE, "UTF-16 BE", "utf-16"),
)
LOCAL_BUILDERS = {"text": "text", "parquet": "parquet", "jsonl": "json"}
JSON_TYPE_NAMES = {int: "a number", float: "a number", bool: "true or false", list: "a list", dict: "an object"}
ROWS_READ_LIMIT = 1 << 26  # characters source_rows_at_most reads at start-up before it gives up (64 M)


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


def hub_commit(corpus: dict) -> str | None:
    """The Hub dataset's commit resolved at start-up (``inputs.commit``, see :mod:`ctxvar.inputs`), if any."""
    return (corpus.get("inputs") or {}).get("commit")
