"""The whole-model path of a job: one forward pass over the shard's padded batches, every layer's sums
(:class:`ctxvar.extraction.accumulator.EmbeddingSums`) added as each batch's hidden states come, the leading
layers' on the device and, where the device budget holds fewer than all of them, the others' in host memory;
then those sums in host memory, layer by layer."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ctxvar.errors import ModelLoadError, StatisticsError
from ctxvar.extraction.accumulator import EmbeddingSums, splits_gram
from ctxvar.extraction.host_copy import to_host
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.type_points import TypePoints
from ctxvar.models import loading
from ctxvar.models.batching import ShardBatches
from ctxvar.stats.sums import LayerSums
from ctxvar.stats.word_files import LayerSentences, LayerWords

HOST = torch.device("cpu")


def whole_model_sums(
    job,
    padded: ShardBatches,
    on_device: int,
    settings: ExtractionSettings,
    sampled: dict | None = None,
    points: TypePoints | None = None,
):
    """One forward pass over the ``padded`` batches into the sums of every hidden state: the first ``on_device``
    on the job's device, the rest in host memory (each batch's hidden states of those layers copied there);
    yields, once, the list of :func:`host_layers` of every layer, the device's state freed first. ``points``
    collects Fig. 1's points. ``job``: a :class:`ctxvar.extraction.job.ShardRun` (its ``n_layers``, ``types``,
    ``d``, ``device``, ``n_words`` and ``run``, and what :func:`layer_words` reads)."""
    split = splits_gram(loading.DTYPES[settings.dtype], job.device)  # the host's layers take the device's product
    parts = [
        job_sums(job, layers, settings, sampled, device, split)
        for layers, device in ((range(on_device), job.device), (range(on_device, job.n_layers), HOST))
        if len(layers)
    ]
    job.run(parts, settings, padded, points)
    layers = [layer for part in parts for layer in host_layers(part, job, settings)]
    del parts
    yield layers


def job_sums(
    job, layers, settings: ExtractionSettings, sampled: dict | None, device=None, split: bool | None = None
) -> EmbeddingSums:
    """Empty sums of ``layers`` for ``job`` (its ``n_layers``, ``types``, ``d``, ``last_width``, ``device``,
    ``n_words``) on
    ``device`` (default: the job's), with the sampled positions of
    :func:`ctxvar.extraction.job.sample_positions` (None: no sample); ``split``: Σxxᵀ's product
    (:class:`EmbeddingSums`)."""
    return EmbeddingSums(
        layers,
        job.n_layers,
        len(job.types),
        job.d,
        job.device if device is None else device,
        settings.geometry,
        sampled["tokens"] if sampled else None,
        job.n_words or 0,
        loading.DTYPES[settings.dtype],
        split,
        job.last_width,
    )


def host_layers(sums: EmbeddingSums, job, settings: ExtractionSettings) -> list:
    """The layers of ``sums``, once every batch is in, as a list of ``(LayerSums, (Σxxᵀ or None, the declared
    per-layer sums by name), sampled points or None, (LayerWords, LayerSentences) or None)`` in host memory;
    a :class:`StatisticsError` when a sum is not finite (nothing is written then). ``job``: a
    :class:`ctxvar.extraction.job.ShardRun` (its ``types``, and what :func:`layer_words` reads)."""
    if not sums.all_finite():
        raise StatisticsError(
            f"model {settings.model['id']!r}: hidden states contain NaN or Inf with dtype {settings.dtype}; "
            "nothing was written: "
            + (
                "fp16 overflow is common, use dtype: float32 or bfloat16"
                if settings.dtype == "float16"
                else f"the model's weights hold NaN or Inf, or values that overflow {settings.dtype}: "
                "check and restore them"
            )
        )
    outer = sums.moments.to_numpy() if sums.moments is not None else None
    layer_values = {name: to_host(total) for name, (_, total) in sums.layer_sums.items()}
    points = sums.sample.to_numpy() if sums.sample is not None else None
    words = layer_words(sums, job) if sums.words is not None else None
    layers = [
        (
            layer,
            (outer[i] if outer is not None else None, {name: values[i] for name, values in layer_values.items()}),
            points[i] if points is not None else None,
            words[i] if words is not None else None,
        )
        for i, layer in enumerate(layer_sums(sums, job.types))
    ]
    return layers


def run_batches(model, sums, batches: ShardBatches, device, progress: bool, points: TypePoints | None = None) -> None:
    """Forward every batch with all hidden states and add them to ``sums``, an :class:`EmbeddingSums` or a list of
    them (and to ``points``, if given).

    The padded batches (and, with a sample, the sampled tokens' places in them) move to
    the device once, before the first batch; within the loop nothing waits for the host, but for sums kept in
    host memory (:func:`add_batch`). A forward pass holds only its own activations (the budget's
    :func:`ctxvar.extraction.budget.activation_bytes`): decoders build no KV cache, and
    a batch's outputs are freed before the next batch's forward pass.
    """
    parts = list(sums) if isinstance(sums, (list, tuple)) else [sums]
    on_device = batches.to(device)
    hits = [
        part.sample.locate(batches.tokens, batches.real)
        if getattr(part, "sample", None) is not None
        else [None] * len(batches)
        for part in parts
    ]
    options = forward_options(model)
    with torch.inference_mode():
        for index, batch in tqdm(
            enumerate(on_device), total=len(batches), desc="batches", unit="batch", disable=not progress, mininterval=5
        ):
            output = model(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True, **options
            )
            if getattr(output, "hidden_states", None) is None:
                raise ModelLoadError(
                    f"model {type(model).__name__} returned no hidden states; use an encoder or decoder model"
                )
            for part, part_hits in zip(parts, hits):
                add_batch(part, output.hidden_states, batch, part_hits[index])
            if points is not None:
                states = output.hidden_states[points.layer]
                points.add(points.layer, states.reshape(-1, states.shape[-1]), batch.positions)
            del output  # else it lives on through the next forward pass, which rebinds it only once it returns


def add_batch(sums: EmbeddingSums, hidden_states, batch, sample_hits) -> None:
    """``sums.accumulate`` of one batch's hidden states; for sums on another device than the batch (host memory),
    each of their layers' hidden states is copied there as the sums reach it (:class:`CopiedLayers`: one layer's
    copy at a time), and the batch's indices before."""
    positions, type_index, word_index = batch.positions, batch.type_index, batch.word_index
    if hidden_states[0].device != sums.device:
        hidden_states = CopiedLayers(hidden_states, set(sums.layers), sums.device)
        positions, type_index = positions.to(sums.device), type_index.to(sums.device)
        word_index = word_index.to(sums.device) if word_index is not None else None
        sample_hits = tuple(t.to(sums.device) for t in sample_hits) if sample_hits is not None else None
    words = {"word_index": word_index} if word_index is not None else {}
    sums.accumulate(hidden_states, positions, type_index, sample_hits, **words)


class CopiedLayers(Sequence):
    """The hidden states, those of ``layers`` copied to ``device`` when read; the last copy is kept until another
    layer is read, so host memory holds one layer's copy at a time."""

    def __init__(self, hidden_states, layers: set[int], device: torch.device):
        self.hidden_states, self.layers, self.device = hidden_states, layers, device
        self.last: tuple[int, torch.Tensor] | None = None

    def __len__(self) -> int:
        return len(self.hidden_states)

    def __getitem__(self, index: int) -> torch.Tensor:
        if index not in self.layers:
            return self.hidden_states[index]
        if self.last is None or self.last[0] != index:
            self.last = None  # the previous copy is freed before the next is made
            self.last = (index, self.hidden_states[index].to(self.device))
        return self.last[1]


def forward_options(model) -> dict:
    """Keyword arguments of every forward pass besides the batch: ``use_cache=False`` for models whose config has a
    cache on (decoders, by default), which would otherwise return every layer's keys and values, and
    ``return_dict=True`` for a config that says ``return_dict: false`` (its outputs would be a plain tuple)."""
    options = {"use_cache": False} if getattr(model.config, "use_cache", False) else {}
    return {**options, "return_dict": True} if getattr(model.config, "return_dict", True) is False else options


PROBE_TOLERANCE = 1e-5  # of a hidden state's largest magnitude: the batch's two rows may round apart


def attention_kind(model, device, whole: bool = True) -> str | None:
    """models.csv's ``attention``: what the model declares (:func:`ctxvar.models.loading.declared_attention`),
    else, for a whole model (not one whose weights are streamed per block), what one forward pass shows. Two rows
    that differ only in their last of three tokens run as one batch: "causal" when every hidden state of the first
    two positions is the same in both rows (to :data:`PROBE_TOLERANCE` of its largest magnitude), else
    "bidirectional". None when nothing is declared and the model is not whole."""
    declared = loading.declared_attention(model)
    if declared is not None or not whole:
        return declared
    middle = (getattr(model.config, "vocab_size", None) or model.get_input_embeddings().num_embeddings) // 2
    ids = torch.tensor([[middle, middle + 1, middle + 2], [middle, middle + 1, middle + 3]], device=device)
    with torch.inference_mode():
        output = model(
            input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True, **forward_options(model)
        )
    for states in output.hidden_states:
        earlier = states[:, :2].float()
        if (earlier[0] - earlier[1]).abs().max() > PROBE_TOLERANCE * earlier.abs().max():
            return "bidirectional"
    return "causal"


def started(items):
    """``items`` (an iterator) with its first item computed now."""
    first = next(items)
    return itertools.chain([first], items)


def layer_sums(sums: EmbeddingSums, types: np.ndarray):
    """Per-layer :class:`LayerSums` from the device state (every type in ``types`` occurred)."""
    arrays = sums.types.to_numpy()
    for i, layer in enumerate(sums.layers):
        yield LayerSums(
            layer, types, arrays["count"], {item.name: arrays[item.name][i] for item in sums.types.declared}
        )


def layer_words(sums: EmbeddingSums, job) -> list[tuple[LayerWords, LayerSentences]]:
    """Per layer of ``sums``, its words (the shard's raw token ids, spelled by the tokenizer) and sentence sums;
    ``job``: a :class:`ctxvar.extraction.job.ShardRun` (its ``tokenizer`` and ``word_ids``)."""
    arrays = sums.words.to_numpy(to_host)
    tokens = np.array(job.tokenizer.convert_ids_to_tokens(job.word_ids.tolist()), dtype=object)
    return [
        (
            LayerWords(layer, job.word_ids, tokens, arrays["count"], arrays["sum_unit"][i]),
            LayerSentences(
                layer,
                int(arrays["n_contexts"]),
                float(arrays["intra_sum"][i]),
                float(arrays["sum_mean_unit_sq"][i]),
                arrays["sum_mean_unit"][i],
            ),
        )
        for i, layer in enumerate(sums.layers)
    ]
