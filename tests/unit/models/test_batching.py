import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from ctxvar.corpus.shards import MIN_BATCHES, assign_shards, deal_batches, plan_batches
from ctxvar.extraction.accumulator import PointSample
from ctxvar.models.batching import pad_batch, pad_batches, padding_fraction, token_budget_batches
from ctxvar.models.tokens import encode, rust_encoder, type_key, type_table, word_marker


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


def test_token_budget_batches_sorted_and_within_budget():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, size=500)
    batches = token_budget_batches(lengths, batch_tokens=256)
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    for batch in batches:
        assert len(batch) * lengths[batch].max() <= 256
    longest = [lengths[b].max() for b in batches]
    assert longest == sorted(longest, reverse=True)
    assert 0 <= padding_fraction(lengths, batches) < 0.1


def test_a_sentence_longer_than_the_budget_gets_its_own_batch():
    assert [b.tolist() for b in token_budget_batches(np.array([5, 50, 5]), batch_tokens=10)] == [[1], [0, 2]]


def test_pad_batch_places_tokens_and_types():
    from ctxvar.models.tokens import EncodedShard

    encoded = EncodedShard(ids=np.array([10, 11, 12, 20, 21, 30, 31, 32, 33]), offsets=np.array([0, 3, 5, 9]))
    type_index = encoded.ids % 10
    batch = pad_batch(encoded, type_index, np.array([2, 1]), pad_id=0)
    assert batch.input_ids.tolist() == [[30, 31, 32, 33], [20, 21, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch.input_ids.reshape(-1)[batch.positions].tolist() == [30, 31, 32, 33, 20, 21]
    assert batch.type_index.tolist() == [0, 1, 2, 3, 0, 1]


def random_shard(n_sequences: int, seed: int = 0):
    from ctxvar.models.tokens import EncodedShard

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 40, size=n_sequences)
    encoded = EncodedShard(ids=rng.integers(5, 1000, size=lengths.sum()), offsets=np.r_[0, np.cumsum(lengths)])
    return encoded, rng.integers(0, 50, size=lengths.sum())


def test_batches_padded_up_front_are_each_batch_padded_alone():
    encoded, type_index = random_shard(300)
    batches = token_budget_batches(encoded.lengths, batch_tokens=256)
    flat = pad_batches(encoded, type_index, batches, pad_id=1)
    assert len(flat) == len(batches) > 10 and flat.grid[-1] == sum(len(b) * encoded.lengths[b].max() for b in batches)
    for rows, on_device, b in zip(batches, flat.to("cpu"), range(len(batches))):
        alone = pad_batch(encoded, type_index, rows, pad_id=1)
        np.testing.assert_array_equal(on_device.input_ids.numpy(), alone.input_ids)
        np.testing.assert_array_equal(on_device.attention_mask.numpy(), alone.attention_mask)
        np.testing.assert_array_equal(on_device.positions.numpy(), alone.positions)
        np.testing.assert_array_equal(on_device.type_index.numpy(), alone.type_index)
        np.testing.assert_array_equal(flat.tokens[flat.real[b] : flat.real[b + 1]], alone.tokens)


def test_sampled_tokens_are_located_in_every_batch_at_once():
    encoded, type_index = random_shard(200, seed=1)
    flat = pad_batches(encoded, type_index, token_budget_batches(encoded.lengths, batch_tokens=128), pad_id=0)
    sample_tokens = np.random.default_rng(2).choice(len(encoded.ids), size=60, replace=False)
    sample = PointSample(1, 4, torch.device("cpu"), sample_tokens)
    located = sample.locate(flat.tokens, flat.real)
    assert len(located) == len(flat) and None in located, "some batches must hold no sampled token"
    found = {}
    for b, hits in enumerate(located):
        if hits is not None:
            slots, index = (t.numpy() for t in hits)
            batch_tokens = flat.tokens[flat.real[b] : flat.real[b + 1]]
            found.update(zip(slots.tolist(), batch_tokens[index].tolist()))
    assert found == dict(enumerate(sample_tokens.tolist())), "every sampled token once, in its own slot"


def test_shards_balanced_by_cost_and_deterministic():
    rng = np.random.default_rng(1)
    cost = rng.integers(5, 400, size=10_001)
    shard = assign_shards(cost, 8)
    totals = np.bincount(shard, weights=cost, minlength=8)
    assert totals.max() - totals.min() <= cost.max()
    assert np.array_equal(shard, assign_shards(cost, 8))
    assert set(np.bincount(shard)) <= {1250, 1251}


def test_more_shards_than_items_leaves_empty_shards():
    assert np.bincount(assign_shards(np.array([3, 1]), 4), minlength=4).tolist() == [1, 1, 0, 0]


def zipf_like_lengths(n: int, seed: int = 0) -> np.ndarray:
    """Token lengths like a corpus's: log-normal around 20, 2 to 200."""
    return np.clip(np.random.default_rng(seed).lognormal(np.log(20), 0.6, n).astype(int), 2, 200)


def test_the_batch_plan_is_the_same_for_any_shard_count_up_to_32():
    lengths = zipf_like_lengths(5000)
    one = plan_batches(lengths, 1)
    assert len(one) >= MIN_BATCHES
    for n_shards in (3, 8, 32):
        assert [b.tolist() for b in plan_batches(lengths, n_shards)] == [b.tolist() for b in one]


@pytest.mark.parametrize("n_sentences", [8, 9, 50, 65, 129, 300, 2500, 50_000])
@pytest.mark.parametrize("n_shards", [3, 8, 40])
def test_every_shard_gets_a_batch_when_the_corpus_has_as_many_sentences(n_sentences, n_shards):
    lengths = zipf_like_lengths(n_sentences, seed=n_sentences)
    lengths[0] = 50 * lengths.sum() // n_sentences  # one very long sentence: the token budget alone would not do
    batches = plan_batches(lengths, n_shards)
    assert sorted(np.concatenate(batches).tolist()) == list(range(n_sentences))
    shards = deal_batches(lengths, batches, n_shards)
    assert (np.bincount(shards, minlength=n_shards) > 0).sum() == min(n_sentences, n_shards)


def test_batches_stay_within_the_token_budget_and_shards_within_one_batch_of_each_other():
    lengths = zipf_like_lengths(50_000, seed=1)
    batches = plan_batches(lengths, 8, batch_tokens=4096)
    padded = np.array([len(b) * lengths[b].max() for b in batches])
    assert padded.max() <= 4096 and len(batches) > 200
    totals = np.bincount(deal_batches(lengths, batches, 8), weights=padded)
    assert totals.max() - totals.min() <= padded.max() and totals.max() <= 1.05 * totals.mean()
    assert padding_fraction(lengths, batches) < 0.05


def test_padded_batches_move_to_a_device_once_for_every_pass():
    encoded, type_index = random_shard(50)
    flat = pad_batches(encoded, type_index, token_budget_batches(encoded.lengths, batch_tokens=128), pad_id=0)
    first = flat.to("cpu")
    assert flat.to("cpu") is first
    assert flat.device_bytes() == 16 * (len(flat.input_ids) + len(flat.positions))
