"""A model whose weights exceed the device budget, run layer-major with each block's weights read from its
safetensors files when its layer comes, and freed after it.

Before anything is loaded, :func:`load_for_job` compares the weights the job would hold (every parameter of the
model in the dtype it loads in: the job's, float32 where the class keeps it so) with the device budget
(:func:`device_budget_bytes`): the GPU's free memory less the reserve of :mod:`ctxvar.extraction.budget`, or
``max_device_mb`` on any device.
Weights within it load whole, as always (:func:`ctxvar.models.loading.load_model`). Weights beyond it are
streamed: the model is built with its parameters on ``meta`` and its buffers real
(:func:`ctxvar.models.loading.empty_model`), the parameters outside the blocks (embeddings, final norm) and the
persistent buffers are read for real, and :class:`StreamedWeights` reads block ℓ's parameters from the files
straight to the device in the job's dtype, one tensor at a time with plain file reads (no memory map keeps the
file's pages in the process), the next block on a background thread while the current one runs.

Nothing is guessed. Every tensor of the model (``state_dict``: parameters and persistent buffers) must be in the
files under its own name or under the base model's prefix (``model.``, ``transformer.``), exactly one of them,
with exactly its shape and a dtype torch reads; no tensor of the files may belong to a layer the model does not
build; and transformers must not convert the weights on loading (the family's conversion mapping, such as
Mixtral's fused experts, or a quantized checkpoint's quantizer, such as block FP8's scales). Anything else
loads the whole model as today, its loading report read (:mod:`ctxvar.models.completeness`), and the log says
which and why. The layer-major driver's probe (:func:`ctxvar.extraction.layer_major.probe_mismatch`) still runs
first, each block loaded by a forward pre-hook and freed by a forward hook (:meth:`StreamedWeights.on_demand`);
where every weight fits the budget at once (the job streams for its sums and batch), the blocks the probe read
stay, and a model it refuses is whole once the rest are read: no block is read twice. One whose weights exceed
the budget is held whole beyond it, as a checkpoint that cannot be streamed is (:func:`check_whole_fits`), its
blocks read again; it is not loaded a second time either way.

Each file read checks that the file is the one whose state the weight hash recorded
(:func:`ctxvar.models.hashing.check_unchanged`), so the hash names the bytes every block was read from.
"""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from ctxvar.errors import DeviceMemoryError, ModelLoadError
from ctxvar.extraction.budget import reserve_bytes, smaller_dtype
from ctxvar.extraction.layer_major import (
    Blocks,
    ModelWeights,
    Unrecognised,
    beside_weights_bound,
    find_blocks,
    parameter_bytes,
    streams,
)
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.models import hashing, loading
from ctxvar.models.completeness import listed, own_tensor_names

log = logging.getLogger(__name__)

TORCH_DTYPES = hashing.TORCH_DTYPES


