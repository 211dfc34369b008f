"""Integration tier: Ethayarajh's measures (geometry.ethayarajh) on tiny models against a reference written from
his published code (tests/support/ethayarajh_reference.py), every embedding in memory, and 1 shard against 3."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.models.tokens import boundary_tokens, type_key
from ctxvar.stats.declarations import layer_columns
from ctxvar.stats.ethayarajh import ETHAYARAJH_COLUMNS
from ctxvar.stats.geometry import geometry_table
from ctxvar.stats.word_files import SentencesFile, WordsFile

from support.ethayarajh_reference import anisotropy_baseline, intra_sentence_similarity, self_similarity
from support.pipeline_runs import run_geometry_pipeline

RTOL = 1e-6
COSINE = {"bert": True, "gpt2": False}  # both ways of making the unit rows: with Σ x/‖x‖ per type, and without


def run_ethayarajh(tmp, model_dir, texts, n_shards, cosine):
    """Shard, extract the sums, merge them as the workflow does; return (geometry table, merged files)."""
    options = GeometryOptions(cosine=cosine, ethayarajh=True)
    outputs = run_geometry_pipeline(tmp, model_dir, texts, n_shards, options)
    table = geometry_table(
        outputs["stats"], None, None, 3, 0, 1, 5, words_path=outputs["words"], sentences_path=outputs["sentences"]
    )
    return table, outputs


def contexts_of(model_dir, texts, arch):
    """Per text: its inner token ids, the strings the punctuation rule reads, and hidden states (L, n, d)
    without the boundary tokens, one forward pass per sentence. His BERT words are wordpieces as spelled
    (## kept); his GPT-2 words are spaCy tokens, which carry no Ġ."""
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()
    bos, eos = boundary_tokens(tokenizer)
    contexts = []
    with torch.no_grad():
        for text in texts:
            inner = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
            if not inner:
                continue
            hidden = model(torch.tensor([[bos, *inner, eos]]), output_hidden_states=True).hidden_states
            strings = tokenizer.convert_ids_to_tokens(inner)
            spelled = strings if arch == "bert" else [type_key(s, "Ġ") for s in strings]
            contexts.append((inner, spelled, torch.stack(hidden)[:, 0, 1:-1].double().numpy()))
    return contexts


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def contexts(tiny_models, corpus_texts, arch):
    """:func:`contexts_of` the module's model, computed once for the tests that read it (read-only)."""
    return contexts_of(tiny_models[arch], corpus_texts, arch)


@pytest.fixture(scope="module")
def one_shard(tmp_path_factory, tiny_models, corpus_texts, arch):
    return run_ethayarajh(tmp_path_factory.mktemp(f"eth1-{arch}"), tiny_models[arch], corpus_texts, 1, COSINE[arch])


@pytest.fixture(scope="module")
def three_shards(tmp_path_factory, tiny_models, corpus_texts, arch):
    return run_ethayarajh(tmp_path_factory.mktemp(f"eth3-{arch}"), tiny_models[arch], corpus_texts, 3, COSINE[arch])


def test_columns_equal_the_reference_from_his_code(one_shard, contexts):
    table, _ = one_shard
    for layer in range(len(table)):
        expected = {
            "ethayarajh_self_similarity": self_similarity(contexts, layer),
            "ethayarajh_intra_sentence_similarity": intra_sentence_similarity(contexts, layer),
            "ethayarajh_anisotropy_baseline": anisotropy_baseline(contexts, layer),
        }
        expected["ethayarajh_self_similarity_adjusted"] = (
            expected["ethayarajh_self_similarity"] - expected["ethayarajh_anisotropy_baseline"]
        )
        expected["ethayarajh_intra_sentence_similarity_adjusted"] = (
            expected["ethayarajh_intra_sentence_similarity"] - expected["ethayarajh_anisotropy_baseline"]
        )
        for name, value in expected.items():
            np.testing.assert_allclose(table.loc[layer, name], value, rtol=RTOL, err_msg=f"layer {layer} {name}")
    assert table["ethayarajh_n_words"].min() > 10, "too few words: the self-similarity test would be weak"
    assert table["ethayarajh_anisotropy_baseline"].std() > 0, "metrics constant: the test would be blind"


def test_the_sums_equal_brute_force(one_shard, contexts):
    """n_w, Σu_w per raw id and the sentence sums, from every embedding (one forward pass per sentence: fp32
    differs from the padded batches' in the 7th digit, hence 1e-6 of the largest entry)."""
    _, files = one_shard
    ids = np.concatenate([np.asarray(words) for words, _, _ in contexts])
    words, sentences = WordsFile(files["words"]), SentencesFile(files["sentences"])
    for layer in range(contexts[0][2].shape[0]):
        x = np.concatenate([h[layer] for _, _, h in contexts])
        unit = x / np.linalg.norm(x, axis=1, keepdims=True)
        got = words.layer(layer)
        np.testing.assert_array_equal(got.ids, np.unique(ids))
        np.testing.assert_array_equal(got.count, np.bincount(np.searchsorted(got.ids, ids)))
        expected = np.zeros_like(got.sum_unit)
        np.add.at(expected, np.searchsorted(got.ids, ids), unit)
        np.testing.assert_allclose(got.sum_unit, expected, rtol=RTOL, atol=RTOL * np.abs(expected).max())
        means = np.stack([(h[layer] / np.linalg.norm(h[layer], axis=1, keepdims=True)).mean(0) for _, _, h in contexts])
        part = sentences.layer(layer)
        assert part.n_contexts == len(contexts)
        np.testing.assert_allclose(part.sum_mean_unit, means.sum(0), rtol=RTOL, atol=RTOL * np.abs(means).sum())
        np.testing.assert_allclose(part.sum_mean_unit_sq, (means**2).sum(), rtol=RTOL)


def test_three_shards_equal_one(one_shard, three_shards):
    pd.testing.assert_frame_equal(one_shard[0], three_shards[0], rtol=1e-12)
    for name in ("words", "sentences"):
        kind = WordsFile if name == "words" else SentencesFile
        one, three = kind(one_shard[1][name]), kind(three_shards[1][name])
        for layer in range(len(one_shard[0])):
            a, b = one.layer(layer), three.layer(layer)
            for field in vars(a):
                left, right = getattr(a, field), getattr(b, field)
                if isinstance(left, np.ndarray) and left.dtype.kind == "f":
                    np.testing.assert_allclose(left, right, rtol=1e-12, atol=1e-14)
                elif isinstance(left, np.ndarray):
                    np.testing.assert_array_equal(left, right)
                else:
                    assert left == pytest.approx(right, rel=1e-12)


def test_columns_are_in_geometry_csv_order(one_shard):
    table, _ = one_shard
    declared = [column.name for column in layer_columns()]  # the declared per-layer sums' columns come after
    assert list(table.columns[-len(ETHAYARAJH_COLUMNS) - len(declared) - 1 :]) == [
        *ETHAYARAJH_COLUMNS,
        *declared,
        "config_hash",
    ]
