"""The forward passes of a job: per group of layers, one pass over the shard's padded batches into the device
sums (:class:`ctxvar.extraction.accumulator.EmbeddingSums`), then those sums in host memory, layer by layer."""

from __future__ import annotations

import itertools

import numpy as np
import torch
from tqdm.auto import tqdm

from ctxvar.errors import ModelLoadError, StatisticsError
from ctxvar.extraction.accumulator import EmbeddingSums
from ctxvar.extraction.host_copy import to_host
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.type_points import TypePoints
from ctxvar.models import loading
from ctxvar.models.batching import ShardBatches
from ctxvar.stats.sums import LayerSums
from ctxvar.stats.word_files import LayerSentences, LayerWords


def accumulate_groups(
    job,
    padded: ShardBatches,
    groups: list[range],
    settings: ExtractionSettings,
    sampled: dict | None = None,
    points: TypePoints | None = None,
):
    """Per group of layers, in order, one pass over the ``padded`` batches, then the list of ``(LayerSums,
        (Σxxᵀ or None, the declared per-layer sums by name), sampled points or None, (LayerWords, LayerSentences)
        or None)`` of its layers, in host memory; the group's device state is freed before it is yielded. ``points``
    collects Fig. 1's points in the pass whose group holds their layer. ``job``: a
        :class:`ctxvar.extraction.extract.ShardRun` (its ``n_layers``, ``types``, ``d``, ``device``, ``n_words`` and
        ``run``, and what :func:`layer_words` reads)."""
    for layers in groups:
        sums = job_sums(job, layers, settings, sampled)
        job.run(sums, settings, padded, points if points is not None and points.layer in layers else None)
        layers = host_layers(sums, job, settings)
        del sums
        yield layers


def job_sums(job, layers, settings: ExtractionSettings, sampled: dict | None) -> EmbeddingSums:
    """Empty device sums of ``layers`` for ``job`` (its ``n_layers``, ``types``, ``d``, ``device``, ``n_words``),
    with the sampled positions of :func:`ctxvar.extraction.extract.sample_positions` (None: no sample)."""
    return EmbeddingSums(
        layers,
        job.n_layers,
        len(job.types),
        job.d,
        job.device,
        settings.geometry,
        sampled["tokens"] if sampled else None,
        job.n_words or 0,
        loading.DTYPES[settings.dtype],
    )


def host_layers(sums: EmbeddingSums, job, settings: ExtractionSettings) -> list:
    """The layers of ``sums``, once every batch is in, as a list of ``(LayerSums, (Σxxᵀ or None, the declared
    per-layer sums by name), sampled points or None, (LayerWords, LayerSentences) or None)`` in host memory;
    a :class:`StatisticsError` when a sum is not finite (nothing is written then). ``job``: a
    :class:`ctxvar.extraction.extract.ShardRun` (its ``types``, and what :func:`layer_words` reads)."""
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


def run_batches(
    model, sums: EmbeddingSums, batches: ShardBatches, device, progress: bool, points: TypePoints | None = None
) -> None:
    """Forward every batch with all hidden states and add them to ``sums`` (and to ``points``, if given).

    The padded batches (and, with a sample, the sampled tokens' places in them) move to
    the device once, before the first batch; within the loop nothing waits for the host.
    A forward pass holds only its own activations (the budget's
    :func:`ctxvar.extraction.budget.activation_bytes`): decoders build no KV cache, and
    a batch's outputs are freed before the next batch's forward pass.
    """
    on_device = batches.to(device)
    sample = getattr(sums, "sample", None)
    hits = sample.locate(batches.tokens, batches.real) if sample is not None else [None] * len(batches)
    options = forward_options(model)
    with torch.inference_mode():
        for batch, sample_hits in tqdm(
            zip(on_device, hits), total=len(batches), desc="batches", unit="batch", disable=not progress, mininterval=5
        ):
            output = model(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True, **options
            )
            if getattr(output, "hidden_states", None) is None:
                raise ModelLoadError(
                    f"model {type(model).__name__} returned no hidden states; use an encoder or decoder model"
                )
            words = {"word_index": batch.word_index} if batch.word_index is not None else {}
            sums.accumulate(output.hidden_states, batch.positions, batch.type_index, sample_hits, **words)
            if points is not None:
                states = output.hidden_states[points.layer]
                points.add(points.layer, states.reshape(-1, states.shape[-1]), batch.positions)
            del output  # else it lives on through the next forward pass, which rebinds it only once it returns


def forward_options(model) -> dict:
    """Keyword arguments of every forward pass besides the batch: ``use_cache=False`` for models whose config has a
    cache on (decoders, by default), which would otherwise return every layer's keys and values, and
    ``return_dict=True`` for a config that says ``return_dict: false`` (its outputs would be a plain tuple)."""
    options = {"use_cache": False} if getattr(model.config, "use_cache", False) else {}
    return {**options, "return_dict": True} if getattr(model.config, "return_dict", True) is False else options


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
    ``job``: a :class:`ctxvar.extraction.extract.ShardRun` (its ``tokenizer`` and ``word_ids``)."""
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
