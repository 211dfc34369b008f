"""A layer-major job's sums, one layer at a time, made empty and handed to host memory beside the batches.

Handing a layer's sums over (:func:`ctxvar.extraction.passes.host_layers`: every sum checked finite and copied to
host memory) and making the next layer's sums empty need no forward pass. On a GPU with room for two layers' sums
(:attr:`ctxvar.extraction.layer_major.MemoryPlan.hand_over_beside`), one thread does both while the next layer's
batches run, on a CUDA stream of its own: it hands layer ℓ over (ordered after the batches' last additions by an
event) and frees its sums, then makes layer ℓ + 2's, while layer ℓ + 1's batches add into the sums it made before.
The batch buffers of a layer handed over are freed first (``EmbeddingSums.release_buffers``), so the device holds
at most two layers' sums and one set of batch buffers; the batches wait only where making and handing over a layer
outlast its batches. Elsewhere (a CPU, whose copies are views and would keep every layer waiting to be written;
a GPU without the room), each layer is handed over and the next made between the layers.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from ctxvar.extraction.passes import host_layers, job_sums


class LayerHandOver:
    """The sums of a layer-major ``job`` (a :class:`ctxvar.extraction.job.ShardRun`) of ``n_layers`` layers,
    made and handed over beside the batches (``beside``) or between them. Use: ``sums(ℓ)`` before layer ℓ's
    batches, ``handed(sums, ℓ)`` after them (the host lists of the layers handed over since: the layer before
    beside, this one between), then, the caller's reference to the sums dropped, ``ahead(ℓ + 2)``; ``rest()``
    after the last layer."""

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
        sums.release_buffers()  # on the batches' stream, which is done with them once it reaches this point
        queued = None
        if self.stream is not None:
            queued = torch.cuda.Event()
            queued.record(torch.cuda.current_stream(self.job.device))
        before, self.handing = self.handing, self.pool.submit(self._handed_over, [sums], queued)
        del sums
        return [before.result()] if before is not None else []

    def ahead(self, layer: int) -> None:
        """Make layer ``layer``'s sums beside the batches, once the layer before the one running is handed over
        (call it after dropping every reference to the sums just handed over: no third layer's sums at once)."""
        if self.pool is not None and layer < self.n_layers:
            self.made[layer] = self.pool.submit(self._made, layer)

    def rest(self) -> list:
        """The host lists not yet returned (beside: the last layer's); the thread is done after it."""
        if self.pool is None:
            return []
        last = [self.handing.result()] if self.handing is not None else []
        self.pool.shutdown()
        return last

    def close(self) -> None:
        """Stop the thread: what is queued is cancelled, what runs is waited for (it waits only on events already
        recorded), and nothing made ahead is kept, so that a job that failed holds no sums and no staging buffer."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        self.made.clear()
        self.handing = None

    def _on_stream(self):
        return torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()

    def _handed_over(self, held: list, queued):
        """``host_layers`` of the sums ``held`` alone (taken from it: an error's traceback keeps no sums)."""
        sums = held.pop()
        try:
            with self._on_stream():
                if queued is not None:
                    self.stream.wait_event(queued)  # the layer's last additions, queued on the batches' stream
                handed = host_layers(sums, self.job, self.settings)
                if self.stream is not None:
                    self.stream.synchronize()  # nothing of the sums is read once they are freed
                return handed
        finally:
            del sums

    def _made(self, layer: int):
        with self._on_stream():
            sums = job_sums(self.job, [layer], self.settings, self.sampled)
            if self.stream is None:
                return sums, None
            ready = torch.cuda.Event()
            ready.record(self.stream)
            return sums, ready
