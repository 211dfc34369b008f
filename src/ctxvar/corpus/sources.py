"""Read a corpus from its source: a Hub dataset, local files, enwik8, the synthetic corpus or the Python
documentation.

Every source goes through ``datasets``: Hub datasets with ``load_dataset(name, revision=commit)`` (the HF cache
and ``HF_HUB_OFFLINE`` apply as usual; a dataset whose loading script ``datasets`` refuses is read from the Hub's
Parquet export of it, :func:`load_hub_dataset`), local files with the ``text``/``parquet``/``json`` builders over
private copies checked against the run's fingerprint (:func:`snapshot`; no cache is consulted or kept), and the
synthetic corpus, the Python documentation's prose (:mod:`ctxvar.corpus.python_docs`) and enwik8's pieces
(:mod:`ctxvar.corpus.enwik8`, cut from such a private copy or from its Hub dataset) with ``Dataset.from_dict``.
"""

from __future__ import annotations

import codecs
import contextlib
import glob
import io
import json
import logging
import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa

from ctxvar.config.entries import corpus_paths, local_corpus
from ctxvar.corpus import enwik8, python_docs
from ctxvar.errors import CorpusError, first_line
from ctxvar.files.space import disk_full, full_disk_named, require_free_space
from ctxvar.models import hub
from ctxvar.models.files import file_fingerprint

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
BINARY_SOURCES = ("parquet", "enwik8")  # copied byte for byte, whatever their first bytes look like
JSON_TYPE_NAMES = {int: "a number", float: "a number", bool: "true or false", list: "a list", dict: "an object"}
PRIVATE_PREFIX = ".ctxvar-corpus-"  # the sampling's private folder of copies, in the folder of its outputs
ROWS_READ_LIMIT = 1 << 26  # characters source_rows_at_most reads at start-up before it gives up (64 M)


@contextlib.contextmanager
def load_source(corpus: dict, folder=None):
    """Yield the whole corpus as a ``datasets.Dataset`` with the text in ``corpus.text_column``.

    Local files are read as they are now, never from a cache: each is copied once, through one open file, into a
    private folder made in ``folder`` (the system's temporary folder if None) (:func:`snapshot`, which checks it
    against the fingerprint taken at start-up, ``corpus.inputs.files``), and ``datasets`` builds its Arrow table
    from the copies in that folder (which then holds the copies and the table), removed when the ``with`` block
    ends. ``datasets`` keys its own cache on a file's path and modification time, so a file edited in place with
    its size and modification time kept would come back with its old text. A Hub dataset is the commit resolved
    at start-up, through the HF cache.
    """
    import datasets

    source = corpus["source"]
    if source == "synthetic":
        yield datasets.Dataset.from_dict(
            {corpus["text_column"]: synthetic_sentences(corpus["synthetic"], corpus["seed"])}
        )
    elif source == "python-docs":
        yield datasets.Dataset.from_dict({corpus["text_column"]: list(python_docs.python_docs_sentences())})
    elif source == "hf":
        yield with_text_column(corpus, load_hub_dataset(corpus), [])
    elif not local_corpus(corpus):  # enwik8 from the Hub
        yield pieces_dataset(corpus, enwik8.pieces(enwik8.hub_text(load_enwik8_hub_dataset(corpus))))
    else:
        if folder is not None:
            os.makedirs(folder, exist_ok=True)
            remove_left_copies(folder)
        # A full disk names the folder of the copies (an OSError of a write names no file: the working directory's
        # disk would be named, where results/ may be a link to another disk).
        private_folder = folder or tempfile.gettempdir()
        require_free_space(private_folder, private_copy_bytes(corpus), "the corpus's private copies and their table")
        with (
            full_disk_named(private_folder),
            tempfile.TemporaryDirectory(prefix=PRIVATE_PREFIX, dir=folder) as private,
        ):
            copies = [
                snapshot(path, os.path.join(private, f"{index}.{source}"), recorded, source)
                for index, (path, recorded) in enumerate(zip(corpus_paths(corpus), recorded_fingerprints(corpus)))
            ]
            if source == "enwik8":
                yield pieces_dataset(corpus, enwik8.read_pieces(copies[0], corpus_paths(corpus)[0]))
            else:
                cache = os.path.join(private, "cache")
                yield with_text_column(corpus, load_local_copies(corpus, copies, cache), copies)


