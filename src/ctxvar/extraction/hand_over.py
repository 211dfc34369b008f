"""A layer-major job's sums, one layer at a time, made empty and handed to host memory beside the batches.

Handing a layer's sums over (:func:`ctxvar.extraction.passes.host_layers`: every sum checked finite and copied to
host memory) and making the next layer's sums empty need no forward pass. Where the device has room for two
layers' sums (:meth:`ctxvar.extraction.layer_major.MemoryPlan.hand_over_beside`), one thread does both while the
next layer's batches run: it hands layer ℓ over, frees its sums and makes layer ℓ + 2's, while the batches of
layer ℓ + 1 add into the sums it made before; on a GPU on a stream of its own, ordered after the batches' last
additions by an event, so that the copies overlap their kernels. At most two layers' sums are on the device. Without
that room, each layer's sums are handed over and the next made between the layers, as the batches wait.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from ctxvar.extraction.passes import host_layers, job_sums


class LayerHandOver:
    """The sums of a layer-major ``job`` (a :class:`ctxvar.extraction.extract.ShardRun`) of ``n_layers`` layers,
    made and handed over beside the batches (``beside``) or between them. Use: ``sums(ℓ)`` before layer ℓ's
    batches, ``handed(sums, ℓ)`` after them (the host lists of the layers handed over since: the layer before
    beside, this one between), ``rest()`` after the last."""

    def __init__(self, job, settings, sampled, n_layers: int, beside: bool):
        self.job, self.settings, self.sampled, self.n_layers = job, settings, sampled, n_layers
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hand-over") if beside else None
        self.stream = torch.cuda.Stream(job.device) if beside and job.device.type == "cuda" else None
        self.made: dict[int, Future] = {}  # layer → its sums, made ahead
        self.handing: Future | None = None  # the hand-over of the layer before
        if self.pool is not None and n_layers > 1:
            self.made[1] = self.pool.submit(self._made, 1)

    def sums(self, layer: int):
        """Layer ``layer``'s empty sums: made ahead beside the batches before, else now."""
        if layer not in self.made:
            return job_sums(self.job, [layer], self.settings, self.sampled)
        sums, ready = self.made.pop(layer).result()
        if ready is not None:
            torch.cuda.current_stream(self.job.device).wait_event(ready)  # their zeros are written first
        return sums

    def handed(self, sums, layer: int) -> list:
        """Hand layer ``layer``'s ``sums`` over once its batches are queued; the host lists of
        :func:`ctxvar.extraction.passes.host_layers` handed over since: beside, that of the layer before (this
        one's goes on beside the next layer's batches, and layer ``layer`` + 2's sums are made after it); between,
        this one's. The caller drops its reference to ``sums`` next."""
        if self.pool is None:
            return [host_layers(sums, self.job, self.settings)]
        queued = None
        if self.stream is not None:
            queued = torch.cuda.Event()
            queued.record(torch.cuda.current_stream(self.job.device))
        before, self.handing = self.handing, self.pool.submit(self._handed_over, sums, queued)
        if layer + 2 < self.n_layers:
            self.made[layer + 2] = self.pool.submit(self._made, layer + 2)
        return [before.result()] if before is not None else []

    def rest(self) -> list:
        """The host lists not yet returned (beside: the last layer's); the thread is done after it."""
        if self.pool is None:
            return []
        last = [self.handing.result()] if self.handing is not None else []
        self.pool.shutdown()
        return last

    def close(self) -> None:
        """Stop the thread without waiting for what it still holds (a job that failed)."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)

    def _on_stream(self):
        return torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()

    def _handed_over(self, sums, queued):
        with self._on_stream():
            if queued is not None:
                self.stream.wait_event(queued)  # the layer's last additions, queued on the batches' stream
            return host_layers(sums, self.job, self.settings)  # ends with the stream's copies synchronised

    def _made(self, layer: int):
        with self._on_stream():
            sums = job_sums(self.job, [layer], self.settings, self.sampled)
            if self.stream is None:
                return sums, None
            ready = torch.cuda.Event()
            ready.record(self.stream)
            return sums, ready
