"""Token types strip the tokenizer's own word-boundary marker, and give the core paper's types. Encoding
(:func:`ctxvar.models.tokens.encode`) is the tokenizer's own: ``bos + tokenize + eos``, the Rust tokenizer's ids
for every chunk after the first, its ``split_special_tokens`` setting; a type table merges the ids of one key.

The reference is the core paper's published rule: Yamagiwa & Shimodaira's code, github.com/ymgw55/Norm-and-Variance
at commit 63e7b18c7a07564786d01470a48962c32275bfbc, ``src/save_token_stats.py`` (``main``, the loop over each
sentence's tokens). For a BERT model (name holding ``bert`` but not ``roberta``) a token that starts with ``##``
loses those two characters; for every other model (RoBERTa, GPT-2) a token that starts with ``Ġ`` loses that one
character. It strips once, and a token that is only the marker becomes ``''``. None of its models is a
SentencePiece one; for those the project's convention (shared paper-conventions, "Tokens") is the same rule with
``▁``. :func:`authors_types` below restates that rule; ctxvar names the types made only of the marker with one
marker more (``Ġ`` where the authors' code has ``''``, ``####`` where it has ``##``), which keeps every key
non-empty and the types themselves the same.
"""

from __future__ import annotations

import logging
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from ctxvar.config.hashes import TYPE_KEY_RULE, extraction_config_hash
from ctxvar.errors import StatisticsError
from ctxvar.files.atomic import write_json
from ctxvar.files.parquet import read_metadata
from ctxvar.models.tokens import (
    encode,
    python_tokenizer_marker,
    rust_encoder,
    spec_marker,
    type_key,
    type_marker,
    type_table,
    word_marker,
)
from ctxvar.stats.merge import check_same_run

# Markdown headings, hashtags, runs of '#', and the markers' own characters written in the text.
TEXTS = [
    "# heading one",
    "## second heading with running",
    "### third level ### and ####",
    "#### fourth ######## eight hashes ##",
    "a #hashtag and ##ing and ###ing are tags",
    "the markers Ġ and ▁ in text : Ġing ▁ing ĠĠ ▁▁ ## ###",
    "double  spaces   and    more  # #",
    "singing ringing bringing thing ##ing",
] * 3

OLD_GLOBAL_MARKERS = ("##", "Ġ", "▁")  # the rule before: any of these stripped from every tokenizer's tokens


def authors_types(tokens: list[str], prefix: str) -> Counter:
    """n_t per type under the authors' rule (see the module docstring): one leading ``prefix`` dropped."""
    return Counter(token[len(prefix) :] if token.startswith(prefix) else token for token in tokens)


def as_ctxvar_names(types: Counter, marker: str) -> Counter:
    """The authors' types under ctxvar's names: a key made only of the marker ('' included) gains one marker."""
    renamed = Counter(
        {marker + key if key == marker * (len(key) // len(marker)) else key: n for key, n in types.items()}
    )
    assert len(renamed) == len(types), "the renaming must keep types apart"
    return renamed


def old_global_types(tokens: list[str]) -> Counter:
    """n_t per type under the former rule: the first of ##, Ġ, ▁ that leads a longer token, stripped."""

    def key(token):
        for marker in OLD_GLOBAL_MARKERS:
            if token.startswith(marker) and len(token) > len(marker):
                return token[len(marker) :]
        return token

    return Counter(map(key, tokens))


def ctxvar_types(tokenizer, texts) -> tuple[Counter, list[str]]:
    """n_t per type as extraction keys them, and the tokens ``[bos] + tokenize(s) + [eos]`` they count."""
    ids = encode(tokenizer, texts).ids
    types, index = type_table(tokenizer, ids, word_marker(tokenizer))
    return Counter(types[index].tolist()), tokenizer.convert_ids_to_tokens(ids.tolist())


# --- tokenizers built here with the tokenizers library ------------------------------------------------------------


def byte_level_bpe(texts, vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """Byte-level BPE as GPT-2's (deterministic: the whole byte alphabet is given)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.BPE(continuing_subword_prefix="", end_of_word_suffix=""))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|endoftext|>", eos_token="<|endoftext|>")


def wordpiece(texts, prefix: str = "##") -> PreTrainedTokenizerFast:
    """WordPiece over whitespace-split words, so that '#' runs stay in words; a written vocabulary: every
    character alone and after ``prefix``, the whole words below, and ``##``-looking and marker-looking pieces."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    characters = sorted({c for text in texts for c in text if not c.isspace()})
    pieces = ["##", "###", "####", "##ing", "Ġing", "▁ing", "sing", "ring", "heading", "hash"]
    continuing = [prefix + c for c in characters] + [prefix + "ing", prefix + "tag", prefix + "#"]
    vocab = dict.fromkeys(["[UNK]", "[CLS]", "[SEP]", "[PAD]", *characters, *pieces, *continuing])
    core = Tokenizer(
        models.WordPiece(
            {token: i for i, token in enumerate(vocab)}, unk_token="[UNK]", continuing_subword_prefix=prefix
        )
    )
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix=prefix)
    return PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]"
    )