def pieces_dataset(corpus: dict, pieces: list[str]):
    """``pieces`` as a dataset of one text column, ``corpus.text_column``, one row a piece, in order."""
    import datasets

    features = datasets.Features({corpus["text_column"]: datasets.Value("string")})
    return datasets.Dataset.from_dict({corpus["text_column"]: pieces}, features=features)


def private_copy_bytes(corpus: dict) -> int:
    """About the bytes :func:`load_source` writes for the local files of ``corpus``: each file copied, and an
    Arrow table of about its size (for Parquet, the size its metadata gives uncompressed; enwik8's pieces are held
    in memory); 0 for a file gone (the copy names it)."""
    total = 0
    for path in corpus_paths(corpus):
        try:
            size = os.path.getsize(path)
            table = parquet_bytes(path) if corpus["source"] == "parquet" else size
        except (OSError, ValueError, pa.ArrowException):
            continue
        total += size if corpus["source"] == "enwik8" else size + max(size, table)
    return total


def parquet_bytes(path) -> int:
    """The uncompressed bytes of the Parquet file ``path``'s row groups, from its metadata."""
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(path).metadata
    return sum(metadata.row_group(index).total_byte_size for index in range(metadata.num_row_groups))


def remove_left_copies(folder) -> None:
    """Remove the private folders (:func:`load_source`) that a sampling in ``folder`` killed before its end (out
    of memory, a time limit, a signal) left there, each as large as the corpus and its table; one sampling at a
    time writes in a run's folder (Snakemake's lock on its outputs)."""
    for name in os.listdir(folder):
        if name.startswith(PRIVATE_PREFIX) and os.path.isdir(os.path.join(folder, name)):
            log.info("corpus: removing %s, left by a sampling that was stopped", os.path.join(folder, name))
            shutil.rmtree(os.path.join(folder, name))


PARQUET_EXPORT = enwik8.HUB_REVISION  # the branch of the Hub's Parquet export of a dataset


def load_hub_dataset(corpus: dict):
    """The Hub dataset ``corpus.name`` at the commit resolved at start-up (:func:`hub_commit`; outside a run,
    ``corpus.revision`` as written), through the HF cache, which keeps a commit's files and the Arrow tables built
    from them under the commit's hash; of its files those under ``corpus.data_dir`` where set.

    A dataset with data files (Parquet, text, …) is read by ``datasets``' own builders, its files in the order of
    their paths. The Hub's Parquet export of a dataset (revision ``refs/convert/parquet``) holds each configuration's
    split in ``{config}/{split}/0000.parquet``, ``0001.parquet``, …, numbered in the order its rows were written,
    so that with ``data_dir`` the configuration's folder the rows come in the dataset's own order (those files alone:
    never a ``partial-{split}`` folder, where the export of a dataset over 5 GB stops short); ``datasets`` 4 and
    later read it where they refuse the dataset's loading script (:func:`script_refused`)."""
    options = {"name": corpus.get("config_name"), "split": corpus["split"]}
    if corpus.get("data_dir") and corpus.get("revision") == PARQUET_EXPORT:
        # the split's own folder: datasets' split patterns also match a partial-{split} folder, an export cut short
        options["data_files"] = {corpus["split"]: f"{corpus['data_dir']}/{corpus['split']}/*.parquet"}
    elif corpus.get("data_dir"):
        options["data_dir"] = corpus["data_dir"]
    revision = hub_commit(corpus) or corpus.get("revision")
    return hub_dataset(corpus["name"], revision, "a local file (corpus.source: text)", options)


def load_enwik8_hub_dataset(corpus: dict):
    """enwik8's text on the Hub (:mod:`ctxvar.corpus.enwik8`): the folder ``enwik8-raw`` of the dataset's Parquet
    export, at the commit resolved at start-up (else the export's branch), through the HF cache."""
    options = {"data_dir": enwik8.HUB_CONFIG, "split": "train"}
    local = "a local copy of the Hutter Prize's file (corpus.path: enwik8.zip)"
    return hub_dataset(enwik8.HUB_ID, hub_commit(corpus) or enwik8.HUB_REVISION, local, options)


