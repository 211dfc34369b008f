"""An extraction job broken into its parts on a CPU: the seconds a GPU job spends on the GPU's path outside its
batches (see docs/performance.md).

    python -m bench job_parts                      # bench/results/job_parts.{csv,md}
    python -m bench job_parts --quick --out D      # a small shard: checks the script only
    python -m bench job_parts --device cuda --out D   # the same parts on a GPU (each timed to a synchronisation)

Per width, a model of that width and vocabulary (bert-base: d = 768, a 30,522-token tokenizer; the Llama-2-7B
shape: d = 4,096, 32,000 tokens; one small block, since no forward pass is timed) over a paper-sized shard (the
synthetic corpus, ≈ 1.3 M tokens), split by ``split_corpus`` as the workflow splits it (its token ids included)
and hashed by ``digest_weights`` as the workflow hashes it. Each part runs the job's own function, timed on its
own, in one process for the width, with the default geometry (config.schema.yaml):

- **before the claim** (the host's work, while another job has the GPU): reading the shard with its ids,
  planning it (positions, types, words, batches, padding, the sampled positions, the tokenizer's hash and the
  package versions; ``job.planned_shard`` less the read);
- **on the GPU's path**: ``job.loaded_shard`` (loading the model from the page cache, taking the digest's
  hash after checking the files' states, the attention probe), the first layer's empty sums (``new_sums``), the
  metadata, and the last layer's hand-over to host memory (``passes.host_layers``); the job gives the GPU up
  before it writes that layer. Where the memory plan of the real model's shape on an H100 80 GB has room for two
  layers' sums (``hand_over_beside``: :func:`ctxvar.extraction.layer_major.shape_plan`;
  :mod:`ctxvar.extraction.hand_over`), each other layer's sums are made and handed over beside the batches, and the
  batches wait only by what that takes beyond a layer's batches (``layer_seconds``: the shard's tokens over the
  H200 job's rate in ``gpu_rates.csv``, per hidden state); else between the layers, on the path: once per hidden
  state (13 for bert-base, 33 for the 7B). The zeros of new sums are a memset on a GPU, page faults here;
- **beside it**: the weight hash (once per model, rule digest_weights), writing one layer (the job writes each
  layer in a thread while the next computes) and the sums' device work per batch (inside the batches; over the
  first 8 batches, with random states).

``path_seconds`` is the sum of the GPU's path: load + metadata + new_sums + hand_over_per_layer, and per other
layer, beside, max(0, new_sums + hand_over_per_layer − layer_seconds), between, new_sums + hand_over_per_layer.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ctxvar.corpus.shards import write_shards
from ctxvar.extraction import job as job_state
from ctxvar.extraction.layer_major import shape_plan, shape_weights
from ctxvar.extraction.partials import sum_names
from ctxvar.extraction.passes import host_layers, job_sums
from ctxvar.extraction.shard import read_shard
from ctxvar.models import hashing
from ctxvar.models.loading import load_tokenizer
from ctxvar.models.weight_digest import digest_weights
from ctxvar.run.cost import gpu_rates
from ctxvar.stats.sums import LayerWriter, sums_schema

import gpu_models
import steps
from harness import Options, command, in_fresh_process, markdown, write_results
from synthetic import random_model, write_corpus

OPTIONS = Options(
    out="job_parts.{csv,md}", quick="a small shard and narrow models", device="cpu", work="models", quick_elsewhere=True
)

SENTENCES = {"full": 73000, "quick": 600}  # ≈ 1.3 M tokens of the synthetic corpus, as the GPU benchmark's shards
WIDTHS = {  # the model's shape (one small block) and the hidden states of the model it stands for
    "bert-base": ({"hidden_size": 768, "num_heads": 12, "vocab_size": 30522}, "float32", 13),
    "llama-2-7b": ({"hidden_size": 4096, "num_heads": 32, "vocab_size": 32000}, "bfloat16", 33),
}
PLANNED_CARD = 80 * 10**9  # the H100's memory, whose plan for the real shape says where the sums are handed over
TIMED_BATCHES = 8  # the first (longest) batches: the sums' work per batch; the hand-over reads their sums
QUICK_WIDTH = {"hidden_size": 64, "num_heads": 2, "vocab_size": 2000}


def build(work: Path, name: str, shape: dict) -> Path:
    """The model of ``name`` (one small block of ``shape``'s width) in ``work``, built unless an earlier run did."""
    if (work / name / "config.json").exists():
        return work / name
    return random_model(work, name, arch="bert", num_layers=1, intermediate_size=64, **shape)


def timed(timings: dict, name: str, device, function, *args):
    """``function(*args)``, its seconds to a synchronisation of ``device`` in ``timings[name]``."""
    start = time.perf_counter()
    value = function(*args)
    steps.synchronise(device)
    timings[name] = time.perf_counter() - start
    return value


def refuse_hashing(*args):
    raise AssertionError("the job hashed its weights: it did not take the digest's hash")


def job_parts(model_dir: str, sentences: str, work: str, dtype: str, hidden_states: int, device: str) -> dict:
    """The parts of one job of ``model_dir`` over the corpus ``sentences``, one shard, on ``device``."""
    timings: dict[str, float] = {}
    work, source, device = Path(work), str(model_dir), torch.device(device)
    tokenizer = load_tokenizer({"id": "bench"}, source)
    write_shards(sentences, [work / "shard.parquet"], tokenizer)
    digest = timed(timings, "weight_hash", device, digest_weights, {"id": "bench"}, source, work / "digest.json")
    settings = steps.settings_for(source, str(device), dtype, steps.default_geometry(), threads=1)
    timed(timings, "read_shard", device, read_shard, work / "shard.parquet", tokenizer)
    shard = timed(timings, "plan", device, job_state.planned_shard, work / "shard.parquet", tokenizer, settings)
    timings["plan"] -= timings["read_shard"]
    hash_again = hashing.weights_sha256
    hashing.weights_sha256 = refuse_hashing  # the job takes the digest's hash: no weight is read again
    job = timed(timings, "load", device, job_state.loaded_shard, shard, settings, device, True, work / "digest.json")
    hashing.weights_sha256 = hash_again
    assert job.weights_hash.result() == digest["weights_sha256"]
    sums = timed(timings, "new_sums", device, job_sums, job, [0], settings, job.sampled)
    padded = job.padded()
    most = max(rows * length for rows, length in padded.shapes)
    kind = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    states = torch.from_numpy(np.random.default_rng(0).standard_normal((most, job.d), dtype=np.float32))
    states = states.to(device=device, dtype=kind)
    hits = sums.sample.locate(padded.tokens, padded.real) if sums.sample is not None else [None] * len(padded)
    start = time.perf_counter()
    for index, batch in zip(range(TIMED_BATCHES), padded.to(device)):
        rows, length = batch.input_ids.shape
        hidden = [states[: rows * length].view(rows, length, job.d)] * job.n_layers  # only layer 0 is read
        words = {"word_index": batch.word_index} if batch.word_index is not None else {}
        sums.accumulate(hidden, batch.positions, batch.type_index, hits[index], **words)
    steps.synchronise(device)
    timings["sums_per_batch"] = (time.perf_counter() - start) / min(TIMED_BATCHES, len(padded))
    layers = timed(timings, "hand_over_per_layer", device, host_layers, sums, job, settings)
    metadata = timed(timings, "metadata", device, job_state.model_metadata, settings, job)
    names = sum_names(settings.geometry)
    with LayerWriter(work / "partial.parquet", sums_schema(job.d, metadata, names)) as writer:
        timed(timings, "write_per_layer", device, writer.write, layers[0][0].to_table(writer.schema))
    name = Path(model_dir).name
    config = real_config(name, len(tokenizer))
    width = int(job.encoded.lengths.max())
    plan = shape_plan(
        config, shape_weights(config, dtype), settings, int(padded.grid[-1]), len(job.types), PLANNED_CARD, width
    )
    rate = next(
        float(row["tokens_per_s"])
        for row in gpu_rates()
        if (row["kind"], row["model"], row["dtype"], row["geometry"]) == ("H200", name, dtype, True)
    )
    layer_seconds = len(job.encoded.ids) / rate / hidden_states
    per_layer = timings["new_sums"] + timings["hand_over_per_layer"]
    others = max(0.0, per_layer - layer_seconds) if plan.hand_over_beside else per_layer
    path = timings["load"] + timings["metadata"] + per_layer + (hidden_states - 1) * others
    return {
        **timings,
        "path_seconds": path,
        "hand_over_beside": plan.hand_over_beside,
        "layer_seconds": layer_seconds,
        "hidden_states": hidden_states,
        "tokens": len(job.encoded.ids),
        "types": len(job.types),
        "batches": len(padded),
        "d": job.d,
    }


def real_config(name: str, vocab_size: int):
    """The transformers config of the model ``name`` stands for (bert-base, or the Llama-2-7B shape), with the
    benchmark's vocabulary."""
    from transformers import BertConfig

    if name == "llama-2-7b":
        return gpu_models.llama_config(gpu_models.LLAMA_2_7B, vocab_size)
    shape = gpu_models.BERT_BASE
    return BertConfig(
        hidden_size=shape["hidden_size"],
        num_hidden_layers=shape["num_layers"],
        num_attention_heads=shape["num_heads"],
        intermediate_size=shape["intermediate_size"],
        vocab_size=vocab_size,
    )


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "a CPU")


