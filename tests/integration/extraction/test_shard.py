"""A shard's sentences fitted to a model's positions (ctxvar.extraction.shard, ``tokens.long_sentences``),
on a BERT of 24 positions shorter than some sentences: ``error`` stops the job naming the remedy and writes
nothing, ``skip`` counts the sentences it skipped, ``split`` runs windows whose statistics equal brute force's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from transformers import AutoTokenizer

from ctxvar.errors import CorpusError
from ctxvar.stats.merge import merge_partials

from support.oracle import assert_tokens_match, brute_force_embeddings, brute_force_tokens
from support.pipeline_runs import extract, shard_of
from support.tiny_models import short_bert


@pytest.fixture(scope="module")
def short_model(tmp_path_factory, corpus_texts):
    """A BERT of 24 positions, shorter than some of the corpus's sentences."""
    return Path(short_bert(tmp_path_factory.mktemp("short") / "bert", corpus_texts))


def test_long_sentences_error_names_the_remedy(tmp_path, short_model, corpus_texts):
    with pytest.raises(CorpusError, match="exceed the 24 positions of model 'm'.*long_sentences: skip or split"):
        extract(short_model, shard_of(tmp_path, corpus_texts[:40]), tmp_path / "p.parquet", long_sentences="error")
    assert not (tmp_path / "p.parquet").exists()


def test_long_sentences_skipped_are_counted(tmp_path, short_model, corpus_texts):
    texts = corpus_texts[:60]
    metadata = extract(short_model, shard_of(tmp_path, texts), tmp_path / "p.parquet", long_sentences="skip")
    tokenizer = AutoTokenizer.from_pretrained(short_model)
    too_long = sum(len(tokenizer.tokenize(text)) + 2 > 24 for text in texts)
    assert 0 < too_long < len(texts)
    assert metadata["n_skipped_too_long"] == too_long and metadata["n_sentences"] == len(texts) - too_long


def test_long_sentences_split_into_windows_match_brute_force(tmp_path, short_model, corpus_texts):
    texts = corpus_texts[:60]
    metadata = extract(short_model, shard_of(tmp_path, texts), tmp_path / "p.parquet", long_sentences="split")
    merge_partials([tmp_path / "p.parquet"], tmp_path / "stats.parquet", tmp_path / "tokens.parquet")
    expected = brute_force_tokens(*brute_force_embeddings(short_model, texts, window=24))
    assert_tokens_match(pd.read_parquet(tmp_path / "tokens.parquet"), expected)
    assert metadata["n_split_too_long"] > 0 and metadata["n_sequences"] > len(texts)