def hub_dataset(name: str, revision: str | None, local: str, options: dict):
    """``datasets.load_dataset(name, revision=revision, **options)``, or a one-line :class:`CorpusError` that
    offers ``local`` (a local source) instead."""
    import datasets

    if not hub.offline() and not hub.hub_reachable():  # else datasets retries for minutes
        raise CorpusError(
            f"corpus: dataset {name!r} cannot be loaded: the Hugging Face Hub cannot be reached; "
            f"set HF_HUB_OFFLINE=1 to use the HF cache, or use {local} or config/demo.yaml"
        )
    try:
        return datasets.load_dataset(name, revision=revision, **options)
    except Exception as error:  # datasets raises many types; all mean "cannot load"
        if script_refused(error):
            raise CorpusError(script_refusal(name, error, options)) from error
        raise CorpusError(
            f"corpus: cannot load {name!r} ({type(error).__name__}: {first_line(error)}); "
            f"if the Hub is unreachable, use a cached dataset, {local} or config/demo.yaml"
        ) from error


def script_refused(error: BaseException) -> bool:
    """Whether ``error`` is ``datasets`` refusing to run a dataset's loading script: ``datasets`` 4 and later run
    none ("Dataset scripts are no longer supported, but found X.py"); 2.20 to 3.x run one only when trusted
    ("… contains custom code which must be executed …", pass ``trust_remote_code=True``)."""
    text = str(error)
    return isinstance(error, (RuntimeError, ValueError)) and (
        "scripts are no longer supported" in text or "trust_remote_code" in text
    )


def script_refusal(name: str, error: BaseException, options: dict) -> str:
    """One line: ``datasets`` refuses the loading script of the Hub dataset ``name``, why, and the route that reads
    its rows without a script, the Hub's Parquet export (:func:`load_hub_dataset`); where ``datasets`` (2.20 to 3.x)
    would run the script once trusted, also how to trust it."""
    import datasets

    folder = (
        options.get("data_dir") or options.get("name") or "the folder of its configuration (BookCorpus: plain_text)"
    )
    trust = (
        ""
        if "no longer supported" in str(error)
        else f", or let datasets {datasets.__version__} run the script: HF_DATASETS_TRUST_REMOTE_CODE=1"
    )
    return (
        f"corpus: dataset {name!r} is read by a loading script, which datasets {datasets.__version__} refuses to run "
        f"({type(error).__name__}: {first_line(error)}); read the Hub's Parquet export of it instead "
        f"(corpus.revision: {PARQUET_EXPORT}, corpus.data_dir: {folder}; docs/configuration.md, Hub datasets)"
        f"{trust}, or a local copy of its files (corpus.source: text or parquet)"
    )


def load_local_copies(corpus: dict, copies: list[str], cache_dir: str):
    """The private ``copies`` of the local files (:func:`snapshot`) read by the ``datasets`` builder of
    ``corpus.source``, its Arrow files written to ``cache_dir`` (a folder of this read alone)."""
    import datasets

    source = corpus["source"]
    if all(os.path.getsize(copy) == 0 for copy in copies):
        return datasets.Dataset.from_dict(
            {corpus["text_column"]: []}, features=datasets.Features({corpus["text_column"]: datasets.Value("string")})
        )
    # Undecodable bytes of text and jsonl become U+FFFD; sample_sentences drops and counts such rows.
    options = {} if source == "parquet" else {"encoding_errors": "replace"}
    # datasets reads data_files as glob patterns: the copies' folder (the working directory's path) may hold [, ?, *
    literal = [glob.escape(copy) for copy in copies]
    try:
        return datasets.load_dataset(
            LOCAL_BUILDERS[source], data_files=literal, split="train", cache_dir=cache_dir, **options
        )
    except Exception as error:  # datasets raises many types; all mean "cannot load", but for a full disk
        if disk_full(error):
            raise
        if source == "jsonl" and (bad_line := first_bad_json_line(copies, corpus_paths(corpus))):
            raise CorpusError(bad_line) from error
        raise CorpusError(
            f"corpus: cannot read {corpus_paths(corpus)!r} as {source} ({type(error).__name__}: "
            f"{first_line(error)}); check the files against corpus.source (text: one sentence per line; parquet; "
            "jsonl: one JSON object per line)"
        ) from error


