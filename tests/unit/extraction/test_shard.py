"""An extraction job takes the token ids its shard holds only from the tokenizer that made them (split_corpus
records its identity); a shard of another tokenizer or library version, or without ids, is tokenized in the job."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ctxvar.corpus.shards import write_shards
from ctxvar.errors import CorpusError
from ctxvar.extraction import shard as shard_module
from ctxvar.extraction.shard import read_shard
from ctxvar.files.parquet import read_metadata, read_table, write_table
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


def test_ids_of_another_library_version_are_made_anew(tmp_path, monkeypatch, tokenizers, corpus_texts):
    """The same tokenizer definition run by another transformers or tokenizers may split a text otherwise."""
    texts = corpus_texts[:10]
    write_table(pa.table({"sentence_id": np.arange(10), "text": pa.array(texts)}), tmp_path / "sentences.parquet")
    write_shards(tmp_path / "sentences.parquet", [tmp_path / "0.parquet"], tokenizers["bert"])
    upgraded = shard_module.tokenizer_identity

    def newer(tokenizer, sha256):
        return {**upgraded(tokenizer, sha256), "tokenizers": "99.0"}

    monkeypatch.setattr(shard_module, "tokenizer_identity", newer)
    calls = []
    monkeypatch.setattr(shard_module, "encode", lambda *args: calls.append(args) or encode(*args))
    read_shard(tmp_path / "0.parquet", tokenizers["bert"])
    assert len(calls) == 1


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda ids: [None] + ids[1:], "missing values"),
        (lambda ids: [ids[0][:-1]] + ids[1:], "not \\[bos\\] \\+ tokens \\+ \\[eos\\]"),
        (lambda ids: [[ids[0][0], 10**6, ids[0][-1]]] + ids[1:], "ids 0 to"),
    ],
)
def test_stored_ids_that_are_not_what_split_corpus_writes_are_one_line(
    tmp_path, monkeypatch, tokenizers, corpus_texts, damage, message
):
    """A shard made by hand with the tokenizer's identity in its metadata: its ids are checked before any is used."""
    texts = corpus_texts[:5]
    write_table(pa.table({"sentence_id": np.arange(5), "text": pa.array(texts)}), tmp_path / "sentences.parquet")
    write_shards(tmp_path / "sentences.parquet", [tmp_path / "0.parquet"], tokenizers["bert"])
    table = read_table(tmp_path / "0.parquet")
    ids = table.column("ids").to_pylist()
    damaged = table.set_column(
        table.schema.get_field_index("ids"), "ids", pa.array(damage(ids), pa.large_list(pa.int32()))
    )
    write_table(damaged, tmp_path / "0.parquet", metadata=read_metadata(tmp_path / "0.parquet"))
    with pytest.raises(CorpusError, match=message) as error:
        read_shard(tmp_path / "0.parquet", tokenizers["bert"])
    assert "\n" not in str(error.value)
