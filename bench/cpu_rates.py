"""The CPU extraction rates the cost plan uses (:mod:`ctxvar.run.cost`), from the committed CPU benchmark.

    python -m bench cpu_rates    # writes src/ctxvar/run/cpu_rates.csv from bench/results/results.csv and report.md
    python -m bench cpu_rates --matrices  # measures the embedding-matrix statistics: cpu_matrix_seconds.csv, ≈ 10 min

One row per model, dtype and job: the median over the rounds of the tokens per second of step ``(b) extraction``
(the paper's sums), ``(b) extraction + geometry`` (the default geometry; both float32) and ``(e) extraction
bf16`` (the paper's sums in bfloat16) that ``bench/extraction_and_merge.py`` measured on a CPU, not in its quick
mode, and the median seconds its job took to load the model (``load_seconds``), with the model's hidden states
and width, from which the plan scales a rate to another model's shape; ``machine`` names the CPU as the report's
first line does (architecture and torch threads). The package reads the CSV; a test checks it against this
script.

``--matrices`` measures what a model's ``embedding_matrix_statistics`` job computes for one matrix (its rows of
embedding_matrices.csv and of embedding_projection.parquet: ``ctxvar.stats.embedding_matrices.matrix_table`` and
``projection_table``) on a random float64 matrix of each of :data:`MATRIX_SHAPES`, once, in this process, with one
BLAS thread as a workflow job has, and writes ``cpu_matrix_seconds.csv`` beside ``cpu_rates.csv``: ``machine``,
``rows``, ``d``, ``seconds`` a matrix and the numpy version; the plan scales them by rows · d² (the products WᵀW
and the SVD's) to another model's matrices.
"""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

import pandas as pd

from harness import RESULTS, Options, command_pattern

OPTIONS = Options()  # none of the options the benchmarks share: the CSV it writes

RATES = Path(__file__).resolve().parents[1] / "src" / "ctxvar" / "run" / "cpu_rates.csv"
MATRIX_SECONDS = RATES.with_name("cpu_matrix_seconds.csv")
MATRIX_SHAPES = ((50_304, 512), (50_304, 1024), (50_304, 2048))  # Pythia's vocabulary, its widths 70m–1b, 2.8b
SHAPES = {"bert-base": (13, 768), "gpt2": (13, 768)}  # (hidden states, d) of extraction_and_merge.py's MODELS
JOBS = {  # step → (dtype, whether it has the default geometry)
    "(b) extraction": ("float32", False),
    "(b) extraction + geometry": ("float32", True),
    "(e) extraction bf16": ("bfloat16", False),
}
MACHINE = re.compile(  # the command report.md names, then the machine
    rf"^`{command_pattern('extraction_and_merge')}`: [^,]+, ([^,]+), (\d+) torch threads, torch ([^,]+),"
)


def machine(results: Path = RESULTS) -> tuple[str, str]:
    """``(CPU, torch)`` as report.md's first line names them: ``x86_64, 2 torch threads`` and the torch version."""
    for line in (results / "report.md").read_text(encoding="utf-8").splitlines():
        if found := MACHINE.match(line):
            return f"{found[1]}, {found[2]} torch threads", found[3]
    raise ValueError(f"{results / 'report.md'} names no machine in the line {MACHINE.pattern}")


def rates(results: Path = RESULTS) -> pd.DataFrame:
    """The table of the module docstring, sorted, from ``results``/results.csv."""
    measured = pd.read_csv(results / "results.csv")
    measured = measured[(measured.device == "cpu") & measured.model.isin(SHAPES) & measured.step.isin(JOBS)]
    cpu, torch = machine(results)
    table = (
        measured.groupby(["model", "step"])
        .agg(tokens_per_s=("tokens_per_s", "median"), read_seconds=("load_seconds", "median"))
        .reset_index()
    )
    table = pd.DataFrame(
        {
            "machine": cpu,
            "model": table.model,
            "dtype": table.step.map(lambda step: JOBS[step][0]),
            "geometry": table.step.map(lambda step: JOBS[step][1]),
            "hidden_states": table.model.map(lambda m: SHAPES[m][0]),
            "d": table.model.map(lambda m: SHAPES[m][1]),
            "tokens_per_s": table.tokens_per_s.round(0).astype(int),
            "read_seconds": table.read_seconds.round(2),
            "torch": torch,
        }
    )
    return table.sort_values(["machine", "model", "dtype", "geometry"]).reset_index(drop=True)


def matrix_seconds() -> pd.DataFrame:
    """The table of ``--matrices`` (module docstring), measured now."""
    import time

    import numpy as np
    from threadpoolctl import threadpool_limits

    from ctxvar.stats.embedding_matrices import matrix_table, projection_table

    rows = []
    for n_rows, d in MATRIX_SHAPES:
        w = np.random.default_rng(0).normal(size=(n_rows, d))
        with threadpool_limits(1):
            start = time.perf_counter()
            matrix_table({"input": w})
            projection_table({"input": w})
            rows.append({"rows": n_rows, "d": d, "seconds": round(time.perf_counter() - start, 1)})
        print(rows[-1], flush=True)
    return pd.DataFrame(
        {"machine": f"{platform.machine()}, 1 BLAS thread", **pd.DataFrame(rows), "numpy": np.__version__}
    )


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument(
        "out", nargs="?", type=Path, help=f"the CSV to write (default {RATES}, or with --matrices {MATRIX_SECONDS})"
    )
    parser.add_argument("--matrices", action="store_true", help="time the embedding-matrix job's SVDs instead")
    args = parser.parse_args(argv)
    table, out = (matrix_seconds(), args.out or MATRIX_SECONDS) if args.matrices else (rates(), args.out or RATES)
    table.to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
