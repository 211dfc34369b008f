"""The sums' disk (ctxvar.run.disk) with the types estimated: Heaps' law caps at the vocabulary and the tokens, a
sampled corpus's own words give its K and β (a corpus that repeats few words grows slowly, one of ever new words as fast
as its tokens), and an estimate is never above the bound that takes every token for a type. A run that does not fit on
its disk stops before extraction with both numbers, one that fits only a model at a time gets a warning, and a Hub model
not downloaded yet is left out of the estimate rather than guessed."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from ctxvar.errors import DiskSpaceError
from ctxvar.files.parquet import write_table
from ctxvar.run import disk
from ctxvar.run.disk import check_free_space, planned_bytes
from ctxvar.run.resources import ModelShape

from support.messages import one_line
from support.workflow_runs import DEMO

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


def sampled_demo_corpus(tmp_path: Path) -> Path:
    """A run folder whose corpus is sampled (2,000 three-word sentences per shard of the demo); no model run yet."""
    run_folder = tmp_path / "results" / "demo"
    (run_folder / "corpus").mkdir(parents=True)
    n = 2000 * DEMO["shards"]
    sentences = pa.table({"text": ["a b c"] * n, "n_words": pa.array([3] * n, pa.int32())})
    write_table(sentences, run_folder / "corpus" / "sentences.parquet")
    return run_folder


def test_a_run_that_does_not_fit_on_disk_fails_before_extraction_with_both_numbers(tmp_path, monkeypatch):
    run_folder = sampled_demo_corpus(tmp_path)
    check_free_space(DEMO, run_folder)  # fits on this disk
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - 10**6, 10**6))
    expected = (
        r"needs up to [\d.]+ [kMG]B \(merged sums plus one model.s partials, and the models still to unpack or "
        r"convert\) .* has 1 MB free; free space"
    )
    with pytest.raises(DiskSpaceError, match=expected) as error:
        check_free_space(DEMO, run_folder)
    one_line(error)
    monkeypatch.setenv("CTXVAR_SKIP_DISK_CHECK", "1")
    check_free_space(DEMO, run_folder)


def test_a_hub_model_not_downloaded_yet_is_not_guessed_into_the_estimate(tmp_path):
    """Its shape is unknown until it is cached; a bert-large-sized guess refused a demo-sized run that needs MBs."""
    run_folder = sampled_demo_corpus(tmp_path)
    config = {**DEMO, "models": DEMO["models"][:1]}
    with_hub_model = {**DEMO, "models": DEMO["models"][:1] + [{"name": "no-such-org/not-downloaded"}]}
    assert planned_bytes(with_hub_model, run_folder) == planned_bytes(config, run_folder)


def test_a_run_that_fits_only_one_model_at_a_time_gets_a_warning(tmp_path, monkeypatch, caplog):
    run_folder = sampled_demo_corpus(tmp_path)
    peak, all_at_once = planned_bytes(DEMO, run_folder)
    assert 0 < peak < all_at_once
    free = (peak + all_at_once) // 2
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - free, free))
    with caplog.at_level(logging.WARNING):
        check_free_space(DEMO, run_folder)
    assert "fits the run one model at a time" in caplog.text
