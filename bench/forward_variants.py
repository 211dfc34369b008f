"""The bare forward pass under each choice of attention kernels and batch widths (see docs/performance.md).

    python -m bench forward_variants --device cuda --out D   # the GPU benchmark's models (gpu_models.py)
    python -m bench forward_variants --quick --out D         # tiny shapes on the CPU: checks the script only

Per model and dtype, in a fresh process, the extraction's own batches (the first of them, up to a token cap) run
through the bare forward pass with all hidden states (as bench/gpu.py's step (a)) once per variant:

- kernels: ``default`` (torch's own choice, cuDNN's attention included where it is preferred) or ``job`` (the
  kernels a job allows, :data:`ctxvar.extraction.attention.CUDA_KERNELS`);
- width: each batch padded to its longest sentence (1) or to that rounded up to a multiple of 8 or 64.

The variants run in this order in one process, after one warm-up batch: the ``default`` ones first, so that
cuDNN's per-shape graphs are built within their timing. The Llama-2-7B-shaped decoder is built at random on the
device in bf16 (not saved), with gpt2-medium's tokenizer and the smaller corpus. Writes
``forward_variants.csv`` and ``.md``: per variant tokens, padded tokens, batches, distinct batch shapes, seconds,
tokens/s, MFU, and max_relative_difference: over the first batch's real tokens, the largest difference of the
last hidden state from the first variant's, over the largest absolute value there.
"""

from __future__ import annotations

import pandas as pd
import torch

from ctxvar.extraction.attention import CUDA_KERNELS, chosen_attention, only_attention_kernels
from ctxvar.extraction.extract import prepare_shard
from ctxvar.extraction.passes import forward_options
from ctxvar.models import loading
from ctxvar.models.batching import pad_batches

import gpu_models
import steps
from harness import command, in_fresh_process, markdown, write_results

OPTIONS = gpu_models.gpu_options("forward_variants.md and .csv", "corpus and models, as bench/gpu.py's")

VARIANTS = [("default", 1), ("default", 64), ("job", 1), ("job", 8), ("job", 64)]  # (kernels, width multiple)
KERNELS = {"default": None, "job": CUDA_KERNELS}
MODELS = {  # model: dtypes, on the smaller corpus, token cap
    "gpu": {
        "bert-base": (("float32", "bfloat16"), False, 600_000),
        "gpt2-medium": (("bfloat16",), False, 600_000),
        "llama-2-7b": (("bfloat16",), True, 150_000),
    },
    "quick": {"bert-base": (("float32",), False, 5_000), "llama-2-7b": (("bfloat16",), True, 2_000)},
}


def variant_rows(model_dir: str, shard: str, device: str, dtype: str, cap: int, llama: dict | None) -> list[dict]:
    """Every variant of :data:`VARIANTS` over the job's first batches up to ``cap`` tokens; with ``llama`` (a
    LlamaConfig's shape), a random bf16 decoder of that shape built on the device runs them instead."""
    job = prepare_shard(shard, steps.settings_for(model_dir, device, dtype), hash_weights=False)
    if llama is None:
        model = job.model
    else:
        model = gpu_models.random_llama(gpu_models.llama_config(llama, len(job.tokenizer)), job.device)
    batches, tokens = [], 0
    for rows in job.batches:
        if tokens >= cap:
            break
        batches.append(rows)
        tokens += int(job.encoded.lengths[rows].sum())
    options, pad = forward_options(model), loading.pad_id(job.tokenizer)
    parameters = sum(p.numel() for name, p in model.named_parameters() if "emb" not in name)
    family = gpu_models.gpu_family(gpu_models.device_name(job.device))
    peak = gpu_models.PEAK_FLOPS.get(family, {}).get(dtype, float("nan"))
    rows, first = [], None
    with chosen_attention(job.device):
        steps.warm_up(model, pad_batches(job.encoded, job.type_index, batches[:1], pad), job.device)
    for kernels, width in VARIANTS:
        padded = pad_batches(job.encoded, job.type_index, batches, pad, width)
        on_device = padded.to(job.device)
        with only_attention_kernels(KERNELS[kernels]), torch.inference_mode():
            seconds = steps.forward_seconds(model, on_device, job.device)
            last = model(
                input_ids=on_device[0].input_ids,
                attention_mask=on_device[0].attention_mask,
                output_hidden_states=True,
                **options,
            ).hidden_states[-1]
        real = last.reshape(-1, last.shape[-1])[on_device[0].positions].double()
        first = real if first is None else first
        rows.append(
            {
                "kernels": kernels,
                "width_multiple": width,
                "tokens": tokens,
                "padded_tokens": int(padded.grid[-1]),
                "batches": len(padded),
                "shapes": len(set(padded.shapes)),
                "seconds": seconds,
                "tokens_per_s": tokens / seconds,
                "mfu": 2 * parameters * tokens / seconds / peak,
                "max_relative_difference": float((real - first).abs().max() / first.abs().max()),
                **steps.peaks(job.device),
            }
        )
    return rows


def main(argv=None) -> None:
    args = OPTIONS.parser(__doc__).parse_args(argv)
    mode = "quick" if args.quick else "gpu"
    work, shard, small = gpu_models.corpora(args, gpu_models.MODES[mode])
    shard_size = gpu_models.MODES[mode]["shard_size"]
    dirs = gpu_models.build_models(work, args.quick, shard_size, ["bert-base", "gpt2-medium"])
    gpu_name = gpu_models.device_name(args.device)
    options = gpu_models.measured_options(args)
    table = []
    for name, (dtypes, smaller, cap) in MODELS[mode].items():
        llama = (gpu_models.QUICK_LLAMA if args.quick else gpu_models.LLAMA_2_7B) if name == "llama-2-7b" else None
        model_dir = dirs["gpt2-medium" if llama else name]
        for dtype in dtypes:
            rows = in_fresh_process(
                variant_rows, str(model_dir), str(small if smaller else shard), args.device, dtype, cap, llama
            )
            for row in rows:
                row.update(model=name, dtype=dtype, gpu_name=gpu_name, torch=torch.__version__)
            table += rows
            print(pd.DataFrame(rows).to_string(), flush=True)
            frame = pd.DataFrame(table)
            text = (
                f"# The bare forward pass by attention kernels and batch width ({gpu_name}, torch "
                f"{torch.__version__})\n\n`{command(__file__, *options)}`; see the script for the variants.\n\n"
                + markdown(frame)
                + "\n"
            )
            write_results(args.out, {"forward_variants.csv": frame, "forward_variants.md": text}, echo=False)


if __name__ == "__main__":
    main()
