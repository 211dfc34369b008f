"""GPU benchmark (see docs/performance.md).

    python bench/gpu.py                 # on CUDA if torch sees it: writes bench/results/gpu.csv and gpu.md
    python bench/gpu.py --models llama-2-7b  # those models' rows only; the others' stay from the run before
    python bench/gpu.py --quick --out D  # tiny shapes: checks the script, measures nothing

Where a command's time is limited, run the models in parts with --models into one --out: the
rows of the models not run stay when they came from the same GPU, torch version and mode
(else --models refuses). The corpus and the models are written under --work (default:
OUT/gpu-work; bench/results/gpu-work is ignored by git); a model saved there by a run of the
same mode and shape is kept (its marker, bench-model.json, is written last).

Random-weight models of the published shapes, each saved in safetensors shards of at most 2 GB
(bert-base and gpt2-medium in one file, as the Hub ships them): bert-base and gpt2-medium in
fp32 and bf16 over a shard of the benchmark's corpus (about 1.3 M tokens), and a decoder of
Llama-2-7B's shape (vocabulary cut to the corpus tokenizer's) in bf16 over a smaller shard of
at least 30 batches; decoders of Llama-2-13B's and Llama-2-70B's shapes likewise, layer-major with their
weights streamed (column weights): 13B's read from its saved files under a device budget (max_device_mb) of a
third of them, 70B's generated on the device block by block from a seed when the job would read them (the same
compute and device memory; the GPU machine's disk cannot hold its checkpoint), so 70B measures no reading.
Per model and dtype, each step in a fresh process (the streamed decoders: load and (b)+g only):

    (a)        the bare forward pass with all hidden states over the extraction's own batches,
               after a warm-up batch, with no weight hash beside it
    (b)        the extraction job with the paper's sums, less its loading and a warm-up batch,
               both timed in its own process
    (b)+g      the same with the default geometry sums
    load       (b)'s loading of the model onto the device, against reading its weight files (read_seconds)

The CSV has one row per model, dtype and step: model, dtype, step, tokens, batches, tokens_per_s,
overhead_b_over_a (seconds per token against (a)), padding_fraction, peak_host_mb (ru_maxrss, MiB),
peak_gpu_mb (MiB; of the device the step used), gpu_name, torch, quick, and seconds, warm_up_seconds, mfu (the
forward pass's model FLOPs, 2 × non-embedding parameters × real tokens, over the GPU's dense
peak for the dtype), load_seconds, read_seconds, weights (loaded whole, streamed from the files, generated),
max_device_mb, and the parts of a (b) step (steps.timed_loading_and_warm_up): prepare_seconds (the shard read,
tokenized and batched beside the loading), batches_seconds (the whole-model batch loop) and hash_wait_seconds (the
wait for the weight hash after the pass); the rest of (b)'s seconds is mostly the writing of the sums.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
import steps
import torch
from run import in_fresh_process, markdown, write_corpus

from ctxvar.models.random_init import build_random_model

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
    texts = pd.read_parquet(folder / "sentences.parquet")["text"].tolist()
    specs = model_specs(quick, shard_size)
    dirs = {name: folder / name for name in names}
    llamas_to_build = [name for name in WEIGHTS if name in names and not saved(dirs[name], specs[name])]
    if llamas_to_build:
        dirs.setdefault("gpt2-medium", folder / "gpt2-medium")
    for name in ("bert-base", "gpt2-medium"):
        if name in dirs and not saved(dirs[name], specs[name]):
            with building(dirs[name], specs[name]):
                entry = {"id": name, **specs[name]["shape"], "vocab_size": 8000, "seed": 0}
                build_random_model(entry, texts, dirs[name])
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


def read_seconds(model_dir: Path) -> float:
    """Time to read every weight file once, in 64 MB blocks through ``read()`` (a copy; loading maps the files)."""
    start = time.perf_counter()
    for path in sorted(model_dir.glob("*.safetensors")):
        with open(path, "rb", buffering=0) as handle:
            while handle.read(64 << 20):
                pass
    return time.perf_counter() - start


def non_embedding_parameters(model_dir: Path) -> int:
    from transformers import AutoConfig, AutoModel

    with torch.device("meta"):
        model = AutoModel.from_config(AutoConfig.from_pretrained(model_dir))
    return sum(p.numel() for name, p in model.named_parameters() if "emb" not in name)


def rows_for(
    name: str, model_dir: Path, shard: Path, dtype: str, device: str, gpu_name: str, quick: bool
) -> list[dict]:
    """Every step for one model and dtype, in fresh processes."""
    partial = str(shard.parent / f"{name}-{dtype}.parquet")
    forward = in_fresh_process(steps.forward, str(model_dir), str(shard), device, dtype)
    forward.update(step="(a) forward")
    paper = in_fresh_process(steps.extraction, str(model_dir), str(shard), partial, device, dtype)
    paper.update(step="(b) extraction")
    geometry = in_fresh_process(steps.extraction, str(model_dir), str(shard), partial, device, dtype, True)
    geometry.update(step="(b) extraction + geometry")
    load = {"step": "load", "seconds": paper["load_seconds"], "read_seconds": read_seconds(model_dir), "tokens": 0}
    load["peak_rss_mb"] = float("nan")  # no peak of its own: it ran in (b)'s process
    flops = 2 * non_embedding_parameters(model_dir) * forward["tokens"] / forward["seconds"]
    forward["mfu"] = flops / PEAK_FLOPS.get(gpu_family(gpu_name), {}).get(dtype, float("nan"))
    forward["padding_fraction"] = 1 - forward["tokens"] / forward["padded_tokens"]
    for job in (paper, geometry):
        job["seconds"] -= job["load_seconds"] + job["warm_up_seconds"]  # as the forward pass is timed
        job["batches"] = forward["batches"]
        job["overhead_b_over_a"] = (job["seconds"] / job["tokens"]) / (forward["seconds"] / forward["tokens"])
    rows = [load, forward, paper, geometry]
    for row in rows:
        row.update(model=name, dtype=dtype, gpu_name=gpu_name, torch=torch.__version__, quick=quick)
        row.update(weights="loaded whole", max_device_mb=0)
        row["peak_host_mb"] = row.pop("peak_rss_mb")
        row["tokens_per_s"] = row["tokens"] / row["seconds"] if row["tokens"] else float("nan")
    return rows


def streamed_rows_for(name: str, model_dir: Path, shard: Path, device: str, gpu_name: str, quick: bool) -> list[dict]:
    """The load and (b)+g steps of a decoder whose job streams its weights (:data:`WEIGHTS`), in bf16: from its
    files under a device budget of a third of them, or generated on the device (no files: no read_seconds). No
    (a) nor (b): a bare forward pass of the whole model does not fit, and the job is what is measured."""
    generated = WEIGHTS[name] == "generated"
    files = sorted(model_dir.glob("*.safetensors"))
    budget_mb = 0 if generated else max(1, sum(path.stat().st_size for path in files) // 3 // 10**6)
    partial = str(shard.parent / f"{name}-bfloat16.parquet")
    geometry = in_fresh_process(
        steps.extraction, str(model_dir), str(shard), partial, device, "bfloat16", True, budget_mb, generated
    )
    geometry.update(step="(b) extraction + geometry")
    geometry["seconds"] -= geometry["load_seconds"] + geometry["warm_up_seconds"]
    geometry["batches"] = sum(geometry["batches"])  # one pass: layer-major
    load = {"step": "load", "seconds": geometry["load_seconds"], "tokens": 0, "peak_rss_mb": float("nan")}
    load["read_seconds"] = float("nan") if generated else read_seconds(model_dir)
    rows = [load, geometry]
    for row in rows:
        row.update(model=name, dtype="bfloat16", gpu_name=gpu_name, torch=torch.__version__, quick=quick)
        row.update(weights=WEIGHTS[name], max_device_mb=budget_mb)
        row["peak_host_mb"] = row.pop("peak_rss_mb")
        row["tokens_per_s"] = row["tokens"] / row["seconds"] if row["tokens"] else float("nan")
    return rows


def gpu_family(name: str) -> str:
    return next((family for family in PEAK_FLOPS if family in name), "")


COLUMNS = [
    "model",
    "dtype",
    "step",
    "tokens",
    "batches",
    "tokens_per_s",
    "overhead_b_over_a",
    "padding_fraction",
    "peak_host_mb",
    "peak_gpu_mb",
    "gpu_name",
    "torch",
    "quick",
    "seconds",
    "warm_up_seconds",
    "mfu",
    "load_seconds",
    "read_seconds",
    "weights",
    "max_device_mb",
    "prepare_seconds",
    "batches_seconds",
    "hash_wait_seconds",
]


RESULTS = Path(__file__).resolve().parent / "results"


def arguments(description: str, work: str) -> argparse.ArgumentParser:
    """The options this script and bench/profile_job.py share: --device, --quick, --out, --work."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="tiny shapes and corpus: checks the script only")
    parser.add_argument("--out", type=Path, default=RESULTS, help="default: bench/results (not with --quick)")
    parser.add_argument("--work", type=Path, default=None, help=f"{work} (default: OUT/gpu-work)")
    return parser


def parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """``parser``'s arguments; --quick must name its own --out: its tiny models and rows would replace the
    measured ones in bench/results."""
    args = parser.parse_args(argv)
    if args.quick and args.out.resolve() == RESULTS:
        parser.error("--quick: give --out a folder of its own, not bench/results")
    return args


def corpora(args: argparse.Namespace, mode: dict) -> tuple[Path, Path, Path]:
    """The work folder (--work, default OUT/gpu-work) and the shards written there: the benchmark's corpus and
    the 7B decoder's smaller one (the same for the same mode: the sentences are drawn with a fixed seed)."""
    work = args.work or args.out / "gpu-work"
    (work / "large").mkdir(parents=True, exist_ok=True)
    return work, write_corpus(work, mode["sentences"]), write_corpus(work / "large", mode["small"])


def device_name(device: str) -> str:
    """The GPU's name, or "cpu"."""
    return torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else "cpu"


def main(argv=None) -> None:
    parser = arguments(__doc__, "corpus and models")
    parser.add_argument("--models", nargs="+", choices=list(MODES["gpu"]["models"]), help="default: every model")
    args = parse(parser, argv)
    mode = MODES["quick" if args.quick else "gpu"]
    if set(args.models or ()) - set(mode["models"]):
        parser.error(f"--quick runs only {', '.join(mode['models'])}")
    names = [name for name in mode["models"] if name in (args.models or mode["models"])]
    gpu_name = device_name(args.device)
    earlier = earlier_rows(args.out / "gpu.csv", gpu_name, args.quick)
    if earlier is None and args.models:
        sys.exit(
            f"bench/gpu.py: {args.out / 'gpu.csv'} cannot be read, or holds rows of another GPU, torch version or mode "
            "than this run's "
            f"({gpu_name}, torch {torch.__version__}{', --quick' if args.quick else ''}): run every model (no "
            "--models), or give another --out"
        )
    command = f"python bench/gpu.py --device {args.device}{' --quick' if args.quick else ''}"
    command += f" --models {' '.join(names)}" if args.models else ""
    if earlier is None:  # every model runs: the rows of the other GPU, torch or mode go
        earlier = pd.DataFrame(columns=COLUMNS)
    work, shard, small = corpora(args, mode)
    dirs = build_models(work, args.quick, mode["shard_size"], names)
    rows = []
    for name in names:
        for dtype in mode["models"][name]:
            shard_of_model = small if name in WEIGHTS else shard
            if WEIGHTS.get(name, "loaded whole") == "loaded whole":
                new = rows_for(name, dirs[name], shard_of_model, dtype, args.device, gpu_name, args.quick)
            else:
                new = streamed_rows_for(name, dirs[name], shard_of_model, args.device, gpu_name, args.quick)
            rows += new
            print(pd.DataFrame(new).reindex(columns=COLUMNS).to_string(), flush=True)
            # after every model and dtype: a run cut short keeps its rows, and the earlier ones not yet re-measured
            write_report(earlier, rows, args.out, gpu_name, command)