@dataclass(frozen=True)
class StoredTensor:
    """A tensor in a safetensors file: the file, its dtype (safetensors' name), shape and bytes [begin, end)."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def stored_tensors(paths) -> dict[str, StoredTensor]:
    """Every tensor of the safetensors ``paths`` by name, from their headers (the first file's, for a name held
    twice: copies that differ are refused by the checkpoint check and by the weight hash)."""
    tensors: dict[str, StoredTensor] = {}
    for path in paths:
        with open(path, "rb") as handle:
            start, header = hashing.safetensors_header(handle, path)
        for name, (dtype, shape, begin, end) in header.items():
            tensors.setdefault(name, StoredTensor(path, dtype, shape, start + begin, start + end))
    return tensors


def checkpoint_keys(model: torch.nn.Module, stored: dict[str, StoredTensor]) -> dict[str, str]:
    """Each tensor of ``model``'s ``state_dict`` (parameters and persistent buffers) → its key in the files:
    its own name or the base model's prefix and its name, exactly one of them, of exactly its shape and of a dtype
    torch reads. :class:`~ctxvar.extraction.layer_major.Unrecognised`, naming what, when a tensor is missing,
    found twice, of another shape or dtype, when the files hold tensors of layers the model does not build, or
    when transformers converts this family's weights or this checkpoint's (``quantization_config``) on
    loading."""
    conversions = weight_conversions(model)
    if conversions:
        raise Unrecognised(f"transformers converts {type(model).__name__}'s weights on loading ({conversions})")
    quantization = getattr(model.config, "quantization_config", None)
    if quantization:
        method = quantization.get("quant_method") if isinstance(quantization, dict) else type(quantization).__name__
        raise Unrecognised(f"its checkpoint is quantized ({method}): transformers dequantizes it on loading")
    prefix = getattr(model, "base_model_prefix", "")
    keys, missing, twice, other = {}, [], [], []
    for name, tensor in model.state_dict(keep_vars=True).items():
        found = [key for key in (name, f"{prefix}.{name}" if prefix else None) if key in stored]
        if not found:
            missing.append(name)
        elif len(found) > 1:
            twice.append(name)
        elif stored[found[0]].shape != tuple(tensor.shape) or stored[found[0]].dtype not in TORCH_DTYPES:
            other.append(f"{found[0]} {stored[found[0]].dtype} {stored[found[0]].shape}, {tuple(tensor.shape)} built")
        else:
            keys[name] = found[0]
    for kind, names in (
        ("are not in the files under their names", missing),
        ("are in the files with and without the prefix", twice),
        ("have another shape or dtype in the files", other),
    ):
        if names:
            raise Unrecognised(f"{len(names)} of its tensors {kind}: {listed(names)}")
    extra = own_tensor_names(model, set(stored) - set(keys.values()))
    if extra:
        raise Unrecognised(f"the files hold {len(extra)} tensor(s) of layers it does not build: {listed(extra)}")
    return keys


def weight_conversions(model: torch.nn.Module) -> str:
    """transformers' own conversions of ``model``'s checkpoint keys or values beyond the legacy renamings (which
    :func:`checkpoint_keys` sees as missing names), described; empty when there are none (or this transformers
    has no conversion mapping)."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
    except ImportError:
        return ""
    return "; ".join(map(str, get_model_conversion_mapping(model, add_legacy=False)))


def device_budget_bytes(settings: ExtractionSettings, device: torch.device) -> int | None:
    """The device memory the model's weights may take: ``max_device_mb`` if set (on a GPU at most the free memory
    less the reserve of :func:`ctxvar.extraction.budget.reserve_bytes`); on a GPU without it, that free memory less
    the reserve; None (no budget) on a CPU without it."""
    cap = settings.max_device_bytes
    if device.type != "cuda":
        return cap
    free, total = torch.cuda.mem_get_info(device)
    room = free - reserve_bytes(total)
    return room if cap is None else min(cap, room)


