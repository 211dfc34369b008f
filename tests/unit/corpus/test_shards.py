"""Sharding the corpus (ctxvar.corpus.shards): shards balanced by cost and every planned batch whole in one shard, the
batch plan the same for any shard count, every shard busy when the corpus has as many sentences, and the warnings about
the shard count: an empty corpus gets one line, from the sampling, and no warning to "set shards: 1" before it (shards
was already 1, and no shard count helps a corpus with no sentence), and a corpus with fewer sentences than shards is
named at start-up, from its lines before it is sampled and from its exact count after."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxvar.corpus.sentences import write_sentences
from ctxvar.corpus.shards import (
    MIN_BATCHES,
    assign_shards,
    deal_batches,
    fewer_sentences_warning,
    plan_batches,
    split_corpus,
    start_up_warning,
)
from ctxvar.files.parquet import write_table
from ctxvar.models.batching import padding_fraction

from .test_sentences import BASE  # the corpus settings the sampling tests start from
from support.workflow_runs import DEMO


def test_an_empty_source_gets_no_shards_warning(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("")
    corpus = {"source": "text", "path": str(path), "fraction": 1.0, "sampling": "paper", "text_column": "text"}
    assert start_up_warning(corpus, tmp_path / "sentences.parquet", 1) is None
    assert fewer_sentences_warning(0, 4, at_most=True) is None


def test_fewer_sentences_than_shards_still_warn():
    assert "set shards: 2" in fewer_sentences_warning(2, 4)


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


def test_shards_partition_the_sentences_in_whole_planned_batches(tmp_path, tiny_models):
    from ctxvar.extraction.shard import chunk_batches, read_shard
    from ctxvar.models.batching import BATCH_TOKENS
    from ctxvar.models.loading import load_tokenizer
    from ctxvar.models.tokens import encode

    corpus = {**BASE, "source": "synthetic", "max_words": 63}
    write_sentences(corpus, tmp_path / "s.parquet", tmp_path / "c.json")
    paths = [tmp_path / f"{i}.parquet" for i in range(3)]
    split_corpus(tmp_path / "s.parquet", paths, {"id": "m"}, tiny_models["bert"])
    ids = [pq.read_table(p).column("sentence_id").to_pylist() for p in paths]
    chunks = [set(pq.read_table(p).column("chunk").to_pylist()) for p in paths]
    assert not (chunks[0] & chunks[1]) and not (chunks[1] & chunks[2]) and not (chunks[0] & chunks[2])
    sampled = pq.read_table(tmp_path / "s.parquet").column("sentence_id").to_pylist()
    assert sorted(sum(ids, [])) == sorted(sampled)
    position = {sentence: i for i, sentence in enumerate(sampled)}
    assert all(ids) and all(np.all(np.diff([position[i] for i in shard]) > 0) for shard in ids), (
        "every shard gets sentences, in sample order"
    )
    tokenizer = load_tokenizer({"id": "m"}, tiny_models["bert"])
    for path, planned in zip(paths, chunks):  # extraction runs each planned batch as one batch
        encoded, chunk, _ = read_shard(path, tokenizer)
        assert len(chunk_batches(encoded.lengths, chunk, BATCH_TOKENS)) == len(planned)
        again = encode(tokenizer, pq.read_table(path).column("text").to_pylist())  # the ids are the tokenizer's
        np.testing.assert_array_equal(encoded.ids, again.ids)
        np.testing.assert_array_equal(encoded.offsets, again.offsets)


@pytest.mark.parametrize(
    "lines, fraction, expected",
    [
        (
            ["a b", "", "c d e"],
            1.0,
            "the corpus has at most 3 sentence(s), fewer than shards: 8, so at least 5 shard(s)",
        ),
        (["a b"] * 20, 0.2, "the corpus has at most 4 sentence(s), fewer than shards: 8"),
        (["a b"] * 8, 1.0, None),
    ],
)
def test_a_text_corpus_with_fewer_lines_than_shards_is_named_at_start_up(tmp_path, lines, fraction, expected):
    path = tmp_path / "few.txt"
    path.write_text("\n".join(lines), encoding="utf-16")  # lines counted after decoding, not as bytes
    corpus = {**DEMO["corpus"], "source": "text", "path": str(path), "fraction": fraction}
    warning = start_up_warning(corpus, tmp_path / "not-sampled-yet.parquet", 8)
    assert warning is None if expected is None else expected in warning


def test_the_sampled_corpus_gives_the_exact_count_at_start_up(tmp_path):
    write_table(pa.table({"text": ["a b"] * 5}), tmp_path / "sentences.parquet")
    parquet = tmp_path / "source.parquet"
    write_table(pa.table({"text": ["a b"] * 100}), parquet)
    corpus = {**DEMO["corpus"], "source": "parquet", "path": str(parquet)}
    assert start_up_warning(corpus, tmp_path / "sentences.parquet", 8).startswith(
        "shards: the corpus has 5 sentence(s), fewer than shards: 8, so 3 shard(s) get none"
    )
    assert start_up_warning(corpus, tmp_path / "not-sampled-yet.parquet", 8) is None  # 100 rows in the source
    assert start_up_warning({**corpus, "source": "hf", "name": "x"}, tmp_path / "nothing.parquet", 8) is None
