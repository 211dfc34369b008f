"""enwik8 as a corpus (ctxvar.corpus.enwik8, through ctxvar.corpus.sources and sentences): the pieces are the
study's own (tests/support/razzhigaev_reference.py) for an enwik8-like file read raw, zipped or as the Hub's one row
of text, markup and line feeds kept, since the study's reading removes nothing; line ends are read as Python's text
mode reads them, across the decoder's blocks too; the sample of the pieces is deterministic, draws the study's 128
pieces in the study's order with sampling python-random, rows 128 and seed 0, and goes through the fingerprint
check of local files; bad files are one line."""

from __future__ import annotations

import zipfile

import datasets
import pytest

from ctxvar.corpus import enwik8
from ctxvar.corpus.sentences import sample_indices, sample_sentences
from ctxvar.corpus.sources import source_rows_at_most
from ctxvar.errors import ConfigError, CorpusError
from ctxvar.run.inputs import corpus_inputs

from support.enwik8_like import write_enwik8_like
from support.razzhigaev_reference import drawn_pieces, load_enwiki_text, pieces

CORPUS = {
    "source": "enwik8",
    "name": None,
    "config_name": None,
    "split": "train",
    "text_column": "text",
    "fraction": 1.0,
    "max_words": 1_000_000,  # a piece is 512 characters, some 60 to 100 words: every piece is kept
    "seed": 0,
    "sampling": "paper",
}


@pytest.fixture
def files(tmp_path):
    return write_enwik8_like(tmp_path)


@pytest.mark.parametrize("kind", ["raw", "zip"])
def test_the_pieces_are_the_studys_from_the_raw_file_and_its_zip(files, kind):
    expected = pieces(load_enwiki_text(files["raw"]))
    found = enwik8.read_pieces(str(files[kind]))
    assert len(expected) > 50 and found == expected
    joined = "".join(found)
    for kept in ("<page>", "[[", "{{", "{|", "&amp;", "&lt;ref&gt;", "'''", "\t", "\ufffd", "\U0001d11e"):
        assert kept in joined, kept  # the study's reading cleans nothing
    assert "\r" not in joined and "\n" in joined


def test_the_text_of_the_hub_row_gives_the_same_pieces(files):
    text = load_enwiki_text(files["raw"])
    dataset = datasets.Dataset.from_dict({"text": [text]})
    assert enwik8.pieces(enwik8.hub_text(dataset)) == pieces(text)


def test_a_hub_table_that_is_not_one_row_of_text_is_one_line():
    with pytest.raises(CorpusError, match="holds 2 rows") as error:
        enwik8.hub_text(datasets.Dataset.from_dict({"text": ["a", "b"]}))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 8191 + "\r\n" + "y" * 1000,  # "\r" ends the decoder's first block of 8192 bytes, "\n" begins the next
        "a" * 511 + "\r\n" + "b" * 600,  # "\r\n" across the end of the first piece, as written
        "é" * 300 + "\r" + "中" * 700 + "\r\r\n\n" + "z" * 100,
        "short",  # less than a piece: none
    ],
)
def test_line_ends_are_read_as_python_text_mode_reads_them(tmp_path, text):
    path = tmp_path / "enwik8"
    path.write_bytes(text.encode("utf-8"))
    assert enwik8.read_pieces(str(path)) == pieces(load_enwiki_text(path))


def test_every_piece_is_a_sentence_numbered_by_its_place_with_its_line_feeds(files):
    table, counts = sample_sentences({**CORPUS, "path": str(files["raw"])})
    expected = pieces(load_enwiki_text(files["raw"]))
    numbered = dict(zip(table.column("sentence_id").to_pylist(), table.column("text").to_pylist()))
    assert [numbered[i] for i in range(len(expected))] == expected
    assert counts["dropped_control_characters"] == counts["dropped_invalid_utf8"] == 0
    assert counts["rows_in_source"] == len(expected) and counts["sentences"] == len(expected)


@pytest.mark.parametrize("sampling", ["paper", "python-random", "hash"])
def test_the_sample_is_deterministic_and_draws_the_studys_pieces(files, sampling):
    corpus = {**CORPUS, "path": str(files["zip"]), "fraction": 0.3, "sampling": sampling, "seed": 7}
    first, second = (sample_sentences(corpus)[0] for _ in range(2))
    assert first.equals(second)
    expected = pieces(load_enwiki_text(files["raw"]))
    drawn = sample_indices(len(expected), 0.3, 7, sampling)
    assert first.column("text").to_pylist() == [expected[i] for i in drawn]


