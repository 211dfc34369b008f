"""Layer-major extraction: the shard's batches embedded once, then each block of the model over every batch's
hidden states in turn, each layer's sums finished (and handed on) before the next layer computes.

No per-family code: the blocks are the model's first ``ModuleList`` (``.layers``, ``.h``, ``.encoder.layer``) of
``num_hidden_layers`` modules, or, where layers share their weights (ALBERT), the innermost list whose modules run
in turn for runs of consecutive layers; and each block's call arguments (attention mask from the model's masking
helpers, rotary ``position_embeddings``, ``position_ids``, ALiBi, relative positions, cache off) are the ones the
model's own forward builds. They are recorded by running that forward once per batch with every block replaced by
a stub that records its arguments and returns its input in the form the real block returns it (a tensor, or first
in a tuple as Falcon's, BLOOM's, MPT's and DeBERTa-v2's blocks return it: :class:`OutputForm`, learnt from the
first block's real output on the probe): the embedding and the masks, no block's work. Block 0's input is hidden
state 0. Hidden state L, the last, is what ``output_hidden_states`` gives: the model's forward is run once more per
batch with the last block's stub returning the last block's real output (:func:`last_hidden_state`), so that the
model's own tail (a final norm, a projection, or nothing) makes it.

Hidden state ℓ of a batch is then bitwise the ``output_hidden_states[ℓ]`` of the whole-model forward pass: the
same modules run on the same tensors with the same arguments. Each job checks this first on a probe (two rows of
its shortest batch, :func:`probe_mismatch`); a model whose blocks it cannot find, that calls them other than as
found, whose probe differs, or whose own code fails on the probe in any way, runs the whole-model path
(:mod:`ctxvar.extraction.passes`), and one log line names the family and the reason (with ``extraction_order:
layer_major``, one line of error). ``tests/integration/extraction/test_architectures.py`` sorts every model type
of the installed transformers into the two paths (docs/architectures.md).

Memory (see :func:`memory_plan`): the model, the shard's hidden states (padded tokens × d in the forward dtype)
with each batch's recorded arguments, one layer's sums and one batch's transients through one block. Hidden
states that do not fit the device wait in pinned host memory and move per batch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
from dataclasses import dataclass
from typing import Iterator, NamedTuple

import torch
from tqdm.auto import tqdm

from ctxvar.errors import CtxvarError, DeviceMemoryError, ModelLoadError, first_line
from ctxvar.extraction.accumulator import splits_gram
from ctxvar.extraction.budget import activation_bytes, batch_bytes, reserve_bytes, smaller_dtype, state_bytes
from ctxvar.extraction.hand_over import LayerHandOver
from ctxvar.extraction.passes import forward_options
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.type_points import TypePoints
from ctxvar.models import loading
from ctxvar.models.batching import DeviceBatch, ShardBatches, padded_batch_bytes

log = logging.getLogger(__name__)

ORDERS = ("auto", "layer_major", "whole_model")  # config ``extraction_order``


@dataclass(frozen=True)
class Blocks:
    """The model's blocks: its ``ModuleList`` at ``name``; ``order``: the module each layer runs, in turn (one each,
    or, for layers that share their weights, as ALBERT's groups, each module for a run of consecutive layers);
    ``form``: what a block returns (:class:`OutputForm`), learnt on the probe."""

    name: str
    modules: torch.nn.ModuleList
    order: tuple[int, ...] = ()
    form: "OutputForm | None" = None

    def __post_init__(self):
        if not self.order:
            object.__setattr__(self, "order", tuple(range(len(self.modules))))

    @property
    def shared(self) -> bool:
        """Whether some module runs for several layers."""
        return len(self.order) != len(self.modules)

    def of_layer(self, index: int) -> torch.nn.Module:
        """The module that computes hidden state ``index + 1`` from hidden state ``index``."""
        return self.modules[self.order[index]]


@dataclass(frozen=True)
class OutputForm:
    """What a block's forward returns: its output hidden states alone (``kind`` "tensor"), or them first in a
    ``tuple`` or ``list`` of ``length`` (attention weights, a cache: None here, as nothing asks for them), or
    first in a transformers ``ModelOutput`` of class ``cls`` and first field ``field``."""

    kind: str
    length: int = 1
    cls: type | None = None
    field: str | None = None

    @classmethod
    def of(cls, output, hidden: torch.Tensor) -> "OutputForm":
        """The form of a real block ``output`` for input ``hidden``; :class:`Unrecognised` unless its hidden states
        come first with the input's shape."""
        if isinstance(output, torch.Tensor):
            form = cls("tensor")
        elif isinstance(output, (tuple, list)) and not hasattr(output, "keys"):
            form = cls("tuple" if isinstance(output, tuple) else "list", len(output))
        elif hasattr(output, "keys") and hasattr(output, "to_tuple") and len(output.keys()):
            form = cls("model_output", cls=type(output), field=next(iter(output.keys())))
        else:
            raise Unrecognised(f"a block returns {type(output).__name__}, not hidden states")
        first = form.hidden(output)
        if not isinstance(first, torch.Tensor) or first.shape != hidden.shape:
            got = tuple(first.shape) if isinstance(first, torch.Tensor) else type(first).__name__
            raise Unrecognised(f"a block returns {got} first, not hidden states of its input's shape")
        return form

    def hidden(self, output) -> torch.Tensor:
        """The output hidden states in a block's ``output`` of this form."""
        return output if self.kind == "tensor" else output[0]

    def wrap(self, hidden: torch.Tensor):
        """``hidden`` as a block of this form returns it, the other entries None."""
        if self.kind == "tensor":
            return hidden
        if self.kind == "model_output":
            return self.cls(**{self.field: hidden})
        entries = (hidden, *[None] * (self.length - 1))
        return entries if self.kind == "tuple" else list(entries)


