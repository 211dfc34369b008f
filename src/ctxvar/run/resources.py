"""Resource estimates for extraction jobs, from what is known before they run; checks of the resources a
user sets.

Known before a job: its shard's word count (corpus rules write it) and the
model's shape (the entry's sizes for ``init: random``, else ``config.json`` from
a local directory or the HF cache). Unknown shapes fall back to bert-large-sized
guesses. Estimates are deliberately generous; a retry doubles them.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass

import pyarrow.compute as pc

from ctxvar.config.entries import load_revision
from ctxvar.config.kinds import kind_of, random_spec
from ctxvar.errors import ConfigError, CtxvarError
from ctxvar.files.parquet import read_table
from ctxvar.models import hub
from ctxvar.stats.declarations import declared_sums_bytes

TOKENS_PER_WORD = 1.4  # subword tokens per space-separated word, BERT/GPT-2 on English prose
HOST_BASELINE_MB = 1500  # Python, torch and transformers imported
GPU_FLOPS = 2e13  # sustained fp32/TF32 forward throughput assumed for a GPU
CPU_FLOPS_PER_THREAD = 2e10
UNKNOWN_SHARD_TOKENS = 1_600_000  # one of 8 shards of the paper's corpus


@dataclass
class ModelShape:
    n_layers: int  # hidden states, embedding output included
    d: int
    vocab_size: int
    block_macs: int | None = None  # multiply-adds a token through one block where config.json gives more than 12 d²
    block_parameters: int | None = None  # and the block's parameters (a mixture of experts: every expert's)

    @property
    def parameters(self) -> int:
        """The blocks' parameters, 12 · d² a block (attention's 4 d², the MLP's 8 d²) unless the shape gives its own
        (:func:`moe_block`), plus the embedding matrix."""
        return (self.n_layers - 1) * (self.block_parameters or 12 * self.d**2) + self.vocab_size * self.d

    @property
    def block_work(self) -> int:
        """Multiply-adds a token through the blocks: 12 · (L − 1) · d², or the shape's own per block (a mixture of
        experts runs ``num_experts_per_tok`` of its experts)."""
        return (self.n_layers - 1) * (self.block_macs or 12 * self.d**2)


FALLBACK_SHAPE = ModelShape(n_layers=25, d=1024, vocab_size=50_000)
DOWNLOAD_BYTES_PER_S = 50e6  # the bandwidth the cost plan times downloads at, and a download's time limit: 400 Mbit/s
DIGESTED_PARAMETERS = 100_000_000  # a model the run builds is digested from this size (400 MB in fp32)
HASH_BYTES_PER_S = 500e6  # SHA-256 of one thread, an assumption below this machine's (the job has four)


def shard_tokens(shard_path) -> int:
    """Estimated tokens in a shard: words × TOKENS_PER_WORD plus [bos]/[eos] per sentence;
    :data:`UNKNOWN_SHARD_TOKENS` while the shard does not exist yet (dry-runs)."""
    if not os.path.exists(shard_path):
        return UNKNOWN_SHARD_TOKENS
    try:
        words = read_table(shard_path, columns=["n_words"]).column("n_words")
    except CtxvarError:
        return UNKNOWN_SHARD_TOKENS  # the job itself then fails, naming the file
    return int(TOKENS_PER_WORD * (pc.sum(words).as_py() or 0) + 2 * len(words))


def model_shape(entry: dict, source: str) -> ModelShape:
    """The model's shape without loading it; :data:`FALLBACK_SHAPE` when it cannot be known yet."""
    return known_model_shape(entry, source) or FALLBACK_SHAPE


def known_model_shape(entry: dict, source: str) -> ModelShape | None:
    """The model's shape from its entry (models built locally) or its config.json (a local directory or the HF
    cache); None before a Hub model is downloaded, or when its config.json is malformed (its job reports that)."""
    kind = kind_of(entry)
    if kind.built_from_entry:  # its blocks by its kind; its width and vocabulary the sizes every built kind takes
        spec = random_spec(entry)
        return ModelShape(kind.blocks(entry) + 1, spec["hidden_size"], spec["vocab_size"])
    return config_shape(hub.model_json(source, "config.json", load_revision(entry)) or {})


