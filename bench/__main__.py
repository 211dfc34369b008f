"""The benchmarks of bench/, one command: ``python -m bench NAME [options]`` runs benchmark NAME with its options
(``python -m bench NAME --help`` lists them), ``python -m bench`` lists the benchmarks and what each measures.

Each benchmark is a script of this folder with a ``main(argv)`` (:data:`BENCHMARKS`); it declares its shared options
once (``OPTIONS``, a :class:`harness.Options`), builds its command line from them and writes its reports with
:mod:`harness`, and its report names the command that made it (:func:`harness.command`). The scripts still run as
``python bench/NAME.py``, the command older reports name. The other modules here are shared: ``harness`` (command
line, fresh processes, summaries, reports), ``synthetic`` (inputs), ``steps`` (what is measured on a model),
``gpu_models`` (the GPU benchmarks' models and corpora) and ``merging`` (the merge benchmark's processes).
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    "compare_runs",
    "cpu_rates",
    "disk_types",
    "extraction_and_merge",
    "extraction_order",
    "forward_variants",
    "gpu",
    "gpu_rates",
    "job_parts",
    "kernel",
    "memory_plans",
    "peak_disk",
    "profile_job",
    "sample_batches",
    "sums_io",
    "switches",
    "weight_streaming",
)


def summary(name: str) -> str:
    """The first sentence of benchmark ``name``'s docstring, read without importing it (some import torch)."""
    docstring = ast.get_docstring(ast.parse((HERE / f"{name}.py").read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    return paragraph.split(". ")[0].removesuffix(".")


def listing() -> str:
    """Every benchmark and what it measures, as ``python -m bench`` prints them."""
    width = max(map(len, BENCHMARKS))
    lines = ["python -m bench NAME [options]   (python -m bench NAME --help: its options)", ""]
    return "\n".join(lines + [f"  {name:<{width}}  {summary(name)}" for name in BENCHMARKS])


def main(argv: list[str] | None = None) -> int | None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(listing())
        return 0
    name, *options = argv
    if name not in BENCHMARKS:
        sys.exit(f"python -m bench: no benchmark {name!r}; `python -m bench` lists them ({', '.join(BENCHMARKS)})")
    if str(HERE) not in sys.path:  # the scripts import the shared modules as top-level modules
        sys.path.insert(0, str(HERE))
    sys.argv = [str(HERE / f"{name}.py"), *options]  # as python bench/NAME.py has it (harness.program)
    status = importlib.import_module(name).main(options)
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
