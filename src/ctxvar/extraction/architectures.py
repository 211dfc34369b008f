"""Which extraction path each model type of the installed transformers takes: a sweep over every type with a base
model (``AutoModel``), each built tiny and at random, its norms randomised, and run by the layer-major driver's own
verdict (:func:`ctxvar.extraction.layer_major.layer_major_verdict`) on a padded two-row batch.

    python -m ctxvar.extraction.architectures            # the table, on the terminal
    python -m ctxvar.extraction.architectures --write    # docs/architectures.md

Each type is sorted into one of three paths:

- ``layer-major``: the probe's hidden states equal the whole model's ``output_hidden_states`` bit for bit, and so
  do those of a second batch of three rows padded otherwise (:func:`check_type` checks it anew);
- ``whole model``: the driver refuses it, and the reason is the log line a job would write;
- ``cannot build``: no tiny model of the type can be built from its config with the sizes of :data:`SIZES`, or it
  has over :data:`MAX_PARAMETERS` parameters, or it does not run on token ids alone (a vision or speech model), or
  gives no hidden states.

A tiny model is the config class's defaults with the small sizes of :data:`SIZES` under every name transformers'
configs use for them; its parameters are initialised by transformers after ``torch.manual_seed(0)``, and every
norm's weight is drawn from U(0.5, 1.5) and its bias from N(0, 0.1²) (:func:`randomise_norms`): random-init norms
are the identity, under which many hidden states would agree by accident.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from ctxvar.errors import first_line
from ctxvar.extraction.layer_major import batch_states, layer_major_verdict
from ctxvar.extraction.passes import forward_options
from ctxvar.models.batching import DeviceBatch

LAYERS = 2
VOCABULARY = 99
SIZES = {
    "vocab_size": VOCABULARY,
    "hidden_size": 32,
    "n_embd": 32,
    "d_model": 32,
    "dim": 32,
    "num_hidden_layers": LAYERS,
    "n_layer": LAYERS,
    "n_layers": LAYERS,
    "num_layers": LAYERS,
    "num_attention_heads": 4,
    "n_head": 4,
    "n_heads": 4,
    "num_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "intermediate_size": 64,
    "ffn_dim": 64,
    "n_inner": 64,
    "hidden_dim": 64,
    "word_embed_proj_dim": 32,
    "embedding_size": 32,
    "rotary_dim": 4,
    "max_position_embeddings": 64,
    "n_positions": 64,
    # mixtures of experts and latent attention (Mixtral, Qwen3-MoE, DeepSeek-V2/V3)
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "moe_intermediate_size": 32,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4,
    "v_head_dim": 8,
    # state-space and linear-attention layers (Falcon-H1's Mamba heads, Kimi Linear's), whose defaults are seconds a
    # probe; the Mamba head width left to each config, which derives it (Bamba's and GraniteMoeHybrid's must fit)
    "mamba_n_heads": 4,
    "mamba_d_ssm": 32,
    "mamba_d_state": 16,
    "mamba_chunk_size": 16,
    "linear_num_heads": 4,
    "linear_head_dim": 8,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
CORE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
FAMILY_SIZES = {
    "gpt_neo": {"attention_types": [[["global", "local"], 1]]},  # one entry per layer
    "opt": {"word_embed_proj_dim": 16},  # facebook/opt-350m's layout: the last hidden state projected narrower
}
MODALITIES = ("vision", "visual", "image", "video", "audio", "speech")  # sub-configs of a multimodal model
MAX_PARAMETERS = 5_000_000
SECONDS_PER_TYPE = 60
PATHS = ("layer-major", "whole model", "cannot build")
DOC = Path(__file__).resolve().parents[3] / "docs" / "architectures.md"


@dataclass(frozen=True)
class Verdict:
    """A model type's path (one of :data:`PATHS`) and why, where not layer-major."""

    model_type: str
    path: str
    reason: str = ""


class TooSlow(Exception):
    pass


def base_model_types() -> list[str]:
    """Every model type the installed transformers maps to a base model class (``AutoModel``), sorted."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(MODEL_MAPPING_NAMES)


def tiny_config(model_type: str):
    """The type's config with :data:`SIZES` (and :data:`FAMILY_SIZES`): its defaults, with every size that the
    config class names small; where the config refuses one of them, with the :data:`CORE` sizes alone."""
    from transformers import AutoConfig, PretrainedConfig

    try:
        config = AutoConfig.for_model(model_type, **{**SIZES, **FAMILY_SIZES.get(model_type, {})})
    except Exception:  # a name of SIZES that this config computes or checks otherwise: the core sizes alone
        core = {name: SIZES[name] for name in (*CORE, "pad_token_id", "bos_token_id", "eos_token_id")}
        config = AutoConfig.for_model(model_type, **core, **FAMILY_SIZES.get(model_type, {}))
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError("an encoder-decoder: no single stack of hidden states per token")
    towers = [name for name in config.to_dict() if name.endswith("_config") and any(m in name for m in MODALITIES)]
    towers = [name for name in towers if isinstance(getattr(config, name, None), PretrainedConfig)]
    if towers:
        raise ValueError(f"a multimodal model ({', '.join(sorted(towers))}): its base model reads more than token ids")
    for name in ("hidden_size", "num_hidden_layers"):
        value = getattr(config, name, None)
        if not isinstance(value, int) or value > SIZES[name]:
            raise ValueError(f"its config keeps {name} = {value}")
    return config


def randomise_norms(model: torch.nn.Module, seed: int) -> None:
    """Every norm's (a module whose class name holds ``Norm``: LayerNorm, RMSNorm, …) weight ~ U(0.5, 1.5) and bias
    ~ N(0, 0.1²)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if "Norm" in type(module).__name__:
                for name, parameter in module.named_parameters(recurse=False):
                    if name == "weight":
                        parameter.copy_(0.5 + torch.rand(parameter.shape, generator=generator))
                    elif name == "bias":
                        parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))


