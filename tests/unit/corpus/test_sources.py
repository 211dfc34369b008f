"""Reading a corpus's source (ctxvar.corpus.sources). A local corpus edited in place is read as it is now:
``datasets`` keys its cache on a file's path and modification time, so an edit that keeps the size and sets the
old times back (``os.utime``) must still give the sentences a fresh read gives, and the file read must be the file
the run's fingerprint names. Files whose names hold glob characters are read as named (``datasets`` takes
``data_files`` as glob patterns, so ``corpus [v2].txt`` would match ``corpus v.txt`` beside it). A JSON Lines
corpus whose text column holds a number, list or object on some row names that row. The synthetic corpus is
deterministic and Zipfian. A text or JSON Lines file's byte-order mark gives its encoding, and UTF-16 without one is
refused naming the encoding."""

from __future__ import annotations

import errno
import importlib
import json
import os
import shutil
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxvar.corpus import python_docs, sources
from ctxvar.corpus.sentences import sample_sentences, text_column, write_sentences
from ctxvar.corpus.sources import synthetic_sentences
from ctxvar.errors import CorpusError, DiskSpaceError
from ctxvar.run.inputs import corpus_inputs

from support.encoded_corpora import ENCODED_CORPUS, ENCODINGS, LINES, corpus_file
from support.messages import one_line

BASE = {
    "name": None,
    "config_name": None,
    "split": "train",
    "text_column": "text",
    "fraction": 0.5,
    "max_words": 20,
    "seed": 0,
    "sampling": "paper",
}
BEFORE = [f"the old sentence number {i:02d}" for i in range(40)]
AFTER = [f"a new sentence, row {i:02d} now" for i in range(40)]  # as long as BEFORE's, row by row


def write(path, source: str, texts: list[str]) -> None:
    if source == "text":
        path.write_text("".join(f"{text}\n" for text in texts), encoding="utf-8")
    elif source == "jsonl":
        path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
    else:  # no compression, dictionary or statistics: strings of the same lengths give a file of the same size
        table = pa.table({"text": texts})
        pq.write_table(table, path, compression="none", use_dictionary=False, write_statistics=False)


def edit_keeping_size_and_times(path, source: str, texts: list[str]) -> None:
    """Rewrite ``path`` with ``texts`` in place, then set its access and modification times back."""
    status = os.stat(path)
    write(path, source, texts)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (status.st_size, status.st_mtime_ns)


def sentences(corpus: dict) -> list[str]:
    return sample_sentences(corpus)[0].column("text").to_pylist()


@pytest.mark.parametrize("source", ["text", "jsonl", "parquet"])
def test_an_edit_keeping_size_and_modification_time_reads_the_new_text(tmp_path, source):
    path = tmp_path / f"corpus.{source}"
    write(path, source, BEFORE)
    corpus = {**BASE, "source": source, "path": str(path)}
    old = sentences(corpus)
    assert set(old) <= set(BEFORE)
    edit_keeping_size_and_times(path, source, AFTER)
    fresh = tmp_path / "fresh" / f"corpus.{source}"
    fresh.parent.mkdir()
    shutil.copyfile(path, fresh)
    expected = sentences({**corpus, "path": str(fresh)})
    assert set(expected) <= set(AFTER) and len(expected) == len(old)
    assert sentences(corpus) == expected
    assert sentences({**corpus, "inputs": corpus_inputs(corpus)}) == expected


@pytest.mark.parametrize("source", ["text", "jsonl", "parquet"])
def test_a_file_edited_after_its_fingerprint_was_taken_is_refused(tmp_path, source):
    path = tmp_path / f"corpus.{source}"
    write(path, source, BEFORE)
    corpus = {**BASE, "source": source, "path": str(path)}
    recorded = {**corpus, "inputs": corpus_inputs(corpus)}
    edit_keeping_size_and_times(path, source, AFTER)
    with pytest.raises(CorpusError, match=f"^corpus.path: {path} changed after this run started"):
        sample_sentences(recorded)