def config_shape(config: dict) -> ModelShape | None:
    """The shape a model's config.json gives (layers, width, vocabulary, and a mixture of experts' blocks:
    :func:`moe_block`); None when it lacks them."""
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    d = config.get("hidden_size") or config.get("n_embd") or config.get("d_model")
    try:
        shape = ModelShape(int(layers) + 1, int(d), int(config.get("vocab_size") or FALLBACK_SHAPE.vocab_size))
    except (TypeError, ValueError):
        return None
    shape.block_macs, shape.block_parameters = moe_block(config, shape.d) or (None, None)
    return shape


MOE_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")  # config.json's count of experts, by family


def moe_block(config: dict, d: int) -> tuple[int, int] | None:
    """``(multiply-adds a token, parameters)`` of one block of a mixture of experts whose config.json gives its
    experts (E, :data:`MOE_EXPERTS`), those each token runs (k, ``num_experts_per_tok``) and their width (f,
    ``moe_intermediate_size`` or ``intermediate_size``): attention's 4 d² and k (or E) gated MLPs of 3 · d · f;
    None for a dense model (its blocks: 12 d²)."""
    experts = next((config[key] for key in MOE_EXPERTS if config.get(key)), None)
    active, width = (
        config.get("num_experts_per_tok"),
        config.get("moe_intermediate_size") or config.get("intermediate_size"),
    )
    if not all(isinstance(number, int) and number > 0 for number in (experts, active, width)):
        return None
    return 4 * d * d + active * 3 * d * width, 4 * d * d + experts * 3 * d * width


def nvidia_driver() -> bool:
    """Whether this machine has an NVIDIA driver: ``nvidia-smi`` on the PATH."""
    return shutil.which("nvidia-smi") is not None


def extraction_device(device: str) -> str:
    """Where extraction runs for the config's ``device``: ``cuda`` or ``cpu`` as set; ``auto``: ``cuda`` on a
    machine with an NVIDIA driver (:func:`nvidia_driver`), as the workflow asks a GPU of its jobs, else ``cpu``."""
    if device == "auto":
        return "cuda" if nvidia_driver() else "cpu"
    return device


def extraction_mem_mb(tokens: int, shape: ModelShape, attempt: int = 1, geometry: dict | None = None) -> int:
    """Host memory: baseline + fp32 weights + token arrays + the host copy of the sums that ``geometry`` keeps
    (:func:`host_sums_bytes`; None: the paper's), ×1.5, doubled on each retry."""
    total = 4 * shape.parameters + 32 * tokens + host_sums_bytes(tokens, shape, geometry or {})
    return int((HOST_BASELINE_MB + 1.5 * total / 2**20) * 2 ** (attempt - 1))


def host_sums_bytes(tokens: int, shape: ModelShape, geometry: dict) -> int:
    """The host copy of the sums a job with config ``geometry`` keeps, U ≤ min(vocabulary, tokens) types: the
    declared sums per (layer, type) and per layer and a count per type
    (:func:`~ctxvar.stats.declarations.declared_sums_bytes`); Σ x/‖x‖ per raw token id (``ethayarajh``),
    8 · U · L · d; Σxxᵀ, 8 · L · d² (``covariance``); the sample, 4 · L · min(B · k, tokens) · d (``twonn``,
    B = ``batches``, k = ``sample_size``)."""
    types, layers, d = min(shape.vocab_size, tokens), shape.n_layers, shape.d
    total = declared_sums_bytes(layers, types, d, geometry)
    total += 8 * types * layers * d if geometry.get("ethayarajh") else 0
    total += 8 * layers * d**2 if geometry.get("covariance") else 0
    if geometry.get("twonn"):
        points = min(geometry.get("sample_size", 0) * geometry.get("batches", 1), tokens)
        total += 4 * layers * points * d
    return total


def embedding_matrices_mem_mb(shape: ModelShape, attempt: int = 1) -> int:
    """Host memory of the embedding-matrix job: baseline + fp32 weights with an untied head (V · d more) +
    float64 work on one V × d matrix at a time (the matrix, its centred copy, W c for d eigenvectors and the
    exponentials: ≈ 6 · 8 · V · d), ×1.5, doubled on each retry."""
    matrix = shape.vocab_size * shape.d
    total = 4 * (shape.parameters + matrix) + 2 * 8 * matrix + 6 * 8 * matrix
    return int((HOST_BASELINE_MB + 1.5 * total / 2**20) * 2 ** (attempt - 1))