def tiny_model(model_type: str, seed: int = 0) -> torch.nn.Module:
    """The type's base model built from :func:`tiny_config`, norms randomised, in eval mode; ``ValueError`` when it
    has over :data:`MAX_PARAMETERS` parameters."""
    from accelerate import init_empty_weights
    from transformers import AutoModel

    config = tiny_config(model_type)
    with init_empty_weights():
        size = sum(p.numel() for p in AutoModel.from_config(config).parameters())
    if size > MAX_PARAMETERS:
        raise ValueError(f"{size:,} parameters at the smallest sizes its config takes")
    torch.manual_seed(seed)
    model = AutoModel.from_config(config, dtype=torch.float32)
    randomise_norms(model, seed)
    return model.eval()


def padded_batch(rows: int, width: int, seed: int) -> DeviceBatch:
    """``rows`` rows of random token ids (≥ 3: none is the pad, BOS or EOS id), row i padded (attention mask 0) in
    its last i positions."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCABULARY, (rows, width), generator=generator)
    mask = torch.ones(rows, width, dtype=torch.long)
    for row in range(1, rows):
        mask[row, width - row :] = 0
        ids[row, width - row :] = 0
    return DeviceBatch(ids, mask, None, None)


def whole_states(model, batch: DeviceBatch) -> tuple:
    with torch.inference_mode():
        output = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            output_hidden_states=True,
            **forward_options(model),
        )
    states = getattr(output, "hidden_states", None)
    if not states or not all(isinstance(state, torch.Tensor) for state in states):
        raise ValueError("its forward gives no hidden states")
    return states


def check_type(model_type: str) -> Verdict:
    """The type's :class:`Verdict`. Raises only where the driver itself fails: where its verdict raises, or where it
    says layer-major and the second batch's hidden states differ from the whole model's by one bit."""
    try:
        with _time_limit(SECONDS_PER_TYPE), _quiet():
            model = tiny_model(model_type)
            probe, second = padded_batch(2, 7, 1), padded_batch(3, 9, 2)
            whole_states(model, probe)
    except Exception as error:  # transformers' configs and models raise many types; all mean "cannot build"
        import transformers

        installed = str(Path(transformers.__file__).parent.parent) + os.sep  # the same on every machine without it
        reason = f"{type(error).__name__}: {first_line(error)}".replace(installed, "")
        return Verdict(model_type, "cannot build", reason[:300])
    with _quiet():
        blocks, reason = layer_major_verdict(model, probe)
    if blocks is None:
        return Verdict(model_type, "whole model", reason)
    with torch.inference_mode(), _quiet():
        expected = whole_states(model, second)
        got = batch_states(model, blocks, second, forward_options(model))
    for layer, (a, b) in enumerate(zip(expected, got, strict=True)):
        if a.shape != b.shape or not torch.equal(a, b):
            raise AssertionError(f"{model_type}: hidden state {layer} of a second batch differs from the whole model's")
    return Verdict(model_type, "layer-major")


def sweep(model_types=None) -> list[Verdict]:
    """:func:`check_type` of each of ``model_types`` (default: :func:`base_model_types`)."""
    return [check_type(model_type) for model_type in model_types or base_model_types()]


def table(verdicts: list[Verdict]) -> str:
    """docs/architectures.md: the counts per path, and a row per type."""
    from transformers import __version__

    counts = {path: sum(verdict.path == path for verdict in verdicts) for path in PATHS}
    lines = [
        "# Architectures: the extraction path of each model type",
        "",
        "[← README](../README.md)",
        "",
        f"Every model type with a base model in transformers {__version__} (torch {torch.__version__.split('+')[0]}), "
        "built tiny and at random with its norms randomised, and sorted by the layer-major driver's own probe "
        "(`ctxvar.extraction.architectures`; the tests' `test_architectures.py` runs the sweep and compares this page "
        "with it). `layer-major`: every hidden state equals the whole model's bit for bit, on the probe and on a "
        "second batch; `whole model`: a job runs it whole, and the reason is what its log says; `cannot build`: no "
        f"tiny model of the type builds from its config or runs on token ids alone. {counts['layer-major']} "
        f"layer-major, {counts['whole model']} whole model, {counts['cannot build']} cannot build. "
        "`python -m ctxvar.extraction.architectures --write` writes this page anew.",
        "",
        "| model type | path | why |",
        "| --- | --- | --- |",
    ]
    for verdict in verdicts:
        reason = verdict.reason.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{verdict.model_type}` | {verdict.path} | {reason} |")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _time_limit(seconds: int):
    """:class:`TooSlow` after ``seconds`` (the main thread only; elsewhere no limit)."""

    def expire(signum, frame):
        raise TooSlow(f"took over {seconds} s")

    try:
        previous = signal.signal(signal.SIGALRM, expire)
    except ValueError:  # not the main thread
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _quiet():
    """transformers' warnings and log lines about the random init and unused config keys, silenced."""
    from transformers.utils import logging as transformers_logging

    level = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    logger = logging.getLogger("ctxvar")
    own = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers_logging.set_verbosity(level)
        logger.setLevel(own)


def main(argv: list[str]) -> int:
    text = table(sweep())
    if "--write" in argv:
        DOC.write_text(text)
        print(f"wrote {DOC}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
