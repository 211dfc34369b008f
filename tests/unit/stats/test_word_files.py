"""The files of the sums for Ethayarajh's measures (ctxvar.stats.word_files): words and sentences files read back as
written, a layer at a time; words add over the union of their ids, and two spellings of one id are refused; sentence
sums add; a sentences layer without rows is refused."""

from __future__ import annotations

import numpy as np
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.stats.sums import LayerWriter
from ctxvar.stats.word_files import (
    LayerSentences,
    LayerWords,
    SentencesFile,
    WordsFile,
    add_words,
    sentences_schema,
    words_schema,
)


def test_words_add_over_the_union_of_ids():
    a = LayerWords(0, np.array([1, 4]), np.array(["a", "d"], dtype=object), np.array([2, 1]), np.ones((2, 2)))
    b = LayerWords(0, np.array([2, 4]), np.array(["b", "d"], dtype=object), np.array([3, 5]), np.full((2, 2), 2.0))
    total = add_words([a, b])
    np.testing.assert_array_equal(total.ids, [1, 2, 4])
    assert list(total.tokens) == ["a", "b", "d"]
    np.testing.assert_array_equal(total.count, [2, 3, 6])
    np.testing.assert_array_equal(total.sum_unit[:, 0], [1, 2, 3])


def test_two_spellings_of_one_token_id_are_refused():
    a = LayerWords(0, np.array([4]), np.array(["d"], dtype=object), np.array([1]), np.ones((1, 2)))
    b = LayerWords(0, np.array([4]), np.array(["Ġd"], dtype=object), np.array([1]), np.ones((1, 2)))
    with pytest.raises(StatisticsError, match="spell a token id differently"):
        add_words([a, b])


def test_words_and_sentences_files_read_back_as_written_and_sentence_sums_add(tmp_path):
    metadata = {"n_layers": 2, "d": 3}
    rng = np.random.default_rng(0)
    words = [
        LayerWords(layer, np.array([3, 8]), np.array(["a", "b"], object), np.array([2, 5]), rng.normal(size=(2, 3)))
        for layer in range(2)
    ]
    sentences = [LayerSentences(layer, 7, 1.5 + layer, 0.25, rng.normal(size=3)) for layer in range(2)]
    with LayerWriter(tmp_path / "0.words.parquet", words_schema(3, metadata)) as writer:
        for part in words:
            writer.write(part.to_table(writer.schema))
    with LayerWriter(tmp_path / "0.sentences.parquet", sentences_schema(metadata)) as writer:
        for part in sentences:
            writer.write(part.to_table(writer.schema))
    for layer in range(2):
        read = WordsFile(tmp_path / "0.words.parquet").layer(layer)
        np.testing.assert_array_equal(read.ids, [3, 8])
        assert list(read.tokens) == ["a", "b"] and list(read.count) == [2, 5]
        np.testing.assert_array_equal(read.sum_unit, words[layer].sum_unit)
        summed = SentencesFile(tmp_path / "0.sentences.parquet").layer(layer) + sentences[layer]
        assert (summed.layer, summed.n_contexts, summed.sum_mean_unit_sq) == (layer, 14, 0.5)
        assert summed.intra_sum == 2 * (1.5 + layer)
        np.testing.assert_array_equal(summed.sum_mean_unit, 2 * sentences[layer].sum_mean_unit)


def test_a_sentences_layer_without_rows_is_refused(tmp_path):
    schema = sentences_schema({"n_layers": 1, "d": 3})
    with LayerWriter(tmp_path / "0.sentences.parquet", schema) as writer:
        writer.write(schema.empty_table())
    with pytest.raises(StatisticsError, match="layer 0 holds no rows; delete it and re-run"):
        SentencesFile(tmp_path / "0.sentences.parquet").layer(0)