def with_text_column(corpus: dict, dataset, copies: list[str]):
    """``dataset`` if its ``corpus.text_column`` holds text; else :class:`CorpusError` naming what it holds
    (for JSON Lines, the first row whose value is not a string, found in the ``copies`` read)."""
    column = corpus["text_column"]
    if column not in dataset.column_names:
        raise CorpusError(f"corpus.text_column: column {column!r} not found; available: {dataset.column_names}")
    kind = dataset.data.column(column).type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return dataset
    if corpus["source"] == "jsonl" and (line := first_non_text_json_line(copies, corpus_paths(corpus), column)):
        raise CorpusError(line)
    raise CorpusError(f"corpus.text_column: column {column!r} holds {kind}, not text")


def recorded_fingerprints(corpus: dict) -> list[str | None | bool]:
    """The fingerprint each of the corpus's files had at start-up (``corpus.inputs.files``, see
    :func:`ctxvar.run.inputs.corpus_inputs`); False for each where none was taken (the corpus read outside a run)."""
    paths, recorded = corpus_paths(corpus), (corpus.get("inputs") or {}).get("files")
    if recorded is None:
        return [False] * len(paths)
    if len(recorded) != len(paths):
        raise CorpusError(
            f"corpus.path: {len(paths)} files, but start-up recorded {len(recorded)} fingerprints "
            "(corpus.inputs.files); run Snakemake again, so that every job reads the files as they are"
        )
    return list(recorded)


def snapshot(path: str, copy: str, recorded: str | None | bool, source: str) -> str:
    """Copy the file ``path`` to ``copy`` through one open file and return ``copy``; text and JSON Lines in
    UTF-16 or UTF-32 (by their byte-order mark) become UTF-8, all else is copied byte for byte.

    The bytes copied are those the run's fingerprint names: the file opened is the one ``path`` names now, whose
    :func:`~ctxvar.models.files.file_fingerprint` (size, modification and change time, links followed) is
    ``recorded`` (unless ``recorded`` is False), and its size and times are the same when the copy ends as when
    it began. Any write changes the change time, which no tool can set back, so an edit or a replacement made
    after start-up, or while the copy runs, is a :class:`CorpusError` and never a read of other text.
    """
    try:
        reader = open(path, "rb")
    except OSError as error:  # removed, or made unreadable, since start-up
        raise CorpusError(
            f"corpus.path: {path} cannot be opened ({type(error).__name__}: {first_line(error)}); it could at "
            "start-up: put the file back, or run Snakemake again once corpus.path names a readable file"
        ) from error
    with reader:
        opened = os.fstat(reader.fileno())
        named = os.stat(path)
        if recorded is not False and (
            (named.st_dev, named.st_ino) != (opened.st_dev, opened.st_ino) or file_fingerprint(path) != recorded
        ):
            raise CorpusError(
                f"corpus.path: {path} changed after this run started (its size, modification or change time is "
                "not what start-up recorded); run Snakemake again, so that every job reads the file as it is"
            )
        name, codec = ("binary", None) if source in BINARY_SOURCES else encoding_of(reader.read(4096), path)
        reader.seek(0)
        if codec in (None, "utf-8", "utf-8-sig"):  # a UTF-8 mark becomes U+FEFF, removed with every other
            with open(copy, "wb") as writer:
                copy_blocks(reader, writer)
        else:
            log.info("corpus: %s is %s (byte-order mark); read as such", path, name)
            decoded = io.TextIOWrapper(reader, encoding=codec, errors="replace", newline="")
            with open(copy, "w", encoding="utf-8", newline="") as writer:
                copy_blocks(decoded, writer)
            decoded.detach()
        read = os.fstat(reader.fileno())
    if metadata(read) != metadata(opened):
        raise CorpusError(
            f"corpus.path: {path} changed while it was read; run Snakemake again once nothing writes to it"
        )
    return copy


