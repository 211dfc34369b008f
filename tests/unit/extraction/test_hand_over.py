"""A layer-major job hands each layer's sums to the host beside the next layer's batches where the plan says so (a
GPU with room for two layers' sums), and between the layers elsewhere: the same sums either way, at most two
layers' sums at once, and a job that fails leaves no thread working and no sums held."""

from __future__ import annotations

import threading
import weakref

import pyarrow.parquet as pq
import pytest
import torch

from ctxvar.errors import StatisticsError
from ctxvar.extraction import hand_over, layer_major
from ctxvar.extraction.extract import extract_shard
from ctxvar.extraction.settings import ExtractionSettings

from support.pipeline_runs import assert_sums_equal, shard_of

pytestmark = pytest.mark.integration
WAIT_SECONDS = 30


@pytest.fixture
def job(tmp_path, tiny_models, corpus_texts):
    settings = ExtractionSettings(
        model={"id": "m"}, source=str(tiny_models["bert"]), device="cpu", progress=False, extraction_order="layer_major"
    )
    return shard_of(tmp_path, corpus_texts[:30]), settings


def beside(monkeypatch) -> list:
    """Every job's hand-over beside the batches, as on a GPU with room for two layers' sums; the hand-overs made."""
    made = []

    def beside_the_batches(job, settings, sampled, n_layers, beside):
        made.append(hand_over.LayerHandOver(job, settings, sampled, n_layers, True))
        return made[-1]

    monkeypatch.setattr(layer_major, "LayerHandOver", beside_the_batches)
    return made


def test_each_layer_is_handed_over_while_the_next_layers_batches_run(tmp_path, monkeypatch, job):
    """The hand-over of layer ℓ waits, in its own thread, until layer ℓ + 1's first block has run: a hand-over
    between the layers would wait in vain. At most two layers' sums exist at once. The sums are those of a job
    that hands over between the layers, as a job on a CPU does."""
    shard, settings = job
    block_ran = {layer: threading.Event() for layer in range(8)}
    handed, blocked, alive, most = [], [], weakref.WeakSet(), []
    host_layers, run_block, job_sums = hand_over.host_layers, layer_major.run_block, hand_over.job_sums

    def running(blocks, layer, *args):
        block_ran[layer + 1].set()  # the block of `layer` makes hidden state layer + 1
        return run_block(blocks, layer, *args)

    def waiting_host_layers(sums, job, settings):
        (layer,) = sums.layers
        if layer + 1 < job.n_layers and not block_ran[layer + 1].wait(WAIT_SECONDS):
            blocked.append(layer)
        handed.append((layer, threading.current_thread().name))
        return host_layers(sums, job, settings)

    def counted_sums(*args):
        sums = job_sums(*args)
        alive.add(sums)
        most.append(len(alive))
        return sums

    monkeypatch.setattr(layer_major, "run_block", running)
    monkeypatch.setattr(hand_over, "host_layers", waiting_host_layers)
    monkeypatch.setattr(hand_over, "job_sums", counted_sums)
    beside(monkeypatch)
    extract_shard(shard, tmp_path / "beside.parquet", settings)
    assert not blocked and [layer for layer, _ in handed] == [0, 1, 2, 3]
    assert all(thread.startswith("hand-over") for _, thread in handed)
    assert len(most) == 4 and max(most) == 2

    monkeypatch.undo()
    threads = []

    def recorded_host_layers(sums, job, settings):
        threads.append(threading.current_thread().name)
        return host_layers(sums, job, settings)

    monkeypatch.setattr(hand_over, "host_layers", recorded_host_layers)
    extract_shard(shard, tmp_path / "between.parquet", settings)  # on a CPU: between the layers
    assert threads == [threading.main_thread().name] * 4
    assert_sums_equal(pq.read_table(tmp_path / "beside.parquet"), pq.read_table(tmp_path / "between.parquet"))


def test_a_hand_over_that_fails_stops_the_job_with_its_thread_done_and_no_sums_held(tmp_path, monkeypatch, job):
    """A layer whose sums are not finite: the job's one-line error, raised in the main thread; the hand-over's
    thread has stopped and keeps nothing made ahead."""
    shard, settings = job
    host_layers = hand_over.host_layers

    def second_layer_overflows(sums, job, settings):
        if sums.layers == [1]:
            sums.types.sums["sum"][0, 0] = torch.inf
        return host_layers(sums, job, settings)

    monkeypatch.setattr(hand_over, "host_layers", second_layer_overflows)
    made = beside(monkeypatch)
    with pytest.raises(StatisticsError, match="NaN or Inf"):
        extract_shard(shard, tmp_path / "partial.parquet", settings)
    (stopped,) = made
    assert stopped.pool._shutdown and not stopped.made and stopped.handing is None
    assert not (tmp_path / "partial.parquet").exists()
