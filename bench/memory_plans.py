"""Memory plans of layer-major extraction jobs from the models' shapes alone (see docs/performance.md).

    python -m bench memory_plans    # writes bench/results/memory_plans.csv and memory_plans.md

No device and no weights: each model is built on ``meta`` from a transformers config of its published shape and
planned by the job's own arithmetic (:func:`ctxvar.extraction.layer_major.shape_plan`) with the default geometry
on a card of 80 · 10⁹ bytes. The paper's six models (float32, as config.yaml runs them) get a shard of the paper's
run (:data:`PAPER_SHARD_TOKENS`, U = the corpus's types); the Llama shapes (bfloat16) a shard of 1 M padded
tokens holding as many types as the vocabulary (a bound: a shard holds no more) and, for Llama-3.1's 128,256,
one holding :data:`FEWER_TYPES`. Rows of at most 512 tokens
(sentences under 64 words). Per model: the weights (all, the largest block's, those outside the blocks), whether
they stream on that card, the hidden states per million tokens, one layer's sums, one batch's transients, the plan
at its shard, the largest shard whose hidden states stay on the device, the checkpoint's bytes (the model with its
LM head, in the job's dtype), the largest tensor the streamed path reads through host memory, and the seconds per
million tokens on the GPU that bench/results/gpu.csv measured, where it measured the model and dtype.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
from transformers import BertConfig, GPT2Config, RobertaConfig

from ctxvar.errors import DeviceMemoryError
from ctxvar.extraction.layer_major import shape_plan, shape_weights
from ctxvar.extraction.settings import ExtractionSettings

import steps
from gpu_models import LLAMA_2_7B, LLAMA_2_13B, LLAMA_2_70B, llama_config
from harness import RESULTS, Options, command, command_pattern, markdown, write_results

OPTIONS = Options(out="memory_plans.md and memory_plans.csv")

CARD_BYTES = 80 * 10**9  # an 80 GB card, counted low: an H100 80GB has 80 GiB
WIDTH = 512  # the longest row: BookCorpus sentences under 64 words (and BERT's positions)
MEGA = 10**6
# The paper's run: BERT's |X| = 12,384,011 tokens (the paper's Table 3) in 8 shards, each within 1.3× the mean
# shard's padded tokens (tested) and padded by < 5 % (tested); U: the corpus's |T| of RoBERTa, the largest
PAPER_SHARD_TOKENS = math.ceil(12_384_011 / 8 * 1.3 * 1.05)
PAPER_TYPES = 24_719
MEASURED_STEP = "(b) extraction + geometry"
LLAMA_3_1_405B = {  # beside gpu_models' Llama-2 shapes
    "hidden_size": 16384,
    "intermediate_size": 53248,
    "num_hidden_layers": 126,
    "num_attention_heads": 128,
    "num_key_value_heads": 8,
}


def roberta(d: int, layers: int, heads: int) -> RobertaConfig:
    return RobertaConfig(
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * d,
        vocab_size=50265,
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
    )


def shapes() -> dict[str, tuple[object, str]]:
    """Each model's transformers config (its published shape) and the dtype a job runs it in."""
    return {
        "bert-base": (BertConfig(), "float32"),
        "bert-large": (
            BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
            "float32",
        ),
        "roberta-base": (roberta(768, 12, 12), "float32"),
        "roberta-large": (roberta(1024, 24, 16), "float32"),
        "gpt2": (GPT2Config(), "float32"),
        "gpt2-medium": (GPT2Config(n_embd=1024, n_layer=24, n_head=16), "float32"),
        "llama-2-7b": (llama_config(LLAMA_2_7B, 32000), "bfloat16"),
        "llama-2-13b": (llama_config(LLAMA_2_13B, 32000), "bfloat16"),
        "llama-2-70b": (llama_config(LLAMA_2_70B, 32000), "bfloat16"),
        "llama-3.1-405b": (llama_config(LLAMA_3_1_405B, 128256), "bfloat16"),
    }


def shards_of(name: str, config) -> list[tuple[int, int]]:
    """``(padded tokens, types)`` of each shard the model is planned for: a paper shard, or 1 M tokens holding
    the vocabulary's types (and, for a vocabulary above :data:`FEWER_TYPES`, that many)."""
    if name in PAPER_MODELS:
        return [(PAPER_SHARD_TOKENS, PAPER_TYPES)]
    return [(MEGA, n_types) for n_types in sorted({config.vocab_size, min(config.vocab_size, FEWER_TYPES)})]


FEWER_TYPES = 32_000  # a Llama-2 vocabulary: a shard of 1 M tokens of text holds fewer types than that


PAPER_MODELS = ("bert-base", "bert-large", "roberta-base", "roberta-large", "gpt2", "gpt2-medium")


def settings_for(name: str, dtype: str) -> ExtractionSettings:
    """A job's settings on a GPU, as the benchmarks run their jobs (:func:`steps.settings_for`), with the default
    geometry and batch budget."""
    return steps.settings_for(name, "cuda", dtype, steps.default_geometry())