def test_python_random_with_rows_128_and_seed_0_draws_the_studys_128_pieces_in_its_order(tmp_path):
    files = write_enwik8_like(tmp_path, pages=80)  # 171 pieces: 128 of them is a proper sample
    text = load_enwiki_text(files["raw"])
    expected = drawn_pieces(text)
    assert len(pieces(text)) > 128 and len(expected) == 128
    corpus = {**CORPUS, "path": str(files["zip"]), "sampling": "python-random", "rows": 128, "seed": 0}
    table, counts = sample_sentences(corpus)
    assert table.column("text").to_pylist() == expected
    assert [pieces(text)[i] for i in table.column("sentence_id").to_pylist()] == expected
    assert counts["rows_sampled"] == counts["sentences"] == 128
    assert source_rows_at_most({**corpus, "path": str(files["raw"])}, 10**9) == 128


def test_rows_beyond_the_pieces_stop_the_sampling_with_one_line(files):
    found = len(pieces(load_enwiki_text(files["raw"])))
    corpus = {**CORPUS, "path": str(files["raw"]), "sampling": "python-random", "rows": 128}
    with pytest.raises(CorpusError, match=f"corpus.rows: 128 rows asked of a source of {found} rows") as error:
        sample_sentences(corpus)
    assert "\n" not in str(error.value)


def test_the_word_filter_applies_to_the_pieces(files):
    table, counts = sample_sentences({**CORPUS, "path": str(files["raw"]), "max_words": 63})
    assert counts["dropped_too_long"] > 0
    assert all(len(text.split(" ")) <= 63 for text in table.column("text").to_pylist())


def test_a_file_edited_after_its_fingerprint_was_taken_is_refused(files):
    corpus = {**CORPUS, "path": str(files["raw"])}
    corpus["inputs"] = corpus_inputs(corpus)
    assert corpus["inputs"]["files"][0] is not None
    files["raw"].write_bytes(files["raw"].read_bytes() + b"more text")
    with pytest.raises(CorpusError, match="changed after this run started"):
        sample_sentences(corpus)


def test_bytes_that_are_not_utf8_stop_the_sampling_with_one_line(tmp_path):
    path = tmp_path / "enwik8"
    path.write_bytes(("x" * 2000).encode() + b"\xff\xfe" + b"y" * 2000)
    with pytest.raises(CorpusError, match=r"is not UTF-8 text \(byte 2,000: b'\\xff\\xfeyy'\)") as error:
        sample_sentences({**CORPUS, "path": str(path)})
    assert "\n" not in str(error.value)


def test_a_zip_without_enwik8_is_one_line(tmp_path):
    path = tmp_path / "enwik8.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("enwik9", "text")
    with pytest.raises(CorpusError, match="a zip without a member named enwik8 \\(members: enwik9\\)") as error:
        sample_sentences({**CORPUS, "path": str(path)})
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="a zip without a member named enwik8"):
        enwik8.check_file({**CORPUS, "path": str(path)})


@pytest.mark.parametrize(
    "content, message",
    [
        ("text".encode("utf-16"), "is not UTF-8 text \\(byte 0: b'\\\\xff\\\\xfe"),
        (b"PK\x03\x04" + bytes(range(256)), "is not UTF-8 text"),
    ],
)
def test_a_file_that_is_not_the_text_is_refused_at_start_up_in_one_line(tmp_path, content, message):
    path = tmp_path / "enwik8"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as error:
        enwik8.check_file({**CORPUS, "path": str(path)})
    assert "\n" not in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize("kind", ["raw", "zip"])
def test_the_files_are_accepted_at_start_up_and_bound_the_pieces(files, kind):
    corpus = {**CORPUS, "path": str(files[kind]), "fraction": 0.5}
    enwik8.check_file(corpus)
    found = len(pieces(load_enwiki_text(files["raw"])))
    assert int(0.5 * found) <= source_rows_at_most(corpus, 10**9) <= int(0.5 * files["raw"].stat().st_size / 512)


def test_without_a_path_nothing_is_read_before_the_sampling():
    enwik8.check_file(CORPUS)
    assert source_rows_at_most(CORPUS, 10) is None


def test_the_hub_out_of_reach_offers_the_local_file_in_one_line(monkeypatch, hub_online):
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(CorpusError, match="'LTCB/enwik8' cannot be loaded.*corpus.path: enwik8.zip") as error:
        sample_sentences(CORPUS)
    assert "\n" not in str(error.value)


def test_the_hub_export_offline_and_uncached_is_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("datasets.config.HF_HUB_OFFLINE", True)
    with pytest.raises(CorpusError, match="cannot load 'LTCB/enwik8'.*corpus.path: enwik8.zip") as error:
        sample_sentences(CORPUS)
    assert "\n" not in str(error.value)
