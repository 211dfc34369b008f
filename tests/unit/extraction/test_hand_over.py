"""A layer-major job hands each layer's sums to the host beside the next layer's batches where the device has room
for two layers' sums, and between the layers where it has not: the same sums either way."""

from __future__ import annotations

import threading

import pyarrow.parquet as pq
import pytest

from ctxvar.extraction import hand_over, layer_major
from ctxvar.extraction.extract import extract_shard
from ctxvar.extraction.settings import ExtractionSettings

from support.pipeline_runs import assert_sums_equal, shard_of

pytestmark = pytest.mark.integration
WAIT_SECONDS = 30


def test_each_layer_is_handed_over_while_the_next_layers_batches_run(tmp_path, monkeypatch, tiny_models, corpus_texts):
    """The hand-over of layer ℓ waits, in its own thread, until layer ℓ + 1's first block has run: a hand-over
    between the layers would wait in vain. The sums are those of a job that hands over between the layers."""
    shard = shard_of(tmp_path, corpus_texts[:60])
    settings = ExtractionSettings(
        model={"id": "m"}, source=str(tiny_models["bert"]), device="cpu", progress=False, extraction_order="layer_major"
    )
    block_ran = {layer: threading.Event() for layer in range(8)}
    handed, blocked, host_layers, run_block = [], [], hand_over.host_layers, layer_major.run_block

    def running(blocks, layer, *args):
        block_ran[layer + 1].set()  # the block of `layer` makes hidden state layer + 1
        return run_block(blocks, layer, *args)

    def waiting_host_layers(sums, job, settings):
        (layer,) = sums.layers
        if layer + 1 < job.n_layers and not block_ran[layer + 1].wait(WAIT_SECONDS):
            blocked.append(layer)
        handed.append((layer, threading.current_thread().name))
        return host_layers(sums, job, settings)

    monkeypatch.setattr(layer_major, "run_block", running)
    monkeypatch.setattr(hand_over, "host_layers", waiting_host_layers)
    extract_shard(shard, tmp_path / "beside.parquet", settings)
    assert not blocked and [layer for layer, _ in handed] == [0, 1, 2, 3]
    assert all(thread.startswith("hand-over") for _, thread in handed)

    threads = []

    def recorded_host_layers(sums, job, settings):
        threads.append(threading.current_thread().name)
        return host_layers(sums, job, settings)

    def between(job, settings, sampled, n_layers, beside):  # as a plan with no room for two layers' sums
        return hand_over.LayerHandOver(job, settings, sampled, n_layers, False)

    monkeypatch.setattr(hand_over, "host_layers", recorded_host_layers)
    monkeypatch.setattr(layer_major, "LayerHandOver", between)
    extract_shard(shard, tmp_path / "between.parquet", settings)
    assert threads == [threading.main_thread().name] * 4
    assert_sums_equal(pq.read_table(tmp_path / "beside.parquet"), pq.read_table(tmp_path / "between.parquet"))
