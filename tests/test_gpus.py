"""GPU claims: concurrent jobs never share a device (faked device list, no GPU needed)."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

from ctxvar.extraction import devices as gpus

JOB = textwrap.dedent("""
    import json, sys, time
    from ctxvar.extraction.devices import claim_gpu
    index = claim_gpu(poll_seconds=0.05)
    start = time.monotonic()
    time.sleep(0.4)
    print(json.dumps({"gpu": index, "start": start, "end": time.monotonic()}))
""")


def test_concurrent_jobs_never_share_a_gpu(tmp_path):
    env = {"CTXVAR_GPUS": "0,1,2,3", "CTXVAR_GPU_LOCK_DIR": str(tmp_path)}
    jobs = [
        subprocess.Popen([sys.executable, "-c", JOB], stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
        for _ in range(10)
    ]
    claims = [json.loads(job.communicate(timeout=60)[0]) for job in jobs]
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
        other = subprocess.Popen([sys.executable, "-c", "from ctxvar.extraction.devices import claim_gpu; claim_gpu()"])
        time.sleep(2)
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