TENSOR = OutputForm("tensor")


class BlockCall(NamedTuple):
    """A block's call arguments besides its input hidden states (positional ``args`` after it, ``kwargs``)."""

    args: tuple
    kwargs: dict


class Unrecognised(Exception):
    """The model's layout is not one the driver can run block by block; the message says why."""


def find_blocks(model: torch.nn.Module) -> Blocks:
    """The model's blocks: its first ``ModuleList`` of ``num_hidden_layers`` modules (in ``named_modules`` order: the
    outermost); else, for layers that share weights (ALBERT's ``num_hidden_groups``), the longest whose length
    divides ``num_hidden_layers`` (the innermost of those), layer i running module ⌊i·G/L⌋ of G; else
    :class:`Unrecognised`."""
    lists = [(name, module) for name, module in model.named_modules() if isinstance(module, torch.nn.ModuleList)]
    if not lists:
        raise Unrecognised(f"{type(model).__name__} has no ModuleList of blocks")
    expected = getattr(model.config, "num_hidden_layers", None)
    if not isinstance(expected, int) or expected < 1:
        raise Unrecognised(f"{type(model).__name__}'s config gives no number of hidden layers")
    whole = [(name, modules) for name, modules in lists if len(modules) == expected]
    if whole:
        return Blocks(*whole[0])
    shared = [(name, modules) for name, modules in lists if 0 < len(modules) < expected and not expected % len(modules)]
    if shared:  # the innermost of the longest: transformers records hidden states on its modules
        name, modules = max(shared, key=lambda item: (len(item[1]), item[0].count(".")))
        return Blocks(name, modules, tuple(i * len(modules) // expected for i in range(expected)))
    name, modules = max(lists, key=lambda item: len(item[1]))
    raise Unrecognised(
        f"{type(model).__name__}'s longest ModuleList {name!r} has {len(modules)} modules, its config "
        f"{expected} hidden layers"
    )


def _split_input(args: tuple, kwargs: dict) -> tuple[torch.Tensor, BlockCall]:
    """A block call's input hidden states (first positional, else ``hidden_states=``) and the rest."""
    if args:
        return args[0], BlockCall(args[1:], kwargs)
    rest = dict(kwargs)
    return rest.pop("hidden_states"), BlockCall((), rest)


@contextlib.contextmanager
def _stubbed(blocks: Blocks, forward_of):
    """Within the block, the blocks' ``forward`` is ``forward_of(layer, module)`` at the model's ``layer``-th block
    call, which is to ``module`` (the module's hooks still run around it); after it, what it was (a wrapper set on
    the instance, as accelerate's hooks set one, is put back)."""
    own = [block.__dict__.get("forward") for block in blocks.modules]
    calls = itertools.count()
    for index, block in enumerate(blocks.modules):

        def stub(*args, _module=index, **kwargs):
            return forward_of(next(calls), _module)(*args, **kwargs)

        stub.is_stub = True  # does no block's work: streamed weights are not read for it
        block.forward = stub
    try:
        yield
    finally:
        for block, forward in zip(blocks.modules, own):
            if forward is None:
                del block.forward
            else:
                block.forward = forward


def recorded_calls(model, blocks: Blocks, batch: DeviceBatch, options: dict) -> tuple[torch.Tensor, list[BlockCall]]:
    """Hidden state 0 of ``batch`` (block 0's input) and every block's :class:`BlockCall`, as the model's forward
    builds them, with no block's work done (each stub returns its input in the blocks' :class:`OutputForm`).
    :class:`Unrecognised` unless the blocks are called as ``blocks.order`` says, each layer once, in turn."""
    calls: list[tuple[int, torch.Tensor, BlockCall]] = []
    form = blocks.form or TENSOR

    def recorder(layer: int, module: int):
        def forward(*args, **kwargs):
            hidden, call = _split_input(args, kwargs)
            calls.append((module, hidden, call))
            return form.wrap(hidden)

        return forward

    with _stubbed(blocks, recorder):
        model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, **options)
    order = tuple(module for module, _, _ in calls)
    if order != blocks.order:
        raise Unrecognised(
            f"{type(model).__name__}'s forward calls its blocks {blocks.name!r} in the order {list(order[:8])}, "
            f"not {list(blocks.order[:8])} (each layer once, in turn)"
        )
    return calls[0][1], [call for _, _, call in calls]


def run_block(blocks: Blocks, layer: int, hidden: torch.Tensor, call: BlockCall) -> torch.Tensor:
    """Hidden state ``layer + 1``: the output hidden states of the block of ``layer`` for input ``hidden``."""
    form = blocks.form or TENSOR
    output = blocks.of_layer(layer)(hidden, *call.args, **call.kwargs)
    if form.kind == "tensor" and not isinstance(output, torch.Tensor):
        raise Unrecognised(f"block {type(blocks.of_layer(layer)).__name__} returns {type(output).__name__}")
    return form.hidden(output)


def last_hidden_state(model, blocks: Blocks, batch: DeviceBatch, options: dict, output: torch.Tensor) -> torch.Tensor:
    """The last entry of ``output_hidden_states`` for ``batch`` when the last block returns ``output``: the model's
    forward with every other block passing its input through (its final norm, or projection, if any, then
    applies)."""
    last = len(blocks.order) - 1
    form = blocks.form or TENSOR

    def passing(layer: int, module: int):
        def forward(*args, **kwargs):
            return form.wrap(output if layer == last else _split_input(args, kwargs)[0])

        return forward

    with _stubbed(blocks, passing):
        result = model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True, **options
        )
    return result.hidden_states[-1]