def test_a_link_moved_to_another_file_after_the_fingerprint_is_refused(tmp_path):
    first, second, link = tmp_path / "first.txt", tmp_path / "second.txt", tmp_path / "corpus.txt"
    write(first, "text", BEFORE)
    write(second, "text", AFTER)
    link.symlink_to(first)
    corpus = {**BASE, "source": "text", "path": str(link)}
    recorded = {**corpus, "inputs": corpus_inputs(corpus)}
    link.unlink()
    link.symlink_to(second)
    with pytest.raises(CorpusError, match="changed after this run started"):
        sample_sentences(recorded)


def test_a_file_written_while_it_is_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "corpus.txt"
    write(path, "text", BEFORE)
    corpus = {**BASE, "source": "text", "path": str(path)}
    copy_blocks = sources.copy_blocks

    def copy_while_another_process_appends(reader, writer):
        with open(path, "a", encoding="utf-8") as other:
            other.write("a line written meanwhile\n")
        copy_blocks(reader, writer)

    monkeypatch.setattr(sources, "copy_blocks", copy_while_another_process_appends)
    with pytest.raises(CorpusError, match=f"^corpus.path: {path} changed while it was read"):
        sample_sentences({**corpus, "inputs": corpus_inputs(corpus)})


def test_the_python_documentation_edited_in_place_is_read_past_the_bytecode_cache(tmp_path, monkeypatch):
    """Python's bytecode cache keys on a source file's size and modification time, as ``datasets`` does: the
    documentation's topics, edited in place with both kept, must give the new text (a stand-in ``pydoc_data``
    ahead of the standard library's; each read as a new job would make it, with no module imported yet)."""
    package = tmp_path / "pydoc_data"
    package.mkdir()
    (package / "__init__.py").write_text("")
    topics = package / "topics.py"
    topics.write_text(f"topics = {{'assert': {'The old text says this.'!r}}}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)

    standard = {name: sys.modules.pop(name, None) for name in ("pydoc_data", "pydoc_data.topics")}

    def sentences_of_a_new_job() -> tuple[str, ...]:
        for name in standard:
            sys.modules.pop(name, None)
        python_docs.python_docs_sentences.cache_clear()
        return python_docs.python_docs_sentences()

    try:
        importlib.import_module("pydoc_data.topics")  # as start-up does (ctxvar.run.inputs), leaving the bytecode
        assert list((package / "__pycache__").glob("topics.*.pyc"))
        assert sentences_of_a_new_job() == ("The old text says this.",)
        status = os.stat(topics)
        topics.write_text(f"topics = {{'assert': {'The new text says that.'!r}}}\n")
        os.utime(topics, ns=(status.st_atime_ns, status.st_mtime_ns))
        assert os.stat(topics).st_size == status.st_size
        assert sentences_of_a_new_job() == ("The new text says that.",)
    finally:  # the standard library's modules back, and no sentences of the stand-in kept
        for name, module in standard.items():
            sys.modules.pop(name, None)
            if module is not None:
                sys.modules[name] = module
        python_docs.python_docs_sentences.cache_clear()


def test_the_copies_are_read_beside_the_outputs_and_removed(tmp_path, monkeypatch):
    path = tmp_path / "corpus.txt"
    write(path, "text", BEFORE)
    corpus = {**BASE, "source": "text", "path": str(path)}
    outputs, copied_to = tmp_path / "results" / "corpus", []
    copy_blocks = sources.copy_blocks

    def copy_and_note_where(reader, writer):
        copied_to.append(os.path.dirname(os.path.dirname(writer.name)))
        copy_blocks(reader, writer)

    monkeypatch.setattr(sources, "copy_blocks", copy_and_note_where)
    write_sentences({**corpus, "inputs": corpus_inputs(corpus)}, outputs / "sentences.parquet", outputs / "c.json")
    assert copied_to == [str(outputs)]
    assert not [name for name in os.listdir(outputs) if name.startswith(".")]


def test_fingerprints_that_are_not_one_per_file_are_refused(tmp_path):
    path = tmp_path / "corpus.txt"
    write(path, "text", BEFORE)
    corpus = {**BASE, "source": "text", "path": [str(path), str(path)]}
    with pytest.raises(CorpusError, match="^corpus.path: 2 files, but start-up recorded 1 fingerprints"):
        sample_sentences({**corpus, "inputs": {"files": corpus_inputs(corpus)["files"][:1]}})


@pytest.mark.parametrize("source", ["text", "jsonl", "parquet"])
def test_the_text_column_is_taken_from_the_one_table_built(tmp_path, source):
    """Sampling takes its rows from the table ``datasets`` built from the copies, without a flattened copy of it:
    the private folder holds the copies and one table (a 5 GB corpus needs 10 GB beside the outputs, not 15)."""
    path = tmp_path / f"corpus.{source}"
    write(path, source, BEFORE)
    corpus = {**BASE, "source": source, "path": str(path)}
    folder = tmp_path / "results" / "corpus"
    with sources.load_source({**corpus, "inputs": corpus_inputs(corpus)}, str(folder)) as dataset:
        assert text_column(dataset, "text").to_pylist() == BEFORE
        tables = [name for _, _, names in os.walk(folder) for name in names if name.endswith(".arrow")]
    assert len(tables) == 1


def test_a_private_folder_left_by_a_killed_sampling_is_removed_by_the_next(tmp_path):
    """A sampling killed (out of memory, a time limit) leaves its copies and table, as large as the corpus; the
    next sampling in that folder removes them."""
    path = tmp_path / "corpus.txt"
    write(path, "text", BEFORE)
    corpus = {**BASE, "source": "text", "path": str(path)}
    outputs = tmp_path / "results" / "corpus"
    left = outputs / ".ctxvar-corpus-killed"
    (left / "cache").mkdir(parents=True)
    (left / "0.text").write_text("the copy of a killed sampling\n")
    (outputs / ".ctxvar-corpus-note").write_text("a file of the user's, not a folder of the sampling's")
    write_sentences({**corpus, "inputs": corpus_inputs(corpus)}, outputs / "sentences.parquet", outputs / "c.json")
    assert sorted(name for name in os.listdir(outputs) if name.startswith(".")) == [".ctxvar-corpus-note"]


def test_a_full_disk_while_the_copies_are_written_names_their_folder(tmp_path, monkeypatch):
    """results/ may be a link to another disk than the working directory's: the line names the copies' folder."""
    path = tmp_path / "corpus.txt"
    write(path, "text", BEFORE)
    corpus = {**BASE, "source": "text", "path": str(path)}
    outputs = tmp_path / "results" / "corpus"

    def disk_fills(reader, writer):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sources, "copy_blocks", disk_fills)
    with pytest.raises(DiskSpaceError, match=f"^disk full while this job wrote its outputs in {outputs} "):
        sample_sentences({**corpus, "inputs": corpus_inputs(corpus)}, str(outputs))
    assert os.listdir(outputs) == []


