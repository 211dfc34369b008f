"""Sampling a corpus's sentences (ctxvar.corpus.sentences): the paper's sampling and the hash sampling, local text,
JSON Lines and Parquet sources through ``datasets`` with the word filter, the Hub's datasets offline or out of
reach, and the lines dropped (blank, undecodable, control characters, too long), counted, and named when none is
kept."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctxvar.corpus.sentences import sample_indices, sample_sentences
from ctxvar.errors import CorpusError

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
    }
    assert set(table.column("sentence_id").to_pylist()) == {0, 4, 5}


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