def digested(entry: dict, n_shards: int, removed_after_use: bool) -> bool:
    """Whether rule digest_weights hashes the model's weights once for its extraction jobs: with several shards,
    unless it is a Hub checkpoint the run removes after use (``removed_after_use``; a digest would download every
    such checkpoint at the run's start) or a model the run builds from its entry (its kind's ``blocks``: init
    random or gaussian) of fewer than :data:`DIGESTED_PARAMETERS` parameters, whose hash in each job costs less than
    a job of its own. Decided from the entry alone, so a run's jobs and their inputs stay the same from one start to
    the next."""
    if n_shards < 2 or (removed_after_use and "commit" in (entry.get("inputs") or {})):
        return False
    return not kind_of(entry).built_from_entry or known_model_shape(entry, "").parameters >= DIGESTED_PARAMETERS


def digest_mem_mb(shape: ModelShape, attempt: int = 1) -> int:
    """Host memory of the weight digest (rule digest_weights): baseline + fp32 weights, ×1.5, doubled on each
    retry: safetensors files are read a piece at a time, but a pickled checkpoint is unpickled whole."""
    return int((HOST_BASELINE_MB + 1.5 * 4 * shape.parameters / 2**20) * 2 ** (attempt - 1))


def digest_runtime_min(shape: ModelShape, attempt: int = 1) -> int:
    """Minutes of the weight digest: its fp32 weights downloaded at :data:`DOWNLOAD_BYTES_PER_S` and read once at
    :data:`HASH_BYTES_PER_S`, ×3, + 10, doubled on retry."""
    seconds = 4 * shape.parameters * (1 / DOWNLOAD_BYTES_PER_S + 1 / HASH_BYTES_PER_S)
    return int((3 * seconds / 60 + 10) * 2 ** (attempt - 1))


def extraction_runtime_min(tokens: int, shape: ModelShape, gpu: bool, threads: int = 1, attempt: int = 1) -> int:
    """Minutes: forward FLOPs 2 · parameters · tokens at an assumed throughput, ×3, + 10, doubled on retry."""
    flops_per_second = GPU_FLOPS if gpu else CPU_FLOPS_PER_THREAD * max(threads, 1)
    minutes = 3 * 2 * shape.parameters * tokens / flops_per_second / 60 + 10
    return int(minutes * 2 ** (attempt - 1))


# ctxvar's own job resources: (minimum, what a value is), each a whole number, as Snakemake rounds others.
WHOLE_RESOURCES = {
    "max_state_mb": (0, "whole megabytes (0: the default budget, no cap on a CPU)"),
    "max_device_mb": (0, "whole megabytes (0: the GPU's free memory less the reserve, no budget on a CPU)"),
    "batch_tokens": (1, "a whole number of padded tokens per forward pass, 1 or more"),
}


def is_expression(text: str) -> bool:
    """Whether ``text`` parses as a Python expression (which Snakemake evaluates per job); ``16k`` does not."""
    try:
        compile(text, "<resource>", "eval")
    except (SyntaxError, ValueError):
        return False
    return True


def check_set_resources(settings: dict[str, dict]) -> None:
    """Raise :class:`ConfigError` for a ``set-resources`` value (command line or profile) of
    :data:`WHOLE_RESOURCES` that Snakemake would change without a word: it rounds a fraction to a whole number,
    so ``max_state_mb=0.4`` became 0, the default (no cap on a CPU). ``settings``: ``{rule: {resource: value
    as written}}``; an expression (``min(4000, 2 * input.size_mb)``), evaluated per job, passes."""
    for rule, values in settings.items():
        for name in sorted(WHOLE_RESOURCES.keys() & set(values)):
            minimum, what = WHOLE_RESOURCES[name]
            try:
                number = float(str(values[name]))
            except ValueError:
                if is_expression(str(values[name])):
                    continue  # evaluated per job
                raise ConfigError(
                    f"--set-resources {rule}:{name}={values[name]}: not a number; give {what} (e.g. 16384, not 16k)"
                ) from None
            if math.isfinite(number) and number >= minimum and number == int(number):
                continue
            rounded = (
                f"Snakemake rounds resources to whole numbers, so this would be {round(number)}; "
                if math.isfinite(number) and number >= minimum
                else ""
            )
            raise ConfigError(f"--set-resources {rule}:{name}={values[name]}: {rounded}give {what}")