def batch_states(model, blocks: Blocks, batch: DeviceBatch, options: dict) -> list[torch.Tensor]:
    """Every hidden state of ``batch``, block by block (:func:`recorded_calls`, :func:`run_block`,
    :func:`last_hidden_state`)."""
    hidden, calls = recorded_calls(model, blocks, batch, options)
    states = [hidden]
    for layer, call in enumerate(calls):
        states.append(run_block(blocks, layer, states[-1], call))
    states[-1] = last_hidden_state(model, blocks, batch, options, states[-1])
    return states


def output_form(model, blocks: Blocks, batch: DeviceBatch, options: dict) -> tuple[Blocks, tuple]:
    """``blocks`` with the :class:`OutputForm` their first call returns, and the whole model's
    ``output_hidden_states`` for ``batch``, learnt in one forward pass of the whole model."""
    seen = []

    def hook(module, args, kwargs, output):
        if not seen:
            seen.append(OutputForm.of(output, _split_input(args, kwargs)[0]))

    handle = blocks.of_layer(0).register_forward_hook(hook, with_kwargs=True)
    try:
        whole = model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True, **options
        ).hidden_states
    finally:
        handle.remove()
    if not seen:
        raise Unrecognised(f"{type(model).__name__}'s forward does not call its blocks {blocks.name!r}")
    return dataclasses.replace(blocks, form=seen[0]), whole


