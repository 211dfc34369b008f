"""Sampling a corpus's sentences (ctxvar.corpus.sentences): the paper's sampling, Python's random.sample and the hash
sampling, of a share of the rows or of a number of them (corpus.rows, refused where it cannot be drawn), local text,
JSON Lines and Parquet sources through ``datasets`` with the word filter, the Hub's datasets offline or out of
reach, and the lines dropped (blank, undecodable, control characters, too long), counted, and named when none is
kept; byte-order marks inside Parquet text are removed and counted."""

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxvar.corpus.sentences import sample_indices, sample_sentences
from ctxvar.errors import CorpusError

from support.encoded_corpora import ENCODED_CORPUS

BASE = {
    "name": None,
    "config_name": None,
    "split": "train",
    "path": None,
    "text_column": "text",
    "fraction": 1.0,
    "max_words": 5,
    "seed": 0,
    "sampling": "paper",
    "synthetic": {"n_sentences": 50, "vocab_size": 40, "zipf_exponent": 1.0, "mean_words": 4},
}


def test_paper_sampling_is_the_legacy_global_numpy_call():
    np.random.seed(0)
    expected = np.random.choice(10_000, int(0.01 * 10_000), replace=False)
    assert np.array_equal(sample_indices(10_000, 0.01, 0, "paper"), expected)


def test_paper_sampling_of_a_number_of_rows_is_the_legacy_global_numpy_call():
    np.random.seed(5)
    expected = np.random.choice(1_000, 37, replace=False)
    assert np.array_equal(sample_indices(1_000, 1.0, 5, "paper", rows=37), expected)


@pytest.mark.parametrize("seed, n_rows, rows", [(0, 10_000, 128), (7, 300, 300), (2**32 - 1, 200_000, 1_000)])
def test_python_random_sampling_is_the_seeded_global_random_sample_in_the_order_drawn(seed, n_rows, rows):
    state = random.getstate()
    try:
        random.seed(seed)
        expected = random.sample(range(n_rows), rows)
        random.seed(seed)
        of_a_share = random.sample(range(n_rows), int(0.3 * n_rows))
    finally:
        random.setstate(state)
    drawn = sample_indices(n_rows, 1.0, seed, "python-random", rows=rows)
    assert drawn.dtype == np.int64 and drawn.tolist() == expected  # a private Random(seed) draws what the global does
    assert sample_indices(n_rows, 0.3, seed, "python-random").tolist() == of_a_share


def test_more_rows_than_the_source_holds_is_one_line_naming_both(tmp_path):
    with pytest.raises(CorpusError, match="corpus.rows: 11 rows asked of a source of 10 rows") as error:
        sample_indices(10, 1.0, 0, "python-random", rows=11)
    assert "\n" not in str(error.value)
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"sentence {i}\n" for i in range(6)), encoding="utf-8")
    at_most = "corpus.rows: 7 rows asked of a source of 6 rows; set corpus.rows to at most 6, or use a larger corpus"
    with pytest.raises(CorpusError, match=at_most):
        sample_sentences({**BASE, "source": "text", "path": str(path), "rows": 7})
    table, counts = sample_sentences({**BASE, "source": "text", "path": str(path), "rows": 6})
    assert counts["rows_sampled"] == table.num_rows == 6


@pytest.mark.parametrize(
    "fraction, mode, message",
    [
        (1.0, "hash", "corpus.rows: sampling hash keeps the rows whose hash falls below corpus.fraction"),
        (0.5, "paper", "corpus.rows: 4 and corpus.fraction: 0.5 both set the sample's size"),
        (0.5, "python-random", "corpus.rows: 4 and corpus.fraction: 0.5 both set the sample's size"),
    ],
)
def test_rows_that_cannot_size_the_sample_are_one_line(fraction, mode, message):
    with pytest.raises(CorpusError, match=message) as error:
        sample_indices(100, fraction, 0, mode, rows=4)
    assert "\n" not in str(error.value)


def test_hash_sampling_is_stable_under_appended_rows_and_near_the_fraction():
    small, large = sample_indices(20_000, 0.1, 3, "hash"), sample_indices(40_000, 0.1, 3, "hash")
    assert np.array_equal(large[large < 20_000], small)
    assert abs(len(large) / 40_000 - 0.1) < 0.01


