"""An extraction job takes the token ids its shard holds only from the tokenizer that made them (split_corpus
records its SHA-256); a shard of another tokenizer, or without ids, is tokenized in the job, to the same ids."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ctxvar.corpus.shards import write_shards
from ctxvar.extraction import shard as shard_module
from ctxvar.extraction.shard import read_shard
from ctxvar.files.parquet import write_table
from ctxvar.models.loading import load_tokenizer
from ctxvar.models.tokens import encode

from support.pipeline_runs import shard_of

pytestmark = pytest.mark.integration


@pytest.fixture
def tokenizers(tiny_models):
    return {arch: load_tokenizer({"id": arch}, tiny_models[arch]) for arch in ("bert", "gpt2")}


def test_the_shards_ids_are_taken_from_their_own_tokenizer_and_made_anew_for_another(
    tmp_path, monkeypatch, tokenizers, corpus_texts
):
    texts = corpus_texts[:30]
    sentences = pa.table({"sentence_id": np.arange(len(texts)), "text": pa.array(texts, pa.string())})
    write_table(sentences, tmp_path / "sentences.parquet")
    write_shards(tmp_path / "sentences.parquet", [tmp_path / "0.parquet"], tokenizers["bert"])
    encode_here = shard_module.encode
    monkeypatch.setattr(shard_module, "encode", lambda *args: pytest.fail("tokenized though the shard has the ids"))
    held, chunk, sentence_id = read_shard(tmp_path / "0.parquet", tokenizers["bert"])
    assert len(chunk) == len(sentence_id) == len(texts) == len(held.offsets) - 1
    ordered = [texts[i] for i in sentence_id]
    expected = encode(tokenizers["bert"], ordered)
    np.testing.assert_array_equal(held.ids, expected.ids)
    np.testing.assert_array_equal(held.offsets, expected.offsets)
    monkeypatch.setattr(shard_module, "encode", encode_here)
    other, _, _ = read_shard(tmp_path / "0.parquet", tokenizers["gpt2"])  # another tokenizer: its own ids
    np.testing.assert_array_equal(other.ids, encode(tokenizers["gpt2"], ordered).ids)
    plain, _, _ = read_shard(shard_of(tmp_path, texts), tokenizers["bert"])  # no ids: tokenized here
    np.testing.assert_array_equal(plain.ids, encode(tokenizers["bert"], texts).ids)