def sentencepiece_unigram(texts) -> PreTrainedTokenizerFast:
    """SentencePiece-style: Unigram with the Metaspace pre-tokenizer and decoder (T5, XLM-R, ALBERT)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.Unigram())
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.train_from_iterator(
        texts, trainers.UnigramTrainer(vocab_size=120, special_tokens=["<s>", "</s>", "<unk>"], unk_token="<unk>")
    )
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def sentencepiece_bpe(texts) -> PreTrainedTokenizerFast:
    """SentencePiece-style BPE as Llama 2's tokenizer.json: no pre-tokenizer, the normalizer writes ▁ for spaces
    and the decoder turns ▁ back into spaces."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    core = Tokenizer(models.BPE(byte_fallback=True))
    core.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    core.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    core.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=150, special_tokens=["<s>", "</s>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


FAMILIES = {
    "byte-level bpe": (byte_level_bpe, "Ġ"),
    "wordpiece": (wordpiece, "##"),
    "wordpiece @@": (lambda texts: wordpiece(texts, "@@"), "@@"),
    "sentencepiece unigram": (sentencepiece_unigram, "▁"),
    "sentencepiece bpe": (sentencepiece_bpe, "▁"),
}


@pytest.fixture(scope="module")
def tokenizers_built():
    return {family: build(TEXTS) for family, (build, _) in FAMILIES.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_marker_is_read_from_the_tokenizer(tokenizers_built, family):
    assert word_marker(tokenizers_built[family]) == FAMILIES[family][1]


@pytest.mark.parametrize("family", FAMILIES)
def test_type_tables_are_the_authors(tokenizers_built, family):
    tokenizer, marker = tokenizers_built[family], FAMILIES[family][1]
    table, tokens = ctxvar_types(tokenizer, TEXTS)
    assert table == as_ctxvar_names(authors_types(tokens, marker), marker)
    assert "" not in table


def test_the_texts_hold_the_cases_that_matter(tokenizers_built):
    """Without these tokens the comparisons above could not tell the rules apart."""
    byte_level = ctxvar_types(tokenizers_built["byte-level bpe"], TEXTS)[1]
    assert any(t.lstrip("Ġ").startswith("##") for t in byte_level), "byte-level BPE: no token of '#' runs"
    assert "Ġ" in byte_level, "byte-level BPE: no bare marker"
    pieces = ctxvar_types(tokenizers_built["wordpiece"], TEXTS)[1]
    assert {"##", "###", "####", "##ing", "Ġing", "▁ing"} <= set(pieces)
    assert "▁" in ctxvar_types(tokenizers_built["sentencepiece unigram"], TEXTS)[1]


@pytest.mark.parametrize("family", ["byte-level bpe", "wordpiece", "wordpiece @@"])
def test_the_former_global_rule_gave_other_types(tokenizers_built, family):
    table, tokens = ctxvar_types(tokenizers_built[family], TEXTS)
    assert old_global_types(tokens) != table


def test_byte_level_hash_runs_are_their_own_types(tokenizers_built):
    tokenizer = tokenizers_built["byte-level bpe"]
    table, tokens = ctxvar_types(tokenizer, TEXTS)
    runs = [t for t in set(tokens) if len(t) > 2 and set(t) == {"#"}]
    assert runs, "the texts must give byte-level tokens of three or more '#'"
    assert all(run in table for run in runs)


def test_wordpiece_keys_by_its_own_prefix(tokenizers_built):
    table = ctxvar_types(tokenizers_built["wordpiece"], TEXTS)[0]
    assert {"ing", "#", "##", "####", "Ġing", "▁ing"} <= set(table)  # ##ing → ing, ### → #; ## and #### whole
    at = ctxvar_types(tokenizers_built["wordpiece @@"], TEXTS)[0]
    assert "##ing" in at and "ing" in at  # under @@, ##ing is a word of its own


def test_merge_markers_off_strips_none(tokenizers_built):
    tokenizer = tokenizers_built["byte-level bpe"]
    assert type_marker(tokenizer, merge_markers=False) is None
    assert type_marker(tokenizer, merge_markers=True) == "Ġ"
    ids = encode(tokenizer, TEXTS).ids
    types, index = type_table(tokenizer, ids, None)
    assert types[index].tolist() == tokenizer.convert_ids_to_tokens(ids.tolist())


# --- the marker from the tokenizers JSON and from Python tokenizers -----------------------------------------------


def spec_of(model, pre_tokenizer=None, decoder=None, normalizer=None) -> dict:
    import json

    from tokenizers import Tokenizer

    core = Tokenizer(model)
    for name, part in (("pre_tokenizer", pre_tokenizer), ("decoder", decoder), ("normalizer", normalizer)):
        if part is not None:
            setattr(core, name, part)
    return json.loads(core.to_str())


def test_spec_markers_of_each_kind(caplog):
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    assert (
        spec_marker(spec_of(models.WordPiece({"[UNK]": 0}, unk_token="[UNK]", continuing_subword_prefix="@@"))) == "@@"
    )
    assert spec_marker(spec_of(models.BPE(), decoder=decoders.WordPiece(prefix="%%"))) == "%%"
    assert spec_marker(spec_of(models.BPE(), pre_tokenizer=pre_tokenizers.Metaspace(replacement="_"))) == "_"
    assert spec_marker(spec_of(models.BPE(), normalizer=normalizers.Replace(" ", "▁"))) == "▁"
    sequence = pre_tokenizers.Sequence([pre_tokenizers.Digits(), pre_tokenizers.ByteLevel(use_regex=False)])
    assert spec_marker(spec_of(models.BPE(continuing_subword_prefix=""), pre_tokenizer=sequence)) == "Ġ"
    with caplog.at_level(logging.INFO, logger="ctxvar.models.tokens"):
        clip_like = spec_of(
            models.BPE(end_of_word_suffix="</w>"),
            pre_tokenizer=pre_tokenizers.Whitespace(),
            decoder=decoders.BPEDecoder(suffix="</w>"),
        )
        assert spec_marker(clip_like, "clip-like") is None
    assert "clip-like: its tokenizer writes no word-boundary marker; token types strip none" in caplog.text


def test_markers_that_disagree_take_the_models_with_a_warning(caplog):
    from tokenizers import models, pre_tokenizers

    spec = spec_of(models.WordPiece({"[UNK]": 0}, unk_token="[UNK]"), pre_tokenizer=pre_tokenizers.Metaspace())
    with caplog.at_level(logging.WARNING, logger="ctxvar.models.tokens"):
        assert spec_marker(spec, "mixed") == "##"
    assert "mixed: its tokenizer names several word-boundary markers ('##', '▁'); token types strip '##'" in caplog.text


def test_python_tokenizers_by_their_kind(caplog):
    assert python_tokenizer_marker(SimpleNamespace(sp_model=object()), "sp") == "▁"
    assert python_tokenizer_marker(SimpleNamespace(byte_encoder={32: "Ġ", 33: "!"}), "bpe") == "Ġ"
    assert python_tokenizer_marker(SimpleNamespace(wordpiece_tokenizer=object()), "wp") == "##"
    with caplog.at_level(logging.WARNING, logger="ctxvar.models.tokens"):
        assert word_marker(SimpleNamespace(name_or_path="odd")) is None
    assert "odd: SimpleNamespace has no tokenizers backend and no known word-boundary marker" in caplog.text


@pytest.mark.parametrize(
    "token, marker, key",
    [("Ġ", "Ġ", "Ġ"), ("ĠĠ", "Ġ", "ĠĠ"), ("ĠĠĠ", "Ġ", "ĠĠĠ"), ("ĠĠx", "Ġ", "Ġx"), ("##", "##", "##"),
     ("###", "##", "#"), ("####", "##", "####"), ("#####", "##", "###"), ("▁▁", "▁", "▁▁"), ("##ing", "Ġ", "##ing")],
)  # fmt: skip
def test_tokens_made_only_of_the_marker_keep_their_string(token, marker, key):
    assert type_key(token, marker) == key


def test_the_rule_these_cases_pin_is_the_one_the_hash_names():
    """A change to type_key's cases above is a new rule: give TYPE_KEY_RULE a new value with it, so that
    partials keyed by the old rule re-extract."""
    assert TYPE_KEY_RULE == "one leading copy of the tokenizer's own marker; tokens made only of the marker whole"


# --- the demo models, extraction metadata, and what re-extracts ---------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("arch, marker", [("bert", "##"), ("roberta", "Ġ"), ("gpt2", "Ġ")])
def test_demo_models_follow_their_own_marker(tiny_models, corpus_texts, arch, marker):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[arch])
    assert word_marker(tokenizer) == marker  # the authors' code: '##' for BERT, 'Ġ' for RoBERTa and GPT-2
    texts = corpus_texts + TEXTS
    table, tokens = ctxvar_types(tokenizer, texts)
    assert table == as_ctxvar_names(authors_types(tokens, marker), marker)


@pytest.mark.integration
def test_extraction_records_the_marker_and_counts_the_authors_types(tmp_path, tiny_models, corpus_texts):
    from support.pipeline_runs import run_pipeline

    texts = corpus_texts[:40] + TEXTS
    tokens = run_pipeline(tmp_path, tiny_models["gpt2"], texts, 1, "tiny-gpt2")[0]
    assert read_metadata(tmp_path / "stats.parquet")["type_marker"] == "Ġ"
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["gpt2"])
    expected = as_ctxvar_names(authors_types(ctxvar_types(tokenizer, texts)[1], "Ġ"), "Ġ")
    layer0 = tokens[tokens["layer"] == 0]
    assert dict(zip(layer0["token"], layer0["n"])) == dict(expected)