def test_a_file_removed_after_start_up_is_one_line(tmp_path):
    """Start-up checked that the file is there; a file removed before the sampling opens it is a CorpusError,
    not a FileNotFoundError the job reports as a bug with its traceback."""
    path = tmp_path / "corpus.txt"
    write(path, "text", BEFORE)
    corpus = {**BASE, "source": "text", "path": str(path)}
    recorded = {**corpus, "inputs": corpus_inputs(corpus)}
    path.unlink()
    with pytest.raises(CorpusError, match=f"^corpus.path: {path} cannot be opened \\(FileNotFoundError: "):
        sample_sentences(recorded, str(tmp_path / "results" / "corpus"))


@pytest.mark.parametrize("source", ["text", "parquet"])
def test_a_disk_without_room_for_the_copies_is_named_before_copying(tmp_path, monkeypatch, source):
    """The sampling checks the free space for the copies and their table before it copies (minutes for a corpus
    of gigabytes), naming the folder and the bytes."""
    path = tmp_path / f"corpus.{source}"
    write(path, source, BEFORE)
    corpus = {**BASE, "source": source, "path": str(path)}
    outputs = tmp_path / "results" / "corpus"
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: shutil._ntuple_diskusage(10**12, 10**12 - 100, 100))
    with pytest.raises(DiskSpaceError, match=f"the corpus's private copies and their table in {outputs} need"):
        sample_sentences({**corpus, "inputs": corpus_inputs(corpus)}, str(outputs))
    assert sources.private_copy_bytes(corpus) >= 2 * os.path.getsize(path)