def probe_mismatch(model, blocks: Blocks, batch: DeviceBatch) -> tuple[Blocks, str | None]:
    """``blocks`` with their :class:`OutputForm`, and None when :func:`batch_states` of ``batch`` equal the
    whole-model ``output_hidden_states`` bit for bit; else what differs (:class:`Unrecognised` where the layout
    is not one the driver runs)."""
    options = forward_options(model)
    with torch.inference_mode():
        blocks, whole = output_form(model, blocks, batch, options)
        states = batch_states(model, blocks, batch, options)
    if whole is None or len(whole) != len(states):
        got = None if whole is None else len(whole)
        return blocks, f"the whole model gives {got} hidden states, the blocks {len(states)}"
    for layer, (expected, got) in enumerate(zip(whole, states)):
        if not _same_bits(expected, got):
            return blocks, f"hidden state {layer} of a probe differs from the whole model's"
    return blocks, None


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def probe_batch(batches: list[DeviceBatch]) -> DeviceBatch:
    """Two rows of the shortest (last) batch: the probe of :func:`probe_mismatch`."""
    last = batches[-1]
    return DeviceBatch(last.input_ids[:2], last.attention_mask[:2], None, None)


def layer_major_verdict(model, batch: DeviceBatch) -> tuple[Blocks | None, str | None]:
    """``(blocks, None)`` when ``model`` runs layer-major bit for bit on the probe ``batch``; else ``(None, the
    reason)``: a layout :func:`find_blocks` and :func:`probe_mismatch` refuse, or a probe that fails in any way
    but through ctxvar's own checks (a file changed under the job) or the device's memory, which are raised."""
    try:
        blocks, mismatch = probe_mismatch(model, find_blocks(model), batch)
        return (blocks, None) if mismatch is None else (None, f"layer by layer, {mismatch}")
    except Unrecognised as error:
        return None, str(error)
    except (CtxvarError, torch.cuda.OutOfMemoryError):
        raise  # a file that changed, the device's limit: not the layout's, and the whole model would meet them too
    except Exception as error:  # the model's own code raises many types; each means "not block by block"
        return None, f"its probe failed: {type(error).__name__}: {first_line(error)}"


def choose_blocks(model, batches: list[DeviceBatch], order: str, model_id: str) -> Blocks | None:
    """The blocks to run layer-major, or None for the whole-model path: ``order`` (config ``extraction_order``)
    ``whole_model``, or ``auto`` with a model :func:`layer_major_verdict` refuses on :func:`probe_batch` (logged
    in one line with the family and the reason). ``layer_major`` with such a model is a
    :class:`ctxvar.errors.ModelLoadError` naming the same, before any work."""
    if order == "whole_model" or not batches:
        return None
    blocks, reason = layer_major_verdict(model, probe_batch(batches))
    if reason is None:
        return blocks
    family = getattr(model.config, "model_type", type(model).__name__)
    if order == "layer_major":
        raise ModelLoadError(
            f"model {model_id!r} ({family}) cannot run layer-major: {reason}; set extraction_order: auto or whole_model"
        )
    log.info("model %r (%s) runs whole-model, not layer-major: %s", model_id, family, reason)
    return None


