"""An empty corpus gets one line, from the sampling, and no warning to "set shards: 1" before it (shards was
already 1, and no shard count helps a corpus with no sentence)."""

from __future__ import annotations

from ctxvar.corpus.shards import fewer_sentences_warning, start_up_warning


def test_an_empty_source_gets_no_shards_warning(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("")
    corpus = {"source": "text", "path": str(path), "fraction": 1.0, "sampling": "paper", "text_column": "text"}
    assert start_up_warning(corpus, tmp_path / "sentences.parquet", 1) is None
    assert fewer_sentences_warning(0, 4, at_most=True) is None


def test_fewer_sentences_than_shards_still_warn():
    assert "set shards: 2" in fewer_sentences_warning(2, 4)
