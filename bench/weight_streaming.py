"""A Llama-shaped model three times the device budget, its weights streamed from its files, against the same
model loaded whole: peak resident memory against the memory plan, time, and that the sums are the same bits.

    python -m bench weight_streaming                 # 22 blocks at d = 1024: 1.1 GB of float32 weights
    python -m bench weight_streaming --quick         # 4 blocks at d = 256

Builds a random-init ``LlamaForCausalLM`` (saved in 500 MB safetensors shards, keys under ``model.``) with the
tokenizer of a small GPT-2 built beside it, and runs ``tests/support/streamed_peak.py`` on one synthetic shard
twice, each in a fresh process on the CPU: with ``max_device_mb`` a third of the weights (streamed; at least what
streaming holds, :func:`steps.least_streamed_mb`: more for --quick's 4 blocks) and with no budget (loaded whole).
Each gives the peak growth of resident memory over the job (loading and hashing included) after a warm-up job on the
small model, and the memory plan the job logged (on a CPU the device is the host, so the plan bounds resident
memory). The run stops when the two jobs' sums differ. Writes ``weight_streaming.csv`` and ``weight_streaming.md``
under ``--out`` (default bench/results).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

import steps
from harness import Options, command, write_results
from synthetic import corpus_folder, random_model

OPTIONS = Options(out="weight_streaming.md and weight_streaming.csv", quick="4 blocks at d = 256, 20 sentences")

SHAPE = {"hidden_size": 1024, "num_hidden_layers": 22, "num_attention_heads": 16, "intermediate_size": 2816}
QUICK_SHAPE = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 688}
SMALL = {"arch": "gpt2", "hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64}  # a GPT-2
PEAK_SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "support" / "streamed_peak.py"
MB = 1e6


def llama(folder: Path, tokenizer_dir: Path, shape: dict) -> Path:
    """A random-init Llama of ``shape`` with the tokenizer in ``tokenizer_dir``, saved in shards."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(
        **shape, vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder, max_shard_size="500MB")
    tokenizer.save_pretrained(folder)
    return folder


def peak(shard: Path, model_dir: Path, out: Path, budget_mb: int, warm_up: Path) -> dict:
    """tests/support/streamed_peak.py in a fresh process."""
    run = subprocess.run(
        [
            sys.executable,
            str(PEAK_SCRIPT),
            str(shard),
            str(model_dir),
            str(out),
            "float32",
            str(budget_mb),
            str(warm_up),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"},
    )
    if run.returncode:
        sys.exit(f"tests/support/streamed_peak.py failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--sentences", type=int, default=None)
    args = parser.parse_args(argv)
    shape = QUICK_SHAPE if args.quick else SHAPE
    sentences = args.sentences or (20 if args.quick else 40)
    rows = []
    with corpus_folder(sentences) as (folder, shard):
        small = random_model(folder, "small", **SMALL, vocab_size=2000)  # the Llamas take its tokenizer
        warm_up = llama(folder / "warm-up", small, QUICK_SHAPE)
        model_dir = llama(folder / "llama", small, shape)
        weights = sum(path.stat().st_size for path in model_dir.glob("*.safetensors"))
        budget_mb = max(int(weights / 3 / MB), steps.least_streamed_mb(model_dir, "float32"))
        outs = {}
        for name, budget in (("streamed", budget_mb), ("whole", 0)):
            outs[name] = folder / f"{name}.parquet"
            measured = peak(shard, model_dir, outs[name], budget, warm_up)
            rows.append({"job": name, "max_device_mb": budget, **measured})
        if not pq.read_table(outs["streamed"]).equals(pq.read_table(outs["whole"])):
            sys.exit("the streamed and whole-model sums differ")
    table = pd.DataFrame(rows)
    lines = [
        "# Weights streamed from the files against the model loaded whole",
        "",
        f"`{command(__file__, *(argv if argv is not None else sys.argv[1:]))}` on "
        f"{platform.machine()} (cpu): a Llama of shape {shape}, float32, {weights / MB:.0f} MB of weight files, "
        f"{sentences} sentences. Both jobs gave the same sums, bit for bit.",
        "",
        "| job | max_device_mb | weights MB | resident weights MB | plan MB | peak RSS growth MB | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        lines.append(
            f"| {row.job} | {row.max_device_mb} | {row.weights_bytes / MB:.0f} | "
            f"{row.resident_weights_bytes / MB:.0f} | {row.plan_bytes / MB:.0f} | {row.peak_bytes / MB:.0f} | "
            f"{row.seconds:.1f} |"
        )
    write_results(args.out, {"weight_streaming.csv": table, "weight_streaming.md": "\n".join(lines) + "\n"})


if __name__ == "__main__":
    main()
