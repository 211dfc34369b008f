"""Running the benchmark scripts of bench/ from tests; importing this module puts bench/ on ``sys.path``, where the
scripts import the shared modules (harness.py, synthetic.py, steps.py, gpu_models.py) as top-level modules (as
when run from there), for the tests that import them and for the server that ``harness.in_fresh_process`` forks
from, which unpickles their functions."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from support.workflow_runs import REPO

BENCH = REPO / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))


def run_bench(script: str, out, *options: str) -> None:
    """``python bench/<script> <options> --out <out>``, which must succeed, as a command: the scripts that run
    Snakemake (peak_disk.py) or set the process's Arrow memory pool, as every job does (sums_io.py), and one whose
    fresh processes run a function of the script itself, there ``__main__`` (kernel.py), so that each way in is run
    as a user runs it."""
    run = subprocess.run(
        [sys.executable, str(BENCH / script), *options, "--out", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]


def run_bench_main(script: str, out, *options: str) -> None:
    """``bench/<script>``'s ``main([*options, "--out", out])`` in this process, which must succeed: what these
    tests check is what the script writes, and a command would import torch and transformers' modeling code again,
    once for the script and once for the server its fresh processes fork from (``harness.in_fresh_process``). With a
    GPU, as a command (:func:`run_bench`): the test process opens no CUDA context of its own, which would hold
    device memory for the rest of the session."""
    import torch

    if torch.cuda.is_available():
        return run_bench(script, out, *options)
    assert not importlib.import_module(Path(script).stem).main([*options, "--out", str(out)])