def test_partials_of_another_marker_do_not_merge(tmp_path):
    metadata = {"model_id": "m", "type_marker": "Ġ"}
    with pytest.raises(StatisticsError, match="differs from .* in type_marker \\('Ġ' vs None\\)"):
        check_same_run(str(tmp_path / "new.parquet"), metadata, "the sums", {"model_id": "m"})


def test_the_type_key_rule_is_part_of_the_extraction_hash(monkeypatch):
    from support.workflow_runs import DEMO

    model = DEMO["models"][0]
    before = extraction_config_hash(DEMO, model, [])
    monkeypatch.setattr("ctxvar.config.hashes.TYPE_KEY_RULE", "another rule")
    assert extraction_config_hash(DEMO, model, []) != before


def test_models_table_names_the_marker(tmp_path):
    from ctxvar.stats.summary import models_table

    write_json({"model_name": "m", "type_marker": "Ġ", "weights_sha256": "a"}, tmp_path / "run.json")
    assert models_table({"m": str(tmp_path / "run.json")}).loc[0, "type_marker"] == "Ġ"


@pytest.mark.parametrize(
    "token, marker, merged",
    [
        ("##ing", "##", "ing"),
        ("Ġthe", "Ġ", "the"),
        ("▁the", "▁", "the"),
        ("the", "Ġ", "the"),
        ("##", "##", "##"),
        ("Ġ", "Ġ", "Ġ"),
        ("ĠĠ", "Ġ", "ĠĠ"),
        ("ĠĠthe", "Ġ", "Ġthe"),
        ("###", "##", "#"),
        ("###", "Ġ", "###"),
        ("▁the", "Ġ", "▁the"),
        ("[CLS]", "##", "[CLS]"),
    ],
)
def test_type_key_strips_one_leading_copy_of_the_marker_given(token, marker, merged):
    assert type_key(token, marker) == merged
    assert type_key(token, None) == token


