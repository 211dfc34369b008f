"""The GPU benchmarks' models and corpora (gpu.py, forward_variants.py, profile_job.py): random-weight models of
the published shapes, each saved in safetensors shards under the work folder (``--work``) and kept there for the
next run of the same mode and shape, and the shards of the synthetic corpus they run over."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from pathlib import Path

import torch

from harness import Options
from synthetic import random_model, write_corpus

BERT_BASE = {"arch": "bert", "hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072}
GPT2_MEDIUM = {"arch": "gpt2", "hidden_size": 1024, "num_layers": 24, "num_heads": 16, "intermediate_size": 4096}
LLAMA_2_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32}
LLAMA_2_13B = {"hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40, "num_attention_heads": 40}
LLAMA_2_70B = {
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
}
# How each decoder's job gets its weights: loaded whole, streamed from its files under a device budget of a
# third of them, or generated on the device block by block from a seed (no checkpoint: 70B's does not fit the
# disk of the GPU machine)
WEIGHTS = {"llama-2-7b": "loaded whole", "llama-2-13b": "streamed from the files", "llama-2-70b": "generated"}
MODES = {  # sentences of the corpus, and of the 7B decoder's smaller one; the models with their dtypes
    "gpu": {
        "sentences": 60000,
        "small": 24000,  # ≥ 30 batches of 16,384 tokens (tested): too few do not measure a rate
        "shard_size": "2GB",  # save_pretrained's max_shard_size: larger checkpoints come as model-0000k-of-0000n
        "models": {
            "bert-base": ("float32", "bfloat16"),
            "gpt2-medium": ("float32", "bfloat16"),
            "llama-2-7b": ("bfloat16",),
            "llama-2-13b": ("bfloat16",),
            "llama-2-70b": ("bfloat16",),
        },
    },
    "quick": {
        "sentences": 300,
        "small": 100,
        "shard_size": "200KB",
        "models": {
            "bert-base": ("float32",),
            "llama-2-7b": ("bfloat16",),
            "llama-2-13b": ("bfloat16",),
            "llama-2-70b": ("bfloat16",),
        },
    },
}
QUICK_SHAPE = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64}
QUICK_LLAMA = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
# blocks of most of the weights, so that a third of them streams (the embedding of the corpus's 8,000 ids is 0.5 MB)
QUICK_STREAMED = {"hidden_size": 64, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 2}
PEAK_FLOPS = {  # dense, per second: bf16 on tensor cores; fp32 without TF32 (torch's default for matmuls)
    "H100": {"bfloat16": 989e12, "float32": 67e12},
    "H200": {"bfloat16": 989e12, "float32": 67e12},
    "A100": {"bfloat16": 312e12, "float32": 19.5e12},
}


def build_models(folder: Path, quick: bool, shard_size: str, names: list[str]) -> dict[str, Path]:
    """The benchmark's models among ``names``, each with a tokenizer trained on the corpus, saved in shards of at
    most ``shard_size`` (the decoder takes gpt2-medium's tokenizer, built for it when needed). A model saved in
    ``folder`` by an earlier run of the same mode and shape is kept (:func:`saved`); another is built anew."""
    specs = model_specs(quick, shard_size)
    dirs = {name: folder / name for name in names}
    llamas_to_build = [name for name in WEIGHTS if name in names and not saved(dirs[name], specs[name])]
    if llamas_to_build:
        dirs.setdefault("gpt2-medium", folder / "gpt2-medium")
    for name in ("bert-base", "gpt2-medium"):
        if name in dirs and not saved(dirs[name], specs[name]):
            with building(dirs[name], specs[name]):
                random_model(folder, name, **specs[name]["shape"])
                reshard(dirs[name], shard_size)
    for name in llamas_to_build:
        with building(dirs[name], specs[name]):
            build_llama(dirs[name], dirs["gpt2-medium"], specs[name]["shape"], shard_size, WEIGHTS[name] != "generated")
    return {name: dirs[name] for name in names}


def model_specs(quick: bool, shard_size: str) -> dict[str, dict]:
    """What each model is built from: its shape, the mode and the shard size."""
    shapes = {
        "bert-base": {**BERT_BASE, **QUICK_SHAPE} if quick else BERT_BASE,
        "gpt2-medium": {**GPT2_MEDIUM, **QUICK_SHAPE} if quick else GPT2_MEDIUM,
        "llama-2-7b": QUICK_LLAMA if quick else LLAMA_2_7B,
        "llama-2-13b": QUICK_STREAMED if quick else LLAMA_2_13B,
        "llama-2-70b": {**QUICK_STREAMED, "num_key_value_heads": 1} if quick else LLAMA_2_70B,
    }
    return {name: {"shape": shape, "quick": quick, "shard_size": shard_size} for name, shape in shapes.items()}


SAVED_MARKER = "bench-model.json"  # written once a model is wholly saved: what it was built from


def saved(model_dir: Path, spec: dict) -> bool:
    """Whether ``model_dir`` holds a model wholly saved from ``spec`` (its marker is written last)."""
    try:
        return json.loads((model_dir / SAVED_MARKER).read_text()) == spec
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def building(model_dir: Path, spec: dict):
    """Build ``model_dir`` anew within the block, then mark it saved from ``spec``. A folder there is removed
    first only when this benchmark made it (its marker, or the sibling ``<name>.building`` of a build cut
    short); any other is left alone, and the run stops with one line."""
    started = model_dir.with_name(model_dir.name + ".building")
    if model_dir.exists() or model_dir.is_symlink():
        if not ((model_dir / SAVED_MARKER).exists() or started.exists()) or model_dir.is_symlink():
            sys.exit(f"bench/gpu.py: {model_dir} was not built by this benchmark: give --work a folder of its own")
        shutil.rmtree(model_dir)
    started.touch()
    yield
    (model_dir / SAVED_MARKER).write_text(json.dumps(spec))
    started.unlink()


def reshard(model_dir: Path, shard_size: str) -> None:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_dir)
    (model_dir / "model.safetensors").unlink()
    (model_dir / "SHA256SUMS").unlink(missing_ok=True)  # the manifest of the unsharded files
    model.save_pretrained(model_dir, max_shard_size=shard_size)


def build_llama(out: Path, tokenizer_dir: Path, shape: dict, shard_size: str, weights: bool = True) -> Path:
    """A random bf16 decoder of Llama-2's shape, built on the device, saved sharded, with ``tokenizer_dir``'s
    byte-level BPE tokenizer (its vocabulary replaces Llama's 32,000); without ``weights``, its config and
    tokenizer alone (its jobs generate the weights: steps.GeneratedWeights)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = llama_config(
        shape, len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id
    )
    if not weights:
        config.save_pretrained(out)
        tokenizer.save_pretrained(out)
        return out
    model = random_llama(config, "cuda" if torch.cuda.is_available() else "cpu")
    model.save_pretrained(out, max_shard_size=shard_size)
    tokenizer.save_pretrained(out)
    del model
    return out


def llama_config(shape: dict, vocab_size: int, **options):
    """The LlamaConfig of ``shape`` (one key-value head per attention head unless it says otherwise)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        **{"num_key_value_heads": shape["num_attention_heads"], **shape},
        vocab_size=vocab_size,
        max_position_embeddings=4096,
        **options,
    )


def random_llama(config, device):
    """A Llama decoder of ``config`` with transformers' random initialisation (seed 0), built on ``device`` in
    bf16: a 13B model built in fp32 would fill an 80 GB card."""
    from transformers import LlamaModel

    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            return LlamaModel(config).eval()
    finally:
        torch.set_default_dtype(default)


def gpu_family(name: str) -> str:
    return next((family for family in PEAK_FLOPS if family in name), "")


def corpora(args: argparse.Namespace, mode: dict) -> tuple[Path, Path, Path]:
    """The work folder (--work, default OUT/gpu-work) and the shards written there: the benchmark's corpus and
    the 7B decoder's smaller one (the same for the same mode: the sentences are drawn with a fixed seed)."""
    work = args.work or args.out / "gpu-work"
    (work / "large").mkdir(parents=True, exist_ok=True)
    return work, write_corpus(work, mode["sentences"]), write_corpus(work / "large", mode["small"])


def device_name(device: str) -> str:
    """The GPU's name, or "cpu"."""
    return torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else "cpu"


def gpu_options(out: str, work: str) -> Options:
    """The options of a GPU benchmark (:class:`harness.Options`): --device (default cuda where torch sees a GPU),
    --quick (which names an --out of its own), --out for ``out``, --work for ``work``."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    quick = "tiny shapes and corpus: checks the script only"
    work = f"{work} (default: OUT/gpu-work)"
    return Options(out=out, quick=quick, device=device, devices=None, work=work, quick_elsewhere=True)


def measured_options(args: argparse.Namespace) -> list[str]:
    """The options of a GPU benchmark's command that change what it measures, as its report names them."""
    return ["--device", args.device, *(["--quick"] if args.quick else [])]