def test_local_text_file_goes_through_datasets_with_the_word_filter(tmp_path):
    lines = ["a b c", "", "   ", "one two three four five six", "x , y .", "café au lait"]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table, counts = sample_sentences({**BASE, "source": "text", "path": str(path)})
    assert sorted(table.column("text").to_pylist()) == sorted(["a b c", "x , y .", "café au lait"])
    assert counts == {
        "rows_in_source": 6,
        "rows_sampled": 6,
        "dropped_blank": 2,
        "dropped_invalid_utf8": 0,
        "dropped_control_characters": 0,
        "dropped_too_long": 1,
        "removed_byte_order_mark": 0,
        "sentences": 3,
        "repeated_sentences": 0,
    }
    assert set(table.column("sentence_id").to_pylist()) == {0, 4, 5}


def test_repeated_sentences_are_kept_and_counted(tmp_path):
    """A sentence that repeats an earlier kept one verbatim is kept (as the paper keeps BookCorpus's) and counted:
    each copy beyond the first once; one differing by a character is no repeat."""
    lines = ["the same words", "other words here", "the same words", "the same words", "the same words."]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table, counts = sample_sentences({**BASE, "source": "text", "path": str(path)})
    assert table.num_rows == counts["sentences"] == 5 and counts["repeated_sentences"] == 2


@pytest.mark.parametrize("source", ["jsonl", "parquet"])
def test_jsonl_and_parquet_sources_read_the_text_column(tmp_path, source):
    rows = [{"sentence": "hello world", "other": 1}, {"sentence": "bye", "other": 2}]
    path = tmp_path / f"c.{source}"
    if source == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows))
    else:
        import pyarrow as pa

        pq.write_table(pa.Table.from_pylist(rows), path)
    table, _ = sample_sentences({**BASE, "source": source, "path": str(path), "text_column": "sentence"})
    assert sorted(table.column("text").to_pylist()) == ["bye", "hello world"]


def test_missing_text_column_is_named(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"body": "x"}\n')
    with pytest.raises(CorpusError, match="column 'text' not found"):
        sample_sentences({**BASE, "source": "jsonl", "path": str(path)})


def test_hub_dataset_when_offline_and_uncached_fails_with_one_line(monkeypatch):
    # As if HF_HUB_OFFLINE=1 had been set before the libraries were imported (as in a job).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("datasets.config.HF_HUB_OFFLINE", True)
    with pytest.raises(CorpusError, match="cannot load 'no-such-user/no-such-dataset'.*config/demo.yaml") as error:
        sample_sentences({**BASE, "source": "hf", "name": "no-such-user/no-such-dataset"})
    assert "\n" not in str(error.value)


def test_hub_dataset_when_hub_unreachable_fails_at_once(monkeypatch, hub_online):
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(CorpusError, match="Hub cannot be reached.*HF_HUB_OFFLINE=1"):
        sample_sentences({**BASE, "source": "hf", "name": "bookcorpus"})


def test_undecodable_bytes_drop_their_line_and_are_counted(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(
        "good line\nbad \xff\xfe bytes\ncafé ok\n".encode("utf-8").replace(b"\xc3\xbf\xc3\xbe", b"\xff\xfe")
    )
    table, counts = sample_sentences({**BASE, "source": "text", "path": str(path)})
    assert sorted(table.column("text").to_pylist()) == ["café ok", "good line"] and counts["dropped_invalid_utf8"] == 1


@pytest.mark.parametrize(
    "content, dropped",
    [("", "the source is empty"), ("\n  \n\t\n", "3 blank"), ("a\x00b\nc\x1bd\n", "2 control characters")],
)
def test_a_corpus_with_no_kept_sentence_stops_at_sampling_with_what_was_dropped(tmp_path, content, dropped):
    path = tmp_path / "empty.txt"
    path.write_text(content)
    with pytest.raises(CorpusError, match=f"no sentence kept of \\d+ sampled rows \\({dropped}\\)"):
        sample_sentences({**BASE, "source": "text", "path": str(path)})


def test_parquet_text_with_marks_and_control_characters(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(
        pa.table(
            {"text": ["\ufeffthe cat sat", "nul\x00inside", "bell\x07", "zero\ufeffwidth", "tab\tok", "cr\rline"]}
        ),
        path,
    )
    table, counts = sample_sentences({**ENCODED_CORPUS, "source": "parquet", "path": str(path)})
    assert sorted(table.column("text").to_pylist()) == ["tab\tok", "the cat sat", "zerowidth"]
    assert counts["dropped_control_characters"] == 3 and counts["removed_byte_order_mark"] == 2