def largest_shard_on_device(config, weights, settings: ExtractionSettings, n_types: int) -> int:
    """The most padded tokens (in thousands, rounded down) whose hidden states the plan keeps on the device."""
    low, high = 0, 1 << 16  # thousands of tokens: up to 65 M
    while low < high:
        middle = (low + high + 1) // 2
        try:
            fits = not shape_plan(config, weights, settings, middle * 1000, n_types, CARD_BYTES, WIDTH).states_on_host
        except DeviceMemoryError:  # the shard's padded batches alone leave no room
            fits = False
        low, high = (middle, high) if fits else (low, middle - 1)
    return low * 1000


def checkpoint_bytes(config, dtype: str) -> tuple[int, int]:
    """``(bytes, largest tensor's bytes)`` of the model with its LM head in ``dtype``, built on ``meta``."""
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    from ctxvar.models.loading import DTYPES

    head = AutoModelForMaskedLM if config.model_type in ("bert", "roberta") else AutoModelForCausalLM
    with init_empty_weights(include_buffers=False):
        model = head.from_config(config, dtype=DTYPES[dtype])
    sizes = [p.numel() * p.element_size() for p in model.parameters()]
    return sum(sizes), max(sizes)


def measured_seconds(results: Path) -> tuple[dict[tuple[str, str], float], str, str]:
    """Seconds per million tokens of :data:`MEASURED_STEP` by (model, dtype) from gpu.csv (its full runs, all on one
    GPU), the GPU's name and the command gpu.md names."""
    rows = pd.read_csv(results / "gpu.csv")
    rows = rows[(rows.step == MEASURED_STEP) & ~rows.quick.astype(bool)]
    gpus = rows.gpu_name.unique()
    if len(gpus) != 1:
        raise SystemExit(f"{results / 'gpu.csv'}: full runs of {sorted(gpus)} GPUs, not of one; run bench/gpu.py again")
    (gpu,) = gpus
    (measured_by,) = re.findall(rf"^`({command_pattern('gpu')}[^`]*)`", (results / "gpu.md").read_text(), re.MULTILINE)
    return {(row.model, row.dtype): MEGA / row.tokens_per_s for row in rows.itertuples()}, gpu, measured_by


def plan_rows(results: Path = RESULTS) -> tuple[list[dict], str]:
    """One row per model of :func:`shapes`, and what measured the GPU times: the GPU and the command."""
    seconds, gpu, measured_by = measured_seconds(results)
    rows = []
    for name, (config, dtype) in shapes().items():
        settings = settings_for(name, dtype)
        weights = shape_weights(config, dtype)
        on_disk, largest = checkpoint_bytes(config, dtype)
        for padded_tokens, n_types in shards_of(name, config):
            rows.append(plan_row(name, config, dtype, settings, weights, padded_tokens, n_types, on_disk, largest))
    for row in rows:
        measured = seconds.get((row["model"], row["dtype"]))
        row["gpu_s_per_m_tokens"] = round(measured, 1) if measured is not None else "not measured"
    return rows, f"`{measured_by}` on an {gpu}"


def plan_row(name, config, dtype, settings, weights, padded_tokens, n_types, on_disk, largest) -> dict:
    """The table's row of one model and shard (see the module docstring)."""
    gb = 1e9
    plan = shape_plan(config, weights, settings, padded_tokens, n_types, CARD_BYTES, WIDTH)
    per_million = shape_plan(config, weights, settings, MEGA, n_types, CARD_BYTES, WIDTH).hidden_states
    return {
        "model": name,
        "dtype": dtype,
        "d": config.hidden_size,
        "blocks": config.num_hidden_layers,
        "weights_gb": round(weights.weights / gb, 2),
        "block_gb": round(weights.block_weights / gb, 3),
        "outside_blocks_gb": round((weights.weights - weights.in_blocks) / gb, 3),
        "streamed": plan.streamed,
        "hidden_gb_per_m_tokens": round(per_million / gb, 2),
        "shard_m_tokens": round(padded_tokens / MEGA, 3),
        "types": n_types,
        "layer_sums_gb": round(plan.layer_sums / gb, 2),
        "transients_gb": round(plan.transients / gb, 2),
        "plan_gb": round(plan.device_bytes() / gb, 1),
        "states_on_host": plan.states_on_host,
        "largest_shard_on_device_m_tokens": round(
            largest_shard_on_device(config, weights, settings, n_types) / MEGA, 2
        ),
        "checkpoint_gb": round(on_disk / gb, 1),
        "largest_tensor_gb": round(largest / gb, 2),
    }


def report(rows: list[dict], measured_by: str) -> str:
    """bench/results/memory_plans.md: the command, the table and what the times were measured by."""
    return (
        "# Memory plans of layer-major jobs (from the models' shapes)\n\n"
        f"`{command(__file__)}`; a card of 80 · 10⁹ bytes, the default geometry and batch_tokens; "
        f"gpu_s_per_m_tokens: step {MEASURED_STEP!r} of {measured_by} (bench/results/gpu.md).\n\n"
        + markdown(pd.DataFrame(rows), "g")
        + "\n"
    )


def main(argv=None) -> None:
    args = OPTIONS.parser(__doc__).parse_args(argv)
    rows, measured_by = plan_rows()
    write_results(
        args.out, {"memory_plans.csv": pd.DataFrame(rows), "memory_plans.md": report(rows, measured_by)}, echo=False
    )


if __name__ == "__main__":
    main()
