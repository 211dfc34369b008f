"""Token types from real tokenizers (ctxvar.models.tokens): a tokenizer without boundary tokens is refused,
and no byte-order mark of a corpus file ever becomes part of a type, with WordPiece, byte-level BPE and
SentencePiece tokenizers."""

from __future__ import annotations

import shutil

import pytest

from ctxvar.corpus.sentences import sample_sentences
from ctxvar.errors import ModelLoadError
from ctxvar.models.tokens import encode, type_table, word_marker

from support.encoded_corpora import ENCODED_CORPUS, LINES, corpus_file
from support.pipeline_runs import extract, shard_of


def test_tokenizer_without_boundary_tokens_is_refused(tmp_path, tiny_models, corpus_texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.train_from_iterator(corpus_texts, trainers.BpeTrainer(vocab_size=200))
    model_dir = tmp_path / "nospecial"
    shutil.copytree(tiny_models["gpt2"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (model_dir / name).unlink(missing_ok=True)
    PreTrainedTokenizerFast(tokenizer_object=core).save_pretrained(model_dir)
    with pytest.raises(ModelLoadError, match="defines neither cls/sep nor bos/eos"):
        extract(model_dir, shard_of(tmp_path, corpus_texts[:5]), tmp_path / "p.parquet")


def sentencepiece_tokenizer(texts):
    """A SentencePiece-style (▁ marker, Unigram) fast tokenizer trained locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.Unigram())
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.train_from_iterator(
        texts,
        trainers.UnigramTrainer(vocab_size=120, special_tokens=["<s>", "</s>", "<unk>", "<pad>"], unk_token="<unk>"),
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )


@pytest.fixture(scope="module")
def tokenizers_by_family(tiny_models, corpus_texts):
    from transformers import AutoTokenizer

    return {
        "wordpiece": AutoTokenizer.from_pretrained(tiny_models["bert"]),
        "byte-level bpe": AutoTokenizer.from_pretrained(tiny_models["gpt2"]),
        "sentencepiece": sentencepiece_tokenizer(corpus_texts + LINES),
    }


@pytest.mark.parametrize("family", ["wordpiece", "byte-level bpe", "sentencepiece"])
@pytest.mark.parametrize("source, encoding", [("text", "utf-8 bom"), ("jsonl", "utf-16"), ("text", "utf-32")])
def test_no_byte_order_mark_ever_becomes_part_of_a_type(tmp_path, tokenizers_by_family, family, source, encoding):
    tokenizer = tokenizers_by_family[family]
    marked = sample_sentences(
        {**ENCODED_CORPUS, "source": source, "path": str(corpus_file(tmp_path, source, encoding))}
    )[0]
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = sample_sentences(
        {**ENCODED_CORPUS, "source": source, "path": str(corpus_file(plain_dir, source, "utf-8"))}
    )[0]
    types = {}
    for name, table in (("marked", marked), ("plain", plain)):
        texts = sorted(table.column("text").to_pylist())
        types[name] = type_table(tokenizer, encode(tokenizer, texts).ids, word_marker(tokenizer))[0].tolist()
    assert types["marked"] == types["plain"]
    assert not any("\ufeff" in t or "ï»¿" in t for t in types["marked"])
