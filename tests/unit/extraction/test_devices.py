"""GPU claims: concurrent jobs never share a device (faked device list, no GPU needed)."""

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ctxvar.errors import ModelLoadError
from ctxvar.extraction import devices as gpus
from ctxvar.extraction import job as job_state
from ctxvar.extraction import layer_major
from ctxvar.extraction.budget import device_layers, state_bytes
from ctxvar.extraction.extract import extract_shard, prepare_shard
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.models import loading
from ctxvar.stats import sums

from support.pipeline_runs import shard_of

JOBS = textwrap.dedent("""
    import json, os, sys, time
    from ctxvar.extraction.devices import claim_gpu
    for _ in range(int(sys.argv[1])):
        if os.fork() == 0:  # a job of its own, started at once with the others
            index = claim_gpu(poll_seconds=0.05)
            start = time.monotonic()
            time.sleep(0.4)
            line = json.dumps({"gpu": index, "start": start, "end": time.monotonic()}) + "\\n"
            os.write(1, line.encode())  # one write: the jobs' lines never interleave
            os._exit(0)  # its claim goes with the process
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
""")


def test_concurrent_jobs_never_share_a_gpu(tmp_path):
    """10 jobs, each its own process (forked from one that has imported ctxvar, so that they start together), on
    4 GPUs."""
    env = {"CTXVAR_GPUS": "0,1,2,3", "CTXVAR_GPU_LOCK_DIR": str(tmp_path)}
    jobs = subprocess.run(
        [sys.executable, "-c", JOBS, "10"], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )
    assert jobs.returncode == 0, jobs.stderr[-3000:]
    claims = [json.loads(line) for line in jobs.stdout.splitlines()]
    assert len(claims) == 10
    assert {c["gpu"] for c in claims} == {0, 1, 2, 3}
    for a in claims:
        for b in claims:
            if a is not b and a["gpu"] == b["gpu"]:
                assert a["end"] <= b["start"] or b["end"] <= a["start"], "two jobs held one GPU at once"


