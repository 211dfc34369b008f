"""The sums' disk (ctxvar.run.disk) with the types estimated: Heaps' law caps at the vocabulary and the tokens, a
sampled corpus's own words give its K and β (a corpus that repeats few words grows slowly, one of ever new words as
fast as its tokens), and an estimate is never above the bound that takes every token for a type."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ctxvar.files.parquet import write_table
from ctxvar.run import disk
from ctxvar.run.resources import ModelShape

GEOMETRY = {"covariance": True, "cosine": True, "twonn": True, "ethayarajh": True, "sample_size": 64, "batches": 2}


def test_heaps_law_is_capped_by_the_vocabulary_and_the_tokens():
    growth = disk.TypeGrowth(k=10.0, beta=0.5)
    assert growth.types(10_000, 50_000) == 1000
    assert growth.types(10_000, 500) == 500  # every entry of the vocabulary
    assert disk.TypeGrowth(k=10.0, beta=1.0).types(50, 500) == 50  # no more types than tokens
    assert growth.types(0, 500) == 1


def sentences(tmp_path, texts: list[str]):
    path = tmp_path / "sentences.parquet"
    write_table(pa.table({"text": texts, "n_words": pa.array([len(t.split()) for t in texts], pa.int32())}), path)
    return path


def test_a_sampled_corpus_gives_heaps_law_from_its_own_words_and_marks(tmp_path):
    repeated = disk.sample_type_growth(sentences(tmp_path, [f"w{i % 7}, w{(i + 3) % 7}." for i in range(400)]))
    assert repeated.beta == pytest.approx(0.0, abs=1e-9) and repeated.types(10**6, 10**5) == 9  # 7 words, "," and "."
    fresh = disk.sample_type_growth(sentences(tmp_path, [f"w{2 * i} w{2 * i + 1}" for i in range(400)]))
    assert fresh.beta == pytest.approx(1.0) and fresh.types(1000, 10**5) == 1000  # each word a new one
    assert disk.sample_type_growth(sentences(tmp_path, ["one"])) is None  # nothing to fit
    assert disk.sample_type_growth(tmp_path / "missing.parquet") is None


def test_the_estimate_counts_fewer_types_than_the_bound_and_the_same_moments_and_sample():
    shape = ModelShape(13, 768, 30_522)
    bound = disk.sums_bytes(100_000, shape, GEOMETRY)
    estimate = disk.sums_bytes(100_000, shape, GEOMETRY, disk.TOKEN_TYPES)
    none_repeated = disk.sums_bytes(100_000, shape, GEOMETRY, disk.TypeGrowth(k=1.0, beta=1.0))
    assert estimate < bound == none_repeated  # a corpus that never repeats a type is the bound
    types = disk.TOKEN_TYPES.types(100_000, shape.vocab_size)
    fixed = disk.sums_bytes(100_000, ModelShape(13, 768, types), GEOMETRY)  # the same rows with that vocabulary
    assert estimate == fixed