@dataclass(frozen=True)
class MemoryPlan:
    """Device bytes of a layer-major job (see :func:`memory_plan`); ``free``: the device's free memory with the
    model loaded (its resident weights), None on a CPU (host memory, no budget). ``resident_weights``: the weights
    the device holds at once: all of them, or, ``streamed``, those outside the blocks and two blocks."""

    weights: int
    block_weights: int
    resident_weights: int
    streamed: bool
    hidden_states: int
    layer_sums: int
    transients: int
    free: int | None
    reserve: int
    states_on_host: bool
    cpu_budget: int | None = None  # on a CPU, the job's max_device_mb in bytes (None: no budget)
    hand_over_beside: bool = False  # a GPU with room for a second layer's sums: handed over beside the batches

    def device_bytes(self) -> int:
        """The plan's device memory: resident weights, hidden states (when on the device), one layer's sums and
        transients."""
        states = 0 if self.states_on_host else self.hidden_states
        return self.resident_weights + states + self.layer_sums + self.transients

    def describe(self) -> str:
        gb = 1e9
        where = "pinned host memory, moved per batch" if self.states_on_host else "the device"
        budget = "no device budget" if self.cpu_budget is None else f"a budget of {self.cpu_budget / gb:.3f} GB"
        free = f"host memory, {budget}" if self.free is None else f"{self.free / gb:.2f} GB free"
        streamed = (
            f"; streamed from the files: {self.resident_weights / gb:.3f} GB resident, the weights outside the "
            "blocks and two blocks (the one running, the next being read)"
            if self.streamed
            else ""
        )
        beside = (
            "; each layer's sums handed to the host beside the next layer's batches (two layers' sums at once)"
            if self.hand_over_beside
            else "; each layer's sums handed to the host between the layers (no room for two)"
        )
        return (
            f"weights {self.weights / gb:.3f} GB ({self.block_weights / gb:.3f} GB per block{streamed}), hidden states "
            f"{self.hidden_states / gb:.3f} GB (on {where}), one layer's sums {self.layer_sums / gb:.3f} GB, "
            f"transients {self.transients / gb:.3f} GB; {free} once the model is loaded, reserve "
            f"{self.reserve / gb:.2f} GB{beside}"
        )


def memory_plan(
    settings: ExtractionSettings, job, blocks: Blocks, padded: ShardBatches, point_bytes: int = 0
) -> MemoryPlan:
    """The device memory of a layer-major job (:func:`planned_memory`) from its model (the job's ``streamed``
    weights, :class:`ctxvar.extraction.streamed_weights.StreamedWeights`, or the whole model loaded), its
    shard's ``padded`` batches, Fig. 1's points (``point_bytes``) and, on a GPU, the device's free memory with
    the model loaded. ``job``: a :class:`ctxvar.extraction.job.ShardRun`."""
    width = int(job.encoded.lengths.max()) if len(job.encoded.lengths) else 1
    device_memory = torch.cuda.mem_get_info(job.device) if job.device.type == "cuda" else None
    return planned_memory(
        settings,
        job.model.config,
        job.d,
        ModelWeights.of(job.model, blocks),
        getattr(job, "streamed", None) is not None,
        ShardSize(int(padded.grid[-1]), width, len(job.types), job.n_words, padded.device_bytes()),
        splits_gram(loading.DTYPES[settings.dtype], job.device),
        device_memory,
        f"model {settings.model['id']!r} on {job.device}",
        point_bytes,
    )


@dataclass(frozen=True)
class ModelWeights:
    """Device bytes of a model's weights: all of them, the largest block's and all blocks' together."""

    weights: int
    block_weights: int
    in_blocks: int

    @classmethod
    def of(cls, model: torch.nn.Module, blocks: Blocks) -> "ModelWeights":
        """From the parameters as built (loaded, or on ``meta`` in the job's dtype)."""
        per_block = [parameter_bytes(block) for block in blocks.modules]
        return cls(parameter_bytes(model), max(per_block), sum(per_block))

    def resident(self, streamed: bool) -> int:
        """The weights on the device at once: all, or, ``streamed``, those outside the blocks and two blocks."""
        return self.weights - self.in_blocks + 2 * self.block_weights if streamed else self.weights


def parameter_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