def earlier_rows(path: Path, gpu_name: str, quick: bool) -> pd.DataFrame | None:
    """The rows of an earlier run in ``path``, when it ran on this GPU, torch version and mode (empty when there is
    no such file); None when it did not."""
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    try:
        rows = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):  # a run killed while it wrote the file
        return None
    same = {"gpu_name": gpu_name, "torch": torch.__version__, "quick": quick}
    if any(column not in rows or (rows[column] != value).any() for column, value in same.items()):
        return None
    return rows.reindex(columns=COLUMNS)


def write_report(earlier: pd.DataFrame, rows: list[dict], out: Path, gpu_name: str, command: str) -> None:
    """gpu.csv and gpu.md in ``out``: ``rows``, and the ``earlier`` rows of every (model, dtype) that ``rows`` do
    not measure, in the order of MODES["gpu"]; the report names ``command`` (the options that change what is
    measured) and the (model, dtype) pairs kept from before."""
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    measured = set(zip(table["model"], table["dtype"]))
    kept = earlier.loc[[pair not in measured for pair in zip(earlier["model"], earlier["dtype"])], :]
    if len(kept):
        table = pd.concat([kept, table])
    order = {name: i for i, name in enumerate(MODES["gpu"]["models"])}
    table = table.sort_values("model", key=lambda models: models.map(order), kind="stable")
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "gpu.csv", index=False)
    pairs = ", ".join(f"{model} {dtype}" for model, dtype in dict.fromkeys(zip(kept["model"], kept["dtype"])))
    (out / "gpu.md").write_text(
        f"# GPU benchmark ({gpu_name}, torch {table['torch'].iloc[0]})\n\n`{command}`; each step in a fresh "
        "process; see bench/gpu.py for the steps."
        + (f" The rows of {pairs} are from an earlier run of the same GPU, torch and mode." if pairs else "")
        + "\n\n"
        + markdown(table)
        + "\n"
    )


if __name__ == "__main__":
    main()