@pytest.mark.parametrize(
    "arch, bos, eos",
    [("bert", "[CLS]", "[SEP]"), ("roberta", "<s>", "</s>"), ("gpt2", "<|endoftext|>", "<|endoftext|>")],
)
def test_encode_is_bos_tokenize_eos(tiny_models, corpus_texts, arch, bos, eos):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[arch])
    texts = corpus_texts[:20]
    encoded = encode(tokenizer, texts, chunk=7)
    for i, text in enumerate(texts):
        expected = tokenizer.convert_tokens_to_ids([bos, *tokenizer.tokenize(text), eos])
        assert encoded.ids[encoded.offsets[i] : encoded.offsets[i + 1]].tolist() == expected


@pytest.mark.parametrize("arch", ["bert", "roberta", "gpt2"])
def test_the_chunks_after_the_first_give_transformers_ids_from_the_rust_tokenizer(tiny_models, corpus_texts, arch):
    """Texts with the tokenizer's own special tokens written out, stray spaces, other scripts and an empty one,
    in chunks of 7: the Rust tokenizer alone gives each chunk what transformers' call gives it."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[arch])
    specials = " ".join(tokenizer.all_special_tokens)
    texts = [*corpus_texts[:30], f"a {specials} b", "  two  spaces ", "naïve café 東京 🙂", "", "x" * 300]
    called = tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    fast = rust_encoder(tokenizer, texts[:7], called[:7])
    assert fast is not None and fast(texts) == called
    chunked, whole = encode(tokenizer, texts, chunk=7), encode(tokenizer, texts, chunk=len(texts))
    assert np.array_equal(chunked.ids, whole.ids) and np.array_equal(chunked.offsets, whole.offsets)
    assert rust_encoder(tokenizer, texts[:7], [ids[::-1] or [0] for ids in called[:7]]) is None  # ids disagree


def test_a_tokenizer_that_splits_special_tokens_is_called_with_its_setting(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["gpt2"], split_special_tokens=True)
    texts = ["before <|endoftext|> after"] * 3
    called = tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    assert tokenizer.convert_tokens_to_ids("<|endoftext|>") not in called[0]  # split into its characters' tokens
    assert rust_encoder(tokenizer, texts[:1], called[:1])(texts) == called


def test_ties_and_custom_parts_of_a_tokenizer_give_the_calls_ids():
    """Two added tokens that normalize to one text (which one wins is the tokenizer object's own, not a copy's) and
    a pre-tokenizer in Python (which no copy can serialize)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4}
    core = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    core.normalizer, core.pre_tokenizer = normalizers.Lowercase(), pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, cls_token="[CLS]", sep_token="[SEP]", unk_token="[UNK]")
    tokenizer.add_tokens(["Hello", "hello"])
    texts = ["world", "hello", "Hello world"] * 3
    called = encode(tokenizer, texts, chunk=len(texts)).ids
    assert all(np.array_equal(encode(tokenizer, texts, chunk=1).ids, called) for _ in range(10))

    class Halves:
        def pre_tokenize(self, pretok):
            pretok.split(lambda _, piece: [piece[: len(str(piece)) // 2], piece[len(str(piece)) // 2 :]])

    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.PreTokenizer.custom(Halves())
    assert np.array_equal(encode(tokenizer, texts, chunk=1).ids, encode(tokenizer, texts, chunk=len(texts)).ids)


def test_type_table_merges_ids_with_the_same_key(tiny_models, corpus_texts):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["bert"])
    encoded = encode(tokenizer, corpus_texts)
    types, index = type_table(tokenizer, encoded.ids, word_marker(tokenizer))
    keys = [type_key(t, "##") for t in tokenizer.convert_ids_to_tokens(encoded.ids.tolist())]
    assert list(types) == sorted(set(keys))
    assert [types[i] for i in index] == keys
    assert any(t.startswith("##") for t in tokenizer.convert_ids_to_tokens(encoded.ids.tolist())), (
        "test needs ## tokens"
    )
