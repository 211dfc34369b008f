"""Unit tier: the sums for Ethayarajh's measures (ctxvar.extraction.word_sums) against numpy on synthetic batches,
their files, and their merge."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctxvar.extraction.accumulator import EmbeddingSums, GeometryOptions
from ctxvar.extraction.budget import batch_bytes, state_bytes
from ctxvar.extraction.word_sums import word_table
from ctxvar.run.disk import sums_bytes, words_files_bytes
from ctxvar.run.resources import ModelShape
from ctxvar.stats.ethayarajh import ethayarajh_metrics, is_punctuation
from ctxvar.stats.word_files import LayerSentences, LayerWords

D, N_HIDDEN = 6, 3
LAYERS = [0, 2]


def synthetic_batch(rng, lengths, width, vocab=9):
    """A right-padded batch of sequences of ``lengths`` (each [bos] inner [eos]): hidden states (n_hidden of
    (B, T, d)), the real tokens' flat positions, raw ids and per-sequence rows."""
    hidden = [torch.from_numpy(rng.standard_normal((len(lengths), width, D)) + 0.5) for _ in range(N_HIDDEN)]
    positions = np.concatenate([row * width + np.arange(n) for row, n in enumerate(lengths)])
    ids = np.concatenate([[100, *rng.integers(0, vocab, n - 2), 101] for n in lengths])
    row = np.repeat(np.arange(len(lengths)), lengths)
    return hidden, positions, ids, row


def brute_force(batches, word_ids):
    """Per layer: n_w, Σu_w over inner tokens, and the sentence sums, by loops over sentences."""
    out = {
        layer: {"sum_unit": np.zeros((len(word_ids), D)), "intra": 0.0, "mean_unit": np.zeros(D), "sq": 0.0}
        for layer in LAYERS
    }
    count, contexts = np.zeros(len(word_ids), np.int64), 0
    for hidden, positions, ids, row in batches:
        for sentence in np.unique(row):
            member = np.flatnonzero(row == sentence)[1:-1]  # the boundary tokens left out
            if len(member) == 0:
                continue
            contexts += 1
            np.add.at(count, np.searchsorted(word_ids, ids[member]), 1)
            for layer in LAYERS:
                x = hidden[layer].reshape(-1, D).numpy()[positions[member]]
                u = x / np.linalg.norm(x, axis=1, keepdims=True)
                m = x.sum(0)
                part = out[layer]
                np.add.at(part["sum_unit"], np.searchsorted(word_ids, ids[member]), u)
                part["intra"] += np.mean(u @ m / np.linalg.norm(m))
                part["mean_unit"] += u.mean(0)
                part["sq"] += u.mean(0) @ u.mean(0)
    return count, contexts, out


@pytest.mark.parametrize("cosine", [False, True])
def test_word_sums_match_brute_force(cosine):
    rng = np.random.default_rng(3)
    batches = [synthetic_batch(rng, [7, 5, 2, 4], 8), synthetic_batch(rng, [9, 3], 9)]
    all_ids = np.concatenate([b[2] for b in batches])
    offsets = np.r_[0, np.cumsum(np.concatenate([[7, 5, 2, 4], [9, 3]]))]
    word_ids, word_index = word_table(all_ids, offsets)
    assert 100 not in word_ids and 101 not in word_ids
    options = GeometryOptions(cosine=cosine, ethayarajh=True)
    sums = EmbeddingSums(
        LAYERS, N_HIDDEN, n_types=20, d=D, device=torch.device("cpu"), options=options, n_words=len(word_ids)
    )
    start = 0
    for hidden, positions, ids, _ in batches:
        index = torch.from_numpy(word_index[start : start + len(ids)])
        sums.accumulate(hidden, torch.from_numpy(positions), torch.from_numpy(ids % 20), word_index=index)
        start += len(ids)
    got = sums.words.to_numpy(lambda t: t.numpy())
    count, contexts, expected = brute_force(batches, word_ids)
    np.testing.assert_array_equal(got["count"], count)
    assert int(got["n_contexts"]) == contexts == 5  # the sequence of length 2 has no inner token
    for i, layer in enumerate(LAYERS):
        np.testing.assert_allclose(got["sum_unit"][i], expected[layer]["sum_unit"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["intra_sum"][i], expected[layer]["intra"], rtol=1e-12)
        np.testing.assert_allclose(got["sum_mean_unit"][i], expected[layer]["mean_unit"], rtol=1e-12)
        np.testing.assert_allclose(got["sum_mean_unit_sq"][i], expected[layer]["sq"], rtol=1e-12)


def test_word_table_leaves_out_each_sequences_first_and_last_token():
    ids = np.array([5, 1, 2, 6, 5, 2, 6, 5, 6])  # sequences [5 1 2 6], [5 2 6], [5 6]
    word_ids, word_index = word_table(ids, np.array([0, 4, 7, 9]))
    np.testing.assert_array_equal(word_ids, [1, 2])
    np.testing.assert_array_equal(word_index, [-1, 0, 1, -1, -1, 1, -1, -1, -1])


def test_punctuation_is_spacy_is_punct_on_the_marker_stripped_token():
    assert is_punctuation(",", None) and is_punctuation("Ġ,", "Ġ") and is_punctuation("##.", "##")
    assert is_punctuation("...", "Ġ") and not is_punctuation("Ġ,", "##")  # another family's marker stays
    assert not any(is_punctuation(token, "##") for token in ("##s", "the", "a.", "$"))


def test_metrics_of_known_sums():
    """Two contexts with ū = e₁ and ū = e₂: baseline 0; a word seen 5 times, always the same direction: 1."""
    words = LayerWords(
        0,
        np.array([1, 2, 3]),
        np.array(["x", ",", "y"], dtype=object),
        np.array([5, 9, 4]),
        np.array([[5.0, 0], [9.0, 0], [4.0, 0]]),
    )
    sentences = LayerSentences(0, 2, 1.5, 2.0, np.array([1.0, 1.0]))
    got = ethayarajh_metrics(words, sentences, None)
    assert got["ethayarajh_n_words"] == 1  # "," is punctuation, "y" has n < 5
    assert got["ethayarajh_self_similarity"] == pytest.approx(1.0)
    assert got["ethayarajh_anisotropy_baseline"] == pytest.approx(0.0)
    assert got["ethayarajh_intra_sentence_similarity"] == pytest.approx(0.75)


def test_memory_estimates_count_the_word_sums():
    plain, words = GeometryOptions(cosine=True), GeometryOptions(cosine=True, ethayarajh=True)
    assert state_bytes(13, 1000, 768, words, n_words=1500) - state_bytes(13, 1000, 768, plain) >= 8 * 1500 * 13 * 768
    assert batch_bytes(13, 4096, 768, words) > batch_bytes(13, 4096, 768, plain)


def test_the_disk_estimate_counts_the_words_and_sentences_files():
    shape = ModelShape(n_layers=13, d=768, vocab_size=30_000)
    geometry = {"cosine": True, "covariance": True, "twonn": False, "sample_size": 0, "ethayarajh": False}
    extra = sums_bytes(10**6, shape, {**geometry, "ethayarajh": True}) - sums_bytes(10**6, shape, geometry)
    assert extra == words_files_bytes(30_000, shape) >= 30_000 * 13 * 768 * 8 + 13 * 768 * 8 * 4