def main(argv=None) -> None:
    args = OPTIONS.parser(__doc__).parse_args(argv)
    work = args.work or args.out / "job-parts-work"
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work, SENTENCES["quick" if args.quick else "full"])
    rows = []
    for name, (shape, dtype, hidden_states) in WIDTHS.items():
        model = build(work, name, {**shape, **QUICK_WIDTH} if args.quick else shape)
        (work / name / "job").mkdir(exist_ok=True)
        sentences = corpus.with_name("sentences.parquet")
        job = str(work / name / "job")
        parts = in_fresh_process(job_parts, str(model), str(sentences), job, dtype, hidden_states, args.device)
        rows.append({"model": name, "dtype": dtype, **parts})
    table = pd.DataFrame(rows)
    machine = cpu_name() if args.device == "cpu" else gpu_models.device_name(args.device)
    options = [*(["--device", args.device] if args.device != "cpu" else []), *(["--quick"] if args.quick else [])]
    report = "\n".join(
        [
            "# An extraction job's parts on a CPU",
            "",
            f"`{command('job_parts.py', *options)}` on {machine}, seconds.",
            "",
            markdown(table, ".3g"),
            "",
        ]
    )
    write_results(args.out, {"job_parts.csv": table, "job_parts.md": report})


if __name__ == "__main__":
    main()
