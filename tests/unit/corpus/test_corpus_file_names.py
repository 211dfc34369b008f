"""Corpus files whose names hold glob characters are read as named: ``datasets`` takes ``data_files`` as
glob patterns, so ``corpus [v2].txt`` would match ``corpus v.txt`` beside it (and read that file instead)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxvar.corpus.sentences import sample_sentences

BASE = {
    "name": None,
    "config_name": None,
    "split": "train",
    "text_column": "text",
    "fraction": 1.0,
    "max_words": 20,
    "seed": 0,
    "sampling": "paper",
}
ODD_NAMES = ["corpus [v2]", "corpus ?", "corpus *"]


def write(path, source: str, texts: list[str]) -> None:
    if source == "text":
        path.write_text("".join(f"{text}\n" for text in texts), encoding="utf-8")
    elif source == "jsonl":
        path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
    else:
        pq.write_table(pa.table({"text": texts}), path)


@pytest.mark.parametrize("source", ["text", "jsonl", "parquet"])
@pytest.mark.parametrize("stem", ODD_NAMES)
def test_a_file_name_with_glob_characters_reads_that_file_only(tmp_path, source, stem):
    named = tmp_path / f"{stem}.{source}"
    write(named, source, ["the named file", "its second line"])
    for other in ("corpus v", "corpus 2", "corpus x", "corpus  other"):  # what the name matches as a pattern
        write(tmp_path / f"{other}.{source}", source, ["a neighbouring file"])
    table, _ = sample_sentences({**BASE, "source": source, "path": str(named)})
    assert sorted(table.column("text").to_pylist()) == ["its second line", "the named file"]


@pytest.mark.parametrize("source", ["text", "jsonl", "parquet"])
@pytest.mark.parametrize("stem", ODD_NAMES)
def test_a_sampling_folder_with_glob_characters_reads_the_corpus(tmp_path, source, stem):
    """The private copies are made beside the sampling's outputs, whose path (the project's folder, the run's
    name) may hold glob characters too."""
    named = tmp_path / f"corpus.{source}"
    write(named, source, ["the named file", "its second line"])
    folder = tmp_path / stem / "results" / "corpus"
    table, _ = sample_sentences({**BASE, "source": source, "path": str(named)}, str(folder))
    assert sorted(table.column("text").to_pylist()) == ["its second line", "the named file"]