@dataclass(frozen=True)
class ShardSize:
    """What a layer-major plan needs of a shard: its padded tokens, its longest row (``width``), its types U, its
    raw ids W (ethayarajh; None: U) and its batches' device bytes
    (:func:`ctxvar.models.batching.padded_batch_bytes`)."""

    padded_tokens: int
    width: int
    n_types: int
    n_words: int | None
    batch_bytes: int


def planned_memory(
    settings: ExtractionSettings,
    config,
    d: int,
    weights: ModelWeights,
    streamed: bool,
    shard: ShardSize,
    split: bool,
    device_memory: tuple[int, int] | None,
    what: str,
    point_bytes: int = 0,
) -> MemoryPlan:
    """The device memory of a layer-major job, the one arithmetic of a job (:func:`memory_plan`) and of a plan
    from a model's shape (:func:`shape_plan`): the model's ``weights`` (all resident, or, ``streamed``, those
    outside the blocks and two blocks), the shard's hidden states (padded tokens × d in the forward dtype), one
    layer's sums (:func:`state_bytes` of one layer), one batch's transients through one block
    (:func:`activation_bytes` with two hidden states for ``config`` at width ``d``, the batch's buffers of
    :func:`batch_bytes`, ``split``: the split Σxxᵀ, the shard's padded batches) and Fig. 1's points
    (``point_bytes``).

    ``device_memory``: a GPU's ``(free, total)`` with the model loaded (its resident weights, the streamed blocks
    not yet), None on a CPU (no budget beyond ``max_device_mb``). On a GPU, a device that cannot hold one layer's
    sums and one batch's transients (and two streamed blocks) beside the model and the reserve
    (:func:`reserve_bytes`) is a :class:`DeviceMemoryError` naming the numbers and the remedy (``what``: the model
    and device it names); hidden states that do not fit beside them go to pinned host memory."""
    element = loading.DTYPES[settings.dtype].itemsize
    resident = weights.resident(streamed)
    blocks_to_come = 2 * weights.block_weights if streamed else 0  # not on the device when the free memory is read
    tokens = max(settings.batch_tokens, shard.width)
    hidden = shard.padded_tokens * d * element
    one_layer = state_bytes(1, shard.n_types, d, settings.geometry, shard.n_words)
    transients = (
        activation_bytes(config, 2, d, tokens, shard.width, element)
        + batch_bytes(1, tokens, d, settings.geometry, split)
        + shard.batch_bytes
        + point_bytes
    )
    parts = (weights.weights, weights.block_weights, resident, streamed, hidden, one_layer, transients)
    if device_memory is None:
        return MemoryPlan(*parts, None, 0, False, settings.max_device_bytes)
    free, total = device_memory
    reserve = reserve_bytes(total)
    room = free - reserve - one_layer - transients - blocks_to_come
    if room < 0:
        streamed_blocks = f" and two streamed blocks ({blocks_to_come / 1e9:.2f} GB)" if streamed else ""
        raise DeviceMemoryError(
            f"{what}: {free / 1e9:.2f} GB free once it is loaded "
            f"({weights.weights / 1e9:.2f} GB of weights, {weights.block_weights / 1e9:.2f} GB per block) cannot "
            f"hold one layer's sums ({one_layer / 1e9:.2f} GB for {shard.n_types} types at d={d}) and one batch of "
            f"{tokens} tokens through a block ({transients / 1e9:.2f} GB){streamed_blocks} beside a reserve of "
            f"{reserve / 1e9:.2f} GB: use "
            f"{smaller_dtype(settings)}a lower batch_tokens, more shards (fewer types per shard) or a GPU with "
            "more memory"
        )
    on_host = hidden > room
    capped = bool(settings.max_state_bytes) and 2 * one_layer > settings.max_state_bytes  # a cap on the sums' bytes
    beside = not capped and room - (0 if on_host else hidden) >= one_layer  # a second layer's sums fit
    return MemoryPlan(*parts, free, reserve, on_host, hand_over_beside=beside)