class StreamedWeights:
    """The parameters of ``blocks`` of a model built on ``meta``, read from ``stored`` (by ``keys``) when needed:
    :meth:`fetch` reads a block's on a background thread, :meth:`install` puts them in place, :meth:`free` puts the
    ``meta`` placeholders back. ``files``: the :class:`ctxvar.models.hashing.WeightFiles` whose recorded state every
    read checks; ``budget``: the device budget in bytes the job streams under (:func:`device_budget_bytes`)."""

    def __init__(self, model, blocks: Blocks, keys, stored, files: hashing.WeightFiles, device, budget: int):
        self.model, self.blocks, self.device, self.budget = model, blocks, device, budget
        self.files = files
        self._stored = {name: stored[key] for name, key in keys.items()}
        self._states = dict(zip(files.paths, files.states))
        prefix = f"{blocks.name}."
        self.block_names = [
            [f"{prefix}{index}.{name}" for name, _ in block.named_parameters()]
            for index, block in enumerate(blocks.modules)
        ]
        self._placeholders = {
            name: parameter for name, parameter in model.named_parameters() if name.startswith(prefix)
        }
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="weights")

    def block_bytes(self) -> int:
        """Device bytes of the largest block's parameters."""
        return max(sum(p.numel() * p.element_size() for p in block.parameters()) for block in self.blocks.modules)

    def weights_bytes(self) -> int:
        """Device bytes of every parameter, loaded or not."""
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def fits_whole(self) -> bool:
        """Whether every parameter at once is within the device ``budget`` the job streams under (it streams
        because the weights and one layer's sums and batch are not)."""
        return self.weights_bytes() <= self.budget

    def resident_bytes(self) -> int:
        """Device bytes of the parameters outside the blocks (always loaded)."""
        return self.weights_bytes() - sum(
            p.numel() * p.element_size() for block in self.blocks.modules for p in block.parameters()
        )

    def read(self, name: str, like: torch.Tensor) -> torch.Tensor:
        """The model's tensor ``name`` from its file, on the device in ``like``'s dtype: its bytes read with plain
        file reads into a host tensor of its own (no memory map; aligned as torch aligns its tensors), then
        converted (on a CPU in the file's dtype, that tensor itself)."""
        stored = self._stored[name]
        raw = torch.empty(stored.end - stored.begin, dtype=torch.uint8)
        with open(stored.path, "rb", buffering=0) as handle:
            hashing.check_unchanged(self.files.what, stored.path, self._states[stored.path], os.fstat(handle.fileno()))
            handle.seek(stored.begin)
            view, done = memoryview(raw.numpy()), 0
            while done < len(view):
                got = handle.readinto(view[done:])
                if not got:
                    raise ModelLoadError(
                        f"{stored.path} ended early: it was changed since the model was loaded from it; re-run"
                    )
                done += got
        tensor = raw.view(TORCH_DTYPES[stored.dtype]).reshape(stored.shape)
        return tensor.to(device=self.device, dtype=like.dtype)

    def load_resident(self) -> None:
        """Read every parameter outside the blocks and every persistent buffer into place, and move the other
        buffers (computed by the model's code) to the device."""
        blocked = set(self._placeholders)
        with torch.no_grad():
            for module_name, module in self.model.named_modules():
                stem = f"{module_name}." if module_name else ""
                for name, parameter in list(module.named_parameters(recurse=False)):
                    if f"{stem}{name}" not in blocked:
                        module._parameters[name] = torch.nn.Parameter(
                            self.read(f"{stem}{name}", parameter), requires_grad=False
                        )
                for name, buffer in list(module.named_buffers(recurse=False)):
                    full = f"{stem}{name}"
                    module._buffers[name] = self.read(full, buffer) if full in self._stored else buffer.to(self.device)

    def fetch(self, index: int) -> Future:
        """Block ``index``'s parameters, ``{name: tensor}``, read on the background thread."""
        return self._reader.submit(self._read_block, index)

    def _read_block(self, index: int) -> dict[str, torch.Tensor]:
        return {name: self.read(name, self._placeholders[name]) for name in self.block_names[index]}

    def install(self, index: int, tensors: dict[str, torch.Tensor]) -> None:
        """Put block ``index``'s parameters (of :meth:`fetch`) in place."""
        self._assign(index, lambda name: torch.nn.Parameter(tensors[name], requires_grad=False))

    def free(self, index: int) -> None:
        """Put block ``index``'s ``meta`` placeholders back: its parameters' memory is freed."""
        self._assign(index, self._placeholders.__getitem__)

    def _assign(self, index: int, value_of) -> None:
        block, prefix = self.blocks.modules[index], f"{self.blocks.name}.{index}."
        for name in self.block_names[index]:
            owner, _, leaf = name.removeprefix(prefix).rpartition(".")
            module = block.get_submodule(owner) if owner else block
            module._parameters[leaf] = value_of(name)

    def installed(self, index: int) -> bool:
        """Whether block ``index``'s parameters are in place (not its ``meta`` placeholders)."""
        return not any(parameter.is_meta for parameter in self.blocks.modules[index].parameters())

    def install_all(self) -> None:
        """Read every block not in place yet: the whole model, each block read once."""
        for index in range(len(self.blocks.modules)):
            if not self.installed(index):
                self.install(index, self._read_block(index))

    def free_all(self) -> None:
        """Free every block in place: back to the streamed state, nothing but the resident weights held."""
        for index in range(len(self.blocks.modules)):
            self.free(index)

    def hand_back(self) -> None:
        """Give the memory torch's allocator caches back to the GPU (nothing on a CPU): after the probe held every
        block, the memory plan reads the GPU's free memory, which does not count what the cache keeps."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    @contextlib.contextmanager
    def on_demand(self, keep: bool = False):
        """Within the block, a block's forward reads its parameters first, unless they are in place, and frees them
        after, unless ``keep`` (a block whose forward is the layer-major driver's stub, which does no work, reads
        nothing). ``keep``: each block read stays, so that a model the probe refuses is whole once it ends
        (:meth:`install_all` reads what it did not run), not read a second time."""

        def before(module, args):
            index = index_of[id(module)]
            if not getattr(module.__dict__.get("forward"), "is_stub", False) and not self.installed(index):
                self.install(index, self._read_block(index))

        def after(module, args, output):
            if not keep:
                self.free(index_of[id(module)])

        index_of = {id(block): index for index, block in enumerate(self.blocks.modules)}
        handles = [block.register_forward_pre_hook(before) for block in self.blocks.modules]
        handles += [block.register_forward_hook(after) for block in self.blocks.modules]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def close(self) -> None:
        self._reader.shutdown(wait=True)


def load_for_job(settings: ExtractionSettings, device: torch.device):
    """``(model, streamed)``: the whole model (:func:`ctxvar.models.loading.load_model`) and None, or, when its
    weights exceed :func:`device_budget_bytes` and the files hold every tensor as :func:`checkpoint_keys` requires,
    the model built on ``meta`` with its resident weights loaded and its :class:`StreamedWeights`. The log says
    which path and why."""
    entry, source, what = settings.model, settings.source, loading.described(settings.model, settings.source)
    budget = device_budget_bytes(settings, device)
    if budget is None:
        return loading.load_model(entry, source, settings.dtype, device), None
    model = loading.empty_model(entry, source, settings.dtype)
    weights = parameter_bytes(model)
    beside = beside_weights_bound(model.config, settings, model.config.hidden_size, device)
    if not streams(weights, beside, budget):
        log.info(
            "%s: weights %.3f GB and one layer's sums and batch (at most %.3f GB) within the device budget of "
            "%.3f GB: loaded whole",
            what,
            weights / 1e9,
            beside / 1e9,
            budget / 1e9,
        )
        return loading.load_model(entry, source, settings.dtype, device), None
    if settings.extraction_order == "whole_model":
        check_whole_fits(settings, device, weights, WHOLE_ORDER, "extraction_order: auto")
        log.warning(
            "%s: weights %.3f GB leave no room for one layer within the device budget of %.3f GB, but %s: the whole "
            "model is loaded",
            what,
            weights / 1e9,
            budget / 1e9,
            WHOLE_ORDER,
        )
        return loading.load_model(entry, source, settings.dtype, device), None
    try:
        blocks = find_blocks(model)
        if blocks.shared:
            raise Unrecognised(f"its {len(blocks.order)} layers share the weights of {len(blocks.modules)} block(s)")
        files = hashing.weight_files(entry, source, model)
        if any(map(hashing.is_pickled, files.paths)):
            raise Unrecognised("its checkpoint is pickled (pytorch_model.bin), whose tensors are not read one by one")
        stored = stored_tensors(files.paths)
        keys = checkpoint_keys(model, stored)
    except (Unrecognised, ModelLoadError) as error:
        check_whole_fits(settings, device, weights, error)
        log.warning(
            "%s: weights %.3f GB leave no room for one layer within the device budget of %.3f GB, but they cannot be "
            "read block by block (%s): the whole model is loaded",
            what,
            weights / 1e9,
            budget / 1e9,
            error,
        )
        return loading.load_model(entry, source, settings.dtype, device), None
    check_streaming_fits(settings, device, budget, ModelWeights.of(model, blocks), len(blocks.modules))
    streamed = StreamedWeights(model, blocks, keys, stored, files, device, budget)
    streamed.load_resident()
    loading.custom_code_warning(entry, source, "config.json", model)
    heads = sorted(set(stored) - set(keys.values()))
    if heads:
        log.info(
            "%s: ignored %d tensor(s) that do not feed the hidden states (heads): %s", what, len(heads), listed(heads)
        )
    log.info(
        "%s: weights %.3f GB leave no room for one layer within the device budget of %.3f GB: %d blocks %r read "
        "from the files one at a time (%.3f GB each), %.3f GB outside them loaded",
        what,
        weights / 1e9,
        budget / 1e9,
        len(blocks.modules),
        blocks.name,
        streamed.block_bytes() / 1e9,
        streamed.resident_bytes() / 1e9,
    )
    return model, streamed


def check_streaming_fits(
    settings: ExtractionSettings, device: torch.device, budget: int, weights: ModelWeights, n_blocks: int
) -> None:
    """A :class:`DeviceMemoryError` naming both numbers when the device ``budget`` is below what streaming holds at
    the least, the weights outside the blocks and two blocks (the one running, the next being read): streamed, the
    job would exceed it whatever its batches, before any weight is read."""
    needed = weights.resident(streamed=True)
    if needed <= budget:
        return
    mb = 1e6
    held = (
        f"{(needed - 2 * weights.block_weights) / mb:.4g} MB outside its {n_blocks} blocks and two blocks of "
        f"{weights.block_weights / mb:.4g} MB, the one running and the next being read"
    )
    if budget == settings.max_device_bytes:
        given, remedy = (
            f"max_device_mb: {settings.max_device_mb:g}",
            f"set max_device_mb to at least {-(-needed // mb):.0f}",
        )
    else:
        given, remedy = "the GPU's free memory less the reserve", f"use {smaller_dtype(settings)}a GPU with more memory"
    raise DeviceMemoryError(
        f"model {settings.model['id']!r} on {device}: a device budget of {budget / mb:.4g} MB ({given}) is below "
        f"the {needed / mb:.4g} MB its weights hold when streamed ({held}): {remedy}"
    )


RESAVED = (
    "save the model again with save_pretrained (safetensors, current names) so that its blocks can be read one "
    "at a time"
)
WHOLE_ORDER = "extraction_order: whole_model runs every block at once"


def check_whole_fits(
    settings: ExtractionSettings, device: torch.device, weights: int, reason, remedy: str = RESAVED
) -> None:
    """On a GPU, a :class:`DeviceMemoryError` naming the numbers, the ``reason`` the weights cannot be streamed
    and the remedies (a smaller dtype, a larger GPU, ``remedy``) when ``weights`` bytes exceed its free memory
    less the reserve: loading the whole model would run out of memory. A CPU's budget (``max_device_mb``) is not
    its memory: the whole model loads there."""
    if device.type != "cuda":
        return
    free, total = torch.cuda.mem_get_info(device)
    if weights > free - reserve_bytes(total):
        raise DeviceMemoryError(
            f"model {settings.model['id']!r} on {device}: its weights ({weights / 1e9:.2f} GB in {settings.dtype}) "
            f"do not fit the {free / 1e9:.2f} GB free less a reserve of {reserve_bytes(total) / 1e9:.2f} GB, and "
            f"they cannot be read block by block ({reason}): use {smaller_dtype(settings)}a GPU with more memory, "
            f"or {remedy}"
        )
