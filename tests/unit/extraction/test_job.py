"""An extraction job's shard and device (ctxvar.extraction.job), on a stand-in job: its sampled positions, the
bottom k of the position keys with where each sits; the device given back when the job fails, the job's error the
one that propagates."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ctxvar.extraction import job as job_module
from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.position_sample import token_keys
from ctxvar.extraction.settings import ExtractionSettings


def shard_job() -> SimpleNamespace:
    """Three sequences (the second a window of the first's sentence) of 4, 3 and 5 tokens over types a–e."""
    return SimpleNamespace(
        encoded=SimpleNamespace(offsets=np.array([0, 4, 7, 12])),
        sentence_id=np.array([10, 10, 11]),
        window=np.array([0, 1, 0]),
        types=np.array(["a", "b", "c", "d", "e"], object),
        type_index=np.array([0, 1, 2, 0, 3, 1, 4, 4, 0, 2, 2, 1]),
        device=torch.device("cpu"),
        model=object(),
        streamed=None,
    )


def test_a_job_without_a_sample_samples_no_position():
    assert job_module.sample_positions(shard_job(), ExtractionSettings(model={"id": "m"}, source="m")) is None


def test_the_sampled_positions_are_the_bottom_k_of_the_keys_with_where_each_sits():
    job = shard_job()
    settings = ExtractionSettings(
        model={"id": "m"}, source="m", geometry=GeometryOptions(sample_size=5), sample_seed=4, progress=False
    )
    sampled = job_module.sample_positions(job, settings)
    keys = token_keys(job.sentence_id, job.window, job.encoded.offsets, 4)
    np.testing.assert_array_equal(sampled["tokens"], np.argsort(keys)[:5])
    np.testing.assert_array_equal(sampled["key"], np.sort(keys)[:5])
    for i, token in enumerate(sampled["tokens"]):
        sequence = np.searchsorted(job.encoded.offsets, token, side="right") - 1
        assert sampled["sentence_id"][i] == job.sentence_id[sequence] and sampled["window"][i] == job.window[sequence]
        assert sampled["position"][i] == token - job.encoded.offsets[sequence]
        assert sampled["token"][i] == job.types[job.type_index[token]]


def test_a_failing_job_gives_its_device_back_and_its_error_propagates(monkeypatch):
    released = []
    monkeypatch.setattr(job_module.devices, "release_gpu", lambda: released.append(1))
    job = shard_job()
    with pytest.raises(ValueError, match="the job's own"):
        with job_module.released_on_error(job):
            raise ValueError("the job's own")
    assert released == [1] and job.model is None
    with job_module.released_on_error(shard_job()):
        pass
    assert released == [1], "a job that does not fail keeps its device"


def test_an_error_in_giving_the_device_back_is_logged_and_the_jobs_error_propagates(monkeypatch, caplog):
    def broken_release():
        raise RuntimeError("CUDA error: an illegal memory access")

    monkeypatch.setattr(job_module.devices, "release_gpu", broken_release)
    with caplog.at_level(logging.WARNING), pytest.raises(ValueError, match="the job's own"):
        with job_module.released_on_error(shard_job()):
            raise ValueError("the job's own")
    assert "freeing the device after the job's error failed too: CUDA error" in caplog.text
