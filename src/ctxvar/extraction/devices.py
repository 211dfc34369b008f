"""Give each concurrent job on a multi-GPU workstation a GPU of its own.

Snakemake's local executor counts ``gpu`` as a resource but does not say which
device a job should use. A job claims one by taking an exclusive ``flock`` on
``<lock_dir>/gpu<i>.lock`` and keeps it until it calls :func:`release_gpu` (an
extraction job does once its sums are in host memory, before it writes them) or
the process exits, so a killed job frees its GPU at once. Under SLURM only the
allotted GPU is visible, and the claim is trivially index 0.

``CTXVAR_GPUS`` (e.g. ``0,1,2,3``) overrides the device list, which lets tests
run without GPUs; ``CTXVAR_GPU_LOCK_DIR`` moves the lock files.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path

_held: dict[int, object] = {}  # GPU index → its open lock file: the claim lasts as long as the process


def visible_gpus() -> list[int]:
    if os.environ.get("CTXVAR_GPUS"):
        return [int(i) for i in os.environ["CTXVAR_GPUS"].split(",")]
    import torch

    return list(range(torch.cuda.device_count()))


def lock_dir() -> Path:
    return Path(
        os.environ.get("CTXVAR_GPU_LOCK_DIR") or Path(tempfile.gettempdir()) / f"ctxvar-gpu-locks-{os.getuid()}"
    )


def claim_gpu(poll_seconds: float = 1.0) -> int:
    """Index of a GPU no other ctxvar job holds; waits while all are taken (polling every ``poll_seconds`` among
    several GPUs; with one, until its holder releases it).

    A process that holds a claim gets the same GPU again at once: flock locks belong to the open file, so a
    second open of the held lock file would wait forever on the process's own claim.
    """
    if _held:
        return next(iter(_held))
    gpus = visible_gpus()
    if not gpus:
        raise RuntimeError("no GPU visible to claim")
    directory = lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    while True:
        for index in gpus:
            handle = open(directory / f"gpu{index}.lock", "w")
            try:
                # with one GPU, wait in the kernel: woken the moment the holder releases it, not a poll later
                fcntl.flock(handle, fcntl.LOCK_EX | (fcntl.LOCK_NB if len(gpus) > 1 else 0))
            except BlockingIOError:
                handle.close()
                continue
            _held[index] = handle
            return index
        time.sleep(poll_seconds)


def release_gpu() -> None:
    """Give up this process's GPU claim, if it holds one: another job may claim the GPU at once. The caller
    must have freed what it held on the device first."""
    while _held:
        _, handle = _held.popitem()
        handle.close()  # closing the only descriptor of the lock file releases its flock