WHOLE = {**BASE, "fraction": 1.0}  # every row of the file
ODD_NAMES = ["corpus [v2]", "corpus ?", "corpus *"]


@pytest.mark.parametrize("source", ["text", "jsonl", "parquet"])
@pytest.mark.parametrize("stem", ODD_NAMES)
def test_a_file_name_with_glob_characters_reads_that_file_only(tmp_path, source, stem):
    named = tmp_path / f"{stem}.{source}"
    write(named, source, ["the named file", "its second line"])
    for other in ("corpus v", "corpus 2", "corpus x", "corpus  other"):  # what the name matches as a pattern
        write(tmp_path / f"{other}.{source}", source, ["a neighbouring file"])
    table, _ = sample_sentences({**WHOLE, "source": source, "path": str(named)})
    assert sorted(table.column("text").to_pylist()) == ["its second line", "the named file"]


@pytest.mark.parametrize("source", ["text", "jsonl", "parquet"])
@pytest.mark.parametrize("stem", ODD_NAMES)
def test_a_sampling_folder_with_glob_characters_reads_the_corpus(tmp_path, source, stem):
    """The private copies are made beside the sampling's outputs, whose path (the project's folder, the run's
    name) may hold glob characters too."""
    named = tmp_path / f"corpus.{source}"
    write(named, source, ["the named file", "its second line"])
    folder = tmp_path / stem / "results" / "corpus"
    table, _ = sample_sentences({**WHOLE, "source": source, "path": str(named)}, str(folder))
    assert sorted(table.column("text").to_pylist()) == ["its second line", "the named file"]


CORPUS = {
    "source": "jsonl",
    "name": None,
    "config_name": None,
    "split": "train",
    "text_column": "text",
    "fraction": 1.0,
    "max_words": 20,
    "seed": 0,
    "sampling": "paper",
}


@pytest.mark.parametrize(
    "value, kind", [("5", "a number"), ('["x", "y"]', "a list"), ('{"a": 1}', "an object"), ("true", "true or false")]
)
def test_the_first_row_that_is_not_text_is_named(tmp_path, value, kind):
    path = tmp_path / "corpus.jsonl"
    path.write_text(f'{{"text": "a b"}}\n{{"text": null}}\n{{"text": {value}}}\n{{"text": "c"}}\n')
    with pytest.raises(CorpusError) as error:
        sample_sentences({**CORPUS, "path": str(path)})
    message = str(error.value)
    assert message.startswith(f"corpus.path: {path} line 3: 'text' is {kind}") and "\n" not in message


def test_synthetic_corpus_is_deterministic_and_zipfian():
    spec = {"n_sentences": 2000, "vocab_size": 500, "zipf_exponent": 1.1, "mean_words": 12}
    texts = synthetic_sentences(spec, 5)
    assert texts == synthetic_sentences(spec, 5) and texts != synthetic_sentences(spec, 6)
    counts = np.sort(np.unique(" ".join(texts).split(" "), return_counts=True)[1])[::-1]
    slope = np.polyfit(np.log(np.arange(1, 51)), np.log(counts[:50]), 1)[0]
    assert -1.4 < slope < -0.8


@pytest.mark.parametrize("source", ["text", "jsonl"])
@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_byte_order_marks_are_decoded(tmp_path, source, encoding):
    table, counts = sample_sentences(
        {**ENCODED_CORPUS, "source": source, "path": str(corpus_file(tmp_path, source, encoding))}
    )
    assert sorted(table.column("text").to_pylist()) == sorted(LINES)
    assert counts["dropped_invalid_utf8"] == counts["dropped_control_characters"] == 0


@pytest.mark.parametrize("source", ["text", "jsonl"])
@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_refused_naming_the_encoding(tmp_path, source, codec):
    path = tmp_path / f"c.{source}"
    lines = LINES if source == "text" else [json.dumps({"text": t}) for t in LINES]
    path.write_bytes("\n".join(lines).encode(codec))
    with pytest.raises(
        CorpusError, match=f"looks like UTF-16 {codec[-2:].upper()} text without a byte-order mark"
    ) as error:
        sample_sentences({**ENCODED_CORPUS, "source": source, "path": str(path)})
    one_line(error)
