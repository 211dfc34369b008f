"""Batches of a shard (ctxvar.models.batching): token-budget batches sorted by length and within the budget, padded
batches that place tokens and types, padded up front as each batch alone and moved to a device once, and the
sampled tokens located in every batch at once."""

import numpy as np
import torch

from ctxvar.extraction.accumulator import PointSample
from ctxvar.models.batching import pad_batch, pad_batches, padding_fraction, token_budget_batches


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


def test_padded_batches_move_to_a_device_once_for_every_pass():
    encoded, type_index = random_shard(50)
    flat = pad_batches(encoded, type_index, token_budget_batches(encoded.lengths, batch_tokens=128), pad_id=0)
    first = flat.to("cpu")
    assert flat.to("cpu") is first
    assert flat.device_bytes() == 16 * (len(flat.input_ids) + len(flat.positions))