def metadata(status: os.stat_result) -> tuple[int, int, int]:
    """What a write to a file changes: its size, modification time and change time."""
    return status.st_size, status.st_mtime_ns, status.st_ctime_ns


def copy_blocks(reader, writer) -> None:
    """Copy ``reader`` to ``writer`` in blocks of 1 MiB (bytes or text, as they are opened)."""
    shutil.copyfileobj(reader, writer, 1 << 20)


def first_bad_json_line(paths: list[str], shown: list[str]) -> str | None:
    """Where the first line of the JSON Lines files ``paths`` (named ``shown`` in the message) that is not one JSON
    object is, and why; None if every non-blank line is one."""
    for path, name in zip(paths, shown):
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as error:
                    reason = getattr(error, "msg", error)
                    return (
                        f"corpus.path: {name} line {number} is not JSON ({reason}); each line must be one JSON object"
                    )
                if not isinstance(row, dict):
                    return (
                        f"corpus.path: {name} line {number} is a JSON {type(row).__name__}, not an object; each line "
                        'must be one JSON object such as {"text": "…"}'
                    )
    return None


def first_non_text_json_line(paths: list[str], shown: list[str], column: str) -> str | None:
    """Where the first row of the JSON Lines files ``paths`` (named ``shown`` in the message) whose ``column``
    holds something other than a string (or null) is, and what it holds; None if there is none (``datasets``
    reads a column of mixed kinds as JSON)."""
    for path, name in zip(paths, shown):
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    value = json.loads(line).get(column) if line.strip() else None
                except (ValueError, AttributeError):
                    continue
                if value is not None and not isinstance(value, str):
                    return (
                        f"corpus.path: {name} line {number}: {column!r} is {JSON_TYPE_NAMES[type(value)]} "
                        f"({json.dumps(value)[:40]}), not text; each row's {column} must be a string"
                    )
    return None


def source_rows_at_most(corpus: dict, enough: int) -> int | None:
    """An upper bound on the sentences the corpus keeps, known before any job runs: ``corpus.rows`` where set
    (the sampling draws that many or stops), whatever the source; else of R rows in the source, sampling keeps
    ⌊fraction · R⌋ (``paper``, ``python-random``) or at most R (``hash``). R of the synthetic corpus is its size, of
    local Parquet files their row count, of text and jsonl files their lines (as ``str.splitlines`` counts them,
    what ``datasets`` makes rows of), read only until the bound reaches ``enough``, which it then returns, of a
    local enwik8 its text's bytes over 512 (:func:`ctxvar.corpus.enwik8.pieces_at_most`). None for Hub datasets
    (enwik8's too) and the Python documentation, files that cannot be read, and text beyond :data:`ROWS_READ_LIMIT`."""
    source = corpus["source"]
    if corpus.get("rows") is not None:
        return corpus["rows"]

    def kept(rows: int) -> int:
        return rows if corpus["sampling"] == "hash" else int(corpus["fraction"] * rows)

    if source == "synthetic":
        return kept(corpus["synthetic"]["n_sentences"])
    if source == "enwik8" and local_corpus(corpus):
        try:
            return kept(enwik8.pieces_at_most(corpus_paths(corpus)[0]))
        except (OSError, CorpusError):
            return None  # sample_corpus reports it
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
    """``(name, codec)`` of the text file ``path`` from its byte-order mark (:func:`encoding_of`)."""
    with open(path, "rb") as handle:
        return encoding_of(handle.read(4096), path)


def encoding_of(head: bytes, path) -> tuple[str, str]:
    """``(name, codec)`` of a text file that begins with ``head`` from its byte-order mark; UTF-8 without one.

    Raises :class:`CorpusError` for text that looks like UTF-16 without a byte-order
    mark (NUL bytes at every second position; UTF-32 without one has them too and is
    refused the same way), which UTF-8 decoding would turn into sentences full of NULs.
    """
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
    """The Hub dataset's commit resolved at start-up (``inputs.commit``, see :mod:`ctxvar.run.inputs`), if any."""
    return (corpus.get("inputs") or {}).get("commit")