def shape_weights(config, dtype: str) -> ModelWeights:
    """The weights of the model a job builds from a transformers ``config`` in ``dtype``: built on ``meta``
    (:func:`ctxvar.models.loading.empty_from_config`), no weight read."""
    model = loading.empty_from_config(config, dtype)
    return ModelWeights.of(model, find_blocks(model))


def beside_weights_bound(config, settings: ExtractionSettings, d: int, device: torch.device) -> int:
    """What a layer-major job holds on the device beside its weights at the least, bounded from above before its
    shard is read: one layer's sums with every vocabulary entry a type (``config.vocab_size``; raw ids as many) and
    one batch of ``batch_tokens`` tokens in rows as long as the model's positions allow, through a block
    (:func:`planned_memory`'s one layer and transients). Whether to stream a model's weights is decided from its
    weights and this (:func:`streams`): loading them whole is chosen only where it leaves this room."""
    vocabulary, tokens = int(config.vocab_size), settings.batch_tokens
    width = min(tokens, loading.max_positions(config) or tokens)
    words = vocabulary if settings.geometry.ethayarajh else None
    element = loading.DTYPES[settings.dtype].itemsize
    split = splits_gram(loading.DTYPES[settings.dtype], device)
    return (
        state_bytes(1, vocabulary, d, settings.geometry, words)
        + activation_bytes(config, 2, d, tokens, width, element)
        + batch_bytes(1, tokens, d, settings.geometry, split)
    )


def streams(weights: int, beside: int, budget: int) -> bool:
    """Whether a job streams its weights (``weights`` bytes, all of them): when they and what the job needs beside
    them (``beside``, at least :func:`beside_weights_bound`) exceed the device ``budget``."""
    return weights + beside > budget


def shape_plan(
    config,
    weights: ModelWeights,
    settings: ExtractionSettings,
    padded_tokens: int,
    n_types: int,
    device_total: int,
    width: int,
    streamed: bool | None = None,
) -> MemoryPlan:
    """:func:`planned_memory` of a layer-major job on a GPU of ``device_total`` bytes, from the model's shape
    alone: a transformers ``config`` and its :func:`shape_weights` in ``settings.dtype``, a shard of
    ``padded_tokens`` padded tokens in rows of at most ``width``, holding ``n_types`` types (raw ids: as many),
    every token real. As a job decides (:func:`ctxvar.extraction.streamed_weights.load_for_job`), the weights
    stream when they and :func:`beside_weights_bound` exceed the card's memory less the reserve (:func:`streams`),
    and the free memory is the card's less the resident weights (the CUDA context within the reserve);
    ``streamed`` True or False plans the other choice."""
    cuda = torch.device("cuda")
    if streamed is None:
        budget = device_total - reserve_bytes(device_total)
        streamed = streams(weights.weights, beside_weights_bound(config, settings, config.hidden_size, cuda), budget)
    loaded = weights.resident(streamed) - (2 * weights.block_weights if streamed else 0)
    words = settings.geometry.ethayarajh
    shard = ShardSize(padded_tokens, width, n_types, None, padded_batch_bytes(padded_tokens, padded_tokens, words))
    return planned_memory(
        settings,
        config,
        config.hidden_size,
        weights,
        streamed,
        shard,
        splits_gram(loading.DTYPES[settings.dtype], cuda),
        (device_total - loaded, device_total),
        f"model {settings.model['id']!r} on a card of {device_total / 1e9:.1f} GB",
    )


class HiddenStates:
    """Each batch's current hidden states: on the device, or (``on_host``) in host memory (pinned when the device
    is a GPU) moved per batch."""

    def __init__(self, device: torch.device, on_host: bool):
        self.device, self.on_host = device, on_host
        self._states: list[torch.Tensor | None] = []

    def append(self, state: torch.Tensor) -> None:
        self._states.append(None)
        self[len(self._states) - 1] = state

    def __getitem__(self, index: int) -> torch.Tensor:
        state = self._states[index]
        return state.to(self.device, non_blocking=True) if self.on_host else state

    def __setitem__(self, index: int, state: torch.Tensor) -> None:
        if not self.on_host:
            self._states[index] = state
            return
        held = self._states[index]
        if held is None or held.shape != state.shape:
            held = torch.empty(state.shape, dtype=state.dtype, pin_memory=self.device.type == "cuda")
            self._states[index] = held
        held.copy_(state)


