"""An extraction job's order (ctxvar.extraction.order), on the session's tiny BERT: ``whole_model`` gives every
layer's sums from one pass, ``auto`` runs the model layer-major, a layer at a time; both give the same sums, and the
log names the order and its memory plan."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ctxvar.extraction.job import prepare_shard, release_device
from ctxvar.extraction.order import chosen_blocks, planned_sums
from ctxvar.extraction.settings import ExtractionSettings

from support.pipeline_runs import TEST_DEVICE, shard_of


@pytest.fixture(scope="module")
def shard(tmp_path_factory, corpus_texts):
    return shard_of(tmp_path_factory.mktemp("order"), corpus_texts[:30])


def sums_in_order(shard, model_dir, order: str) -> tuple[int, list[list]]:
    """The length ``planned_sums`` gives, and the layers of each list it yields, for a job in ``order``."""
    settings = ExtractionSettings(
        model={"id": "m"}, source=str(model_dir), device=TEST_DEVICE, extraction_order=order, progress=False
    )
    job = prepare_shard(shard, settings, hash_weights=False)
    try:
        padded = job.padded()
        assert (chosen_blocks(job, settings, padded) is None) == (order == "whole_model")
        planned, length = planned_sums(job, settings, padded, job.sampled)
        return length, [[layer[0] for layer in layers] for layers in planned]
    finally:
        release_device(job)


def test_whole_model_is_one_list_of_every_layer_and_layer_major_a_list_per_layer(shard, tiny_models, caplog):
    with caplog.at_level(logging.INFO, logger="ctxvar.extraction.order"):
        whole_length, whole = sums_in_order(shard, tiny_models["bert"], "whole_model")
        assert "whole-model: one pass; sums of layers 0–3" in caplog.text
        major_length, major = sums_in_order(shard, tiny_models["bert"], "auto")
        assert "layer-major over blocks" in caplog.text and "memory plan" in caplog.text
    assert (whole_length, len(whole), [len(layers) for layers in whole]) == (1, 1, [4])
    assert (major_length, [len(layers) for layers in major]) == (4, [1, 1, 1, 1])
    for one_pass, alone in zip(whole[0], (layers[0] for layers in major)):
        assert one_pass.layer == alone.layer
        np.testing.assert_array_equal(one_pass.count, alone.count)
        np.testing.assert_allclose(one_pass.sum, alone.sum, rtol=1e-12, atol=1e-12)
