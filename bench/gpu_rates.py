"""The extraction rates the cost plan uses (:mod:`ctxvar.run.cost`), from the committed GPU benchmark.

    python -m bench gpu_rates    # writes src/ctxvar/run/gpu_rates.csv from bench/results/gpu.csv

One row per GPU kind, model, dtype and job: the tokens per second of step ``(b) extraction`` (the paper's sums)
and ``(b) extraction + geometry`` (the default geometry) that ``bench/gpu.py`` measured, not in its quick mode,
the seconds its job took to read the model's files (the ``load`` row's ``read_seconds``), with the model's hidden
states and width (:data:`gpu_models.BERT_BASE` and its neighbours), from which the plan
scales a rate to another model's shape. The package reads the CSV; a test checks it against this script.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from gpu_models import BERT_BASE, GPT2_MEDIUM, LLAMA_2_7B
from harness import RESULTS, Options

OPTIONS = Options()  # none of the options the benchmarks share: the CSV it writes

RATES = Path(__file__).resolve().parents[1] / "src" / "ctxvar" / "run" / "gpu_rates.csv"
SHAPES = {  # (hidden states, d) of the models bench/gpu.py measures
    "bert-base": (BERT_BASE["num_layers"] + 1, BERT_BASE["hidden_size"]),
    "gpt2-medium": (GPT2_MEDIUM["num_layers"] + 1, GPT2_MEDIUM["hidden_size"]),
    "llama-2-7b": (LLAMA_2_7B["num_hidden_layers"] + 1, LLAMA_2_7B["hidden_size"]),
}
JOBS = {"(b) extraction": False, "(b) extraction + geometry": True}  # step → whether it has the default geometry


def gpu_kind(name: str) -> str:
    """The GPU kind of torch's device name: ``NVIDIA H200`` → ``H200``, ``NVIDIA H100 80GB HBM3`` → ``H100``."""
    words = name.replace("NVIDIA", "").split()
    return words[0] if words else name


def rates(results: Path = RESULTS) -> pd.DataFrame:
    """The table of the module docstring, sorted, from ``results``/gpu.csv."""
    measured = pd.read_csv(results / "gpu.csv")
    measured = measured[~measured.quick.astype(bool) & measured.model.isin(SHAPES)]
    loads = measured[measured.step == "load"].set_index(["gpu_name", "model", "dtype"]).read_seconds
    rows = measured[measured.step.isin(JOBS)]
    table = pd.DataFrame(
        {
            "gpu": rows.gpu_name.map(gpu_kind),
            "model": rows.model,
            "dtype": rows.dtype,
            "geometry": rows.step.map(JOBS),
            "hidden_states": rows.model.map(lambda m: SHAPES[m][0]),
            "d": rows.model.map(lambda m: SHAPES[m][1]),
            "tokens_per_s": rows.tokens_per_s.round(0).astype(int),
            "read_seconds": [round(loads[key], 2) for key in zip(rows.gpu_name, rows.model, rows.dtype)],
            "torch": rows.torch,
        }
    )
    return table.sort_values(["gpu", "model", "dtype", "geometry"]).reset_index(drop=True)


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("out", nargs="?", type=Path, default=RATES, help=f"the CSV to write (default {RATES})")
    out = parser.parse_args(argv).out
    rates().to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