def test_a_second_claim_in_one_process_gets_its_gpu_at_once(tmp_path, monkeypatch):
    """flock locks belong to the open file: without care, a second extraction in the same process (a notebook,
    the benchmark) would wait forever on the lock its own process holds. Other processes still wait."""
    monkeypatch.setenv("CTXVAR_GPUS", "0")
    monkeypatch.setenv("CTXVAR_GPU_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(gpus, "_held", {})
    try:
        assert gpus.claim_gpu(poll_seconds=0.05) == 0
        second = []
        claim = threading.Thread(target=lambda: second.append(gpus.claim_gpu(poll_seconds=0.05)), daemon=True)
        claim.start()
        claim.join(timeout=10)
        assert second == [0], "a second claim in the claiming process waited on its own lock"
        claim = "from ctxvar.extraction.devices import claim_gpu; print('claiming', flush=True); claim_gpu()"
        other = subprocess.Popen([sys.executable, "-c", claim], stdout=subprocess.PIPE, text=True)
        assert other.stdout.readline() == "claiming\n"  # its imports done, whatever the machine's load
        time.sleep(1)  # a claim that did not wait would have returned and its process exited by now
        assert other.poll() is None, "another process took a GPU this process holds"
        other.kill()
        other.wait()
    finally:
        for handle in gpus._held.values():
            handle.close()


def test_a_claim_is_released_when_its_process_dies(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXVAR_GPUS", "5")
    monkeypatch.setenv("CTXVAR_GPU_LOCK_DIR", str(tmp_path))
    holder = subprocess.run(
        [sys.executable, "-c", "from ctxvar.extraction.devices import claim_gpu; print(claim_gpu())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert holder.stdout.strip() == "5"
    assert gpus.claim_gpu(poll_seconds=0.05) == 5


def lock_is_free(path) -> bool:
    """Whether another job could claim the GPU of lock file ``path`` now (a second open file description is
    refused while any process, this one included, holds the claim)."""
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


@pytest.fixture
def one_gpu(tmp_path, monkeypatch):
    """One faked GPU, index 0, its lock file in ``tmp_path / "locks"``, and no claim held by this process."""
    monkeypatch.setenv("CTXVAR_GPUS", "0")
    monkeypatch.setenv("CTXVAR_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(gpus, "_held", {})


@pytest.mark.integration
@pytest.mark.parametrize("order, capped", [("layer_major", False), ("whole_model", False), ("whole_model", True)])
def test_an_extraction_job_gives_up_its_gpu_claim_before_it_writes_its_last_layers(
    tmp_path, monkeypatch, one_gpu, tiny_models, corpus_texts, order, capped
):
    """The job's sums reach host memory, the job frees the device and releases its claim, then writes: the next
    job's forward pass can run meanwhile. Layer-major, each layer before the last is written while the next layer
    computes, under the claim, the last after the release; whole-model, every layer after the release, also with
    a cap that keeps some layers' sums in host memory. On a CPU, with a claim taken as prepare_shard takes it on a
    GPU."""
    shard = shard_of(tmp_path, corpus_texts[:80])
    settings = ExtractionSettings(
        model={"id": "m"},
        source=str(tiny_models["bert"]),
        device="cpu",
        progress=False,
        config_hash="h",
        extraction_order=order,
    )
    if capped:
        types = len(prepare_shard(shard, settings, hash_weights=False).types)
        settings.max_state_mb = state_bytes(2, types, 32) / 1e6  # two of the four hidden states on the device
        assert device_layers(4, types, 32, settings.max_state_mb * 1e6) == 2
    under_claim = 3 if order == "layer_major" else 0  # the layers written before the last layer's sums are in
    free_when_written = []
    write = sums.LayerWriter.write

    def probe_then_write(writer, table):
        if Path(writer.path).name == "partial.parquet":  # the sums file; the others are written beside it
            free_when_written.append(lock_is_free(tmp_path / "locks" / "gpu0.lock"))
        write(writer, table)

    monkeypatch.setattr(sums.LayerWriter, "write", probe_then_write)
    assert gpus.claim_gpu(poll_seconds=0.05) == 0
    extract_shard(shard, tmp_path / "partial.parquet", settings)
    assert free_when_written == [False] * under_claim + [True] * (4 - under_claim)
    assert not gpus._held and (tmp_path / "partial.parquet").exists()


RELEASING_JOB = textwrap.dedent("""
    import sys
    from ctxvar.extraction.devices import claim_gpu, release_gpu
    claim_gpu(poll_seconds=0.05)
    release_gpu()  # as an extraction job does once its sums are in host memory
    print("released", flush=True)
    sys.stdin.readline()  # writing its partial, until the test has seen the next job's claim
""")


def test_the_next_job_claims_the_gpu_while_the_job_before_still_writes(tmp_path):
    env = {**os.environ, "CTXVAR_GPUS": "0", "CTXVAR_GPU_LOCK_DIR": str(tmp_path)}
    writing = subprocess.Popen(
        [sys.executable, "-c", RELEASING_JOB], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert writing.stdout.readline().strip() == "released"
        claim = "from ctxvar.extraction.devices import claim_gpu; print(claim_gpu(poll_seconds=0.05))"
        next_job = subprocess.run([sys.executable, "-c", claim], capture_output=True, text=True, env=env, timeout=300)
        assert next_job.stdout.strip() == "0" and writing.poll() is None, "the GPU waited for the write"
    finally:
        writing.kill()
        writing.wait()


def test_with_one_gpu_a_waiting_job_takes_it_as_soon_as_it_is_released(tmp_path, monkeypatch):
    """No poll interval between one job's release and the next job's forward pass: the claim sleeps in flock."""
    monkeypatch.setenv("CTXVAR_GPUS", "0")
    monkeypatch.setenv("CTXVAR_GPU_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(gpus, "_held", {})
    monkeypatch.setattr(gpus, "time", SimpleNamespace(sleep=lambda seconds: pytest.fail("the claim polled")))
    holder = open(tmp_path / "gpu0.lock", "w")  # another job's claim
    fcntl.flock(holder, fcntl.LOCK_EX)
    claimed = []
    waiting = threading.Thread(target=lambda: claimed.append(gpus.claim_gpu(poll_seconds=60)), daemon=True)
    waiting.start()
    waiting.join(timeout=0.5)
    assert waiting.is_alive() and not claimed, "the claim did not wait for the holder"
    holder.close()  # the other job releases its claim
    waiting.join(timeout=10)
    try:
        assert claimed == [0]
    finally:
        gpus.release_gpu()


@pytest.mark.integration
@pytest.mark.parametrize("order, failing", [("whole_model", job_state), ("layer_major", layer_major)])
def test_a_job_that_fails_after_its_claim_gives_it_up(
    tmp_path, monkeypatch, one_gpu, tiny_models, corpus_texts, order, failing
):
    """A failed extraction in a process that goes on (a notebook, a test session) frees the GPU at once: a claim
    kept for the process's life would make every other job wait forever. Failing in a pass (the whole model's
    batches, a block of a layer-major job), and failing while the shard is prepared (a shard that cannot be
    read, after a claim taken as on a GPU)."""
    shard = shard_of(tmp_path, corpus_texts[:40])
    settings = ExtractionSettings(
        model={"id": "m"},
        source=str(tiny_models["bert"]),
        device="cpu",
        progress=False,
        config_hash="h",
        extraction_order=order,
    )

    def out_of_memory(*args):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(failing, "run_batches" if order == "whole_model" else "run_block", out_of_memory)
    assert gpus.claim_gpu(poll_seconds=0.05) == 0  # as prepare_shard claims on a GPU
    with pytest.raises(RuntimeError, match="out of memory"):
        extract_shard(shard, tmp_path / "partial.parquet", settings)
    assert not gpus._held and lock_is_free(tmp_path / "locks" / "gpu0.lock")

    monkeypatch.setattr(loading, "resolve_device", lambda device: torch.device("cuda"))  # no index: a claim
    held_when_loading = []

    def unreadable_weights(settings, device):
        held_when_loading.append(bool(gpus._held))
        raise ModelLoadError("the weights cannot be read")

    monkeypatch.setattr(job_state, "load_for_job", unreadable_weights)
    with pytest.raises(ModelLoadError, match="cannot be read"):
        prepare_shard(shard, settings)
    assert held_when_loading == [True] and not gpus._held and lock_is_free(tmp_path / "locks" / "gpu0.lock")


@pytest.mark.integration
def test_a_job_prepares_its_shard_before_it_claims_the_gpu(tmp_path, monkeypatch, one_gpu, tiny_models, corpus_texts):
    """Reading, tokenizing and batching the shard need no GPU: a job does them before its claim, so that a job
    waiting for the GPU has them done when the job before releases it. A shard that cannot be read fails before
    any claim."""
    settings = ExtractionSettings(model={"id": "m"}, source=str(tiny_models["bert"]), device="cpu", progress=False)
    monkeypatch.setattr(loading, "resolve_device", lambda device: torch.device("cuda"))  # no index: a claim
    steps, plan, claim = [], job_state.planned_shard, gpus.claim_gpu
    monkeypatch.setattr(job_state, "planned_shard", lambda *args: steps.append("shard") or plan(*args))
    monkeypatch.setattr(gpus, "claim_gpu", lambda: steps.append("claim") or claim())
    monkeypatch.setattr(job_state, "loaded_shard", lambda shard, *args: steps.append("load") or shard)
    job = prepare_shard(shard_of(tmp_path, corpus_texts[:40]), settings)
    gpus.release_gpu()
    assert steps == ["shard", "claim", "load"] and len(job.padded()) and job.model is None
    with pytest.raises(Exception, match="missing.parquet"):
        prepare_shard(tmp_path / "missing.parquet", settings)
    assert steps == ["shard", "claim", "load", "shard"] and not gpus._held


def test_a_cuda_error_that_fails_the_release_too_still_gives_up_the_claim_and_keeps_the_jobs_error(
    tmp_path, monkeypatch, one_gpu
):
    """After a CUDA error that outlives its kernel (a device-side assert), freeing the cache raises as well: the
    claim still goes, and the error that propagates is the job's."""

    def sticky():
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(torch.cuda, "empty_cache", sticky)
    job = SimpleNamespace(model=object(), device=torch.device("cuda", gpus.claim_gpu(poll_seconds=0.05)))
    with pytest.raises(ValueError, match="the job's own error"):
        with job_state.released_on_error(job):
            raise ValueError("the job's own error")
    assert not gpus._held and job.model is None and lock_is_free(tmp_path / "locks" / "gpu0.lock")