def layer_major_sums(
    job,
    padded: ShardBatches,
    blocks: Blocks,
    settings: ExtractionSettings,
    plan: MemoryPlan,
    sampled=None,
    points: TypePoints | None = None,
) -> Iterator[list]:
    """Per layer ℓ = 0 … L in order, the :func:`ctxvar.extraction.passes.host_layers` list of that one layer:
    every batch embedded once, then each block run over every batch's hidden states into one layer's sums, made
    and handed to the host beside the batches of the layers around it where the plan has room for two layers'
    sums (:class:`ctxvar.extraction.hand_over.LayerHandOver`); ``points`` (Fig. 1's) take their layer's rows. ``job``: a
    :class:`ctxvar.extraction.job.ShardRun`; with its ``streamed`` weights
    (:class:`ctxvar.extraction.streamed_weights.StreamedWeights`), block ℓ − 1 is read before layer ℓ (block ℓ read
    ahead while it runs) and freed after it."""
    model, device = job.model, job.device
    streamed = getattr(job, "streamed", None)
    reading = streamed.fetch(0) if streamed is not None else None
    on_device = padded.to(device)
    options = forward_options(model)
    states = HiddenStates(device, plan.states_on_host)
    calls: list[list[BlockCall]] = []
    hits = None
    n_blocks = len(blocks.order)
    hand_over = LayerHandOver(job, settings, sampled, n_blocks + 1, plan.hand_over_beside)
    with torch.inference_mode(), contextlib.closing(hand_over):
        for batch in on_device:
            hidden, batch_calls = recorded_calls(model, blocks, batch, options)
            states.append(hidden)
            calls.append(batch_calls)
        log.info("the blocks' recorded call arguments: %.3f GB", argument_bytes(calls) / 1e9)
        for layer in tqdm(range(n_blocks + 1), desc="layers", unit="layer", disable=not settings.progress):
            sums = hand_over.sums(layer)
            if hits is None:
                hits = (
                    sums.sample.locate(padded.tokens, padded.real)
                    if sums.sample is not None
                    else [None] * len(on_device)
                )
            if reading is not None and layer > 0:
                streamed.install(layer - 1, reading.result())
                reading = streamed.fetch(layer) if layer < n_blocks else None
            for b, batch in enumerate(on_device):
                state = states[b]
                if layer > 0:
                    state = run_block(blocks, layer - 1, state, calls[b][layer - 1])
                    if layer == n_blocks:
                        state = last_hidden_state(model, blocks, batch, options, state)
                    else:
                        states[b] = state
                words = {"word_index": batch.word_index} if batch.word_index is not None else {}
                # every index reads this layer's states: the sums read only their own layer's
                sums.accumulate([state] * job.n_layers, batch.positions, batch.type_index, hits[b], **words)
                if points is not None and layer == points.layer:
                    points.add(layer, state.reshape(-1, state.shape[-1]), batch.positions)
                del state
            if streamed is not None and layer > 0:
                streamed.free(layer - 1)
            handed = hand_over.handed(sums, layer)
            del sums
            hand_over.ahead(layer + 2)
            if layer == n_blocks:  # while the last layer is written, the generator holds nothing on the device
                del model, blocks, states, calls, hidden, batch_calls
                handed += hand_over.rest()
            yield from handed


def argument_bytes(calls: list[list[BlockCall]]) -> int:
    """Bytes of the distinct tensors (by storage) among the recorded calls' arguments (masks, rotary tables)."""
    seen = {}
    for batch_calls in calls:
        for call in batch_calls:
            for value in (*call.args, *call.kwargs.values()):
                for tensor in value if isinstance(value, (tuple, list)) else (value,):
                    if isinstance(tensor, torch.Tensor):
                        seen[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
    return sum(seen.values())
