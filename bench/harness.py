"""What every benchmark of bench/ shares: its command line, its fresh processes and its results files.

A benchmark is a script of bench/ that measures one thing. It builds its parser with :func:`arguments` (its
docstring as the help, and the options every benchmark spells alike: ``--quick``, ``--device``, ``--rounds``,
``--out``, ``--work``), runs each measurement in a process of its own (:func:`in_fresh_process`) and writes its
CSV tables and Markdown report under ``--out`` (default bench/results/) with :func:`write_results`. Under its title
the report names the command that made it (:func:`command`); its tables come from :func:`markdown`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas itself is not imported: compare_runs.py needs none
    import pandas as pd

RESULTS = Path(__file__).resolve().parent / "results"  # the committed reports that docs/performance.md quotes
DEVICES = ("cpu", "cuda")


def arguments(
    doc: str,
    *,
    out: str | None = None,
    quick: str | None = None,
    device: str | None = None,
    devices: tuple[str, ...] | None = DEVICES,
    rounds: str | None = None,
    work: str | None = None,
) -> argparse.ArgumentParser:
    """A benchmark's parser, ``doc`` its description, with each shared option whose help is given: ``--out``, the
    folder for ``out`` (the files it names); ``--quick``; ``--device`` with ``device`` as its default, one of
    ``devices`` (None: any torch device); ``--rounds``; ``--work``, the folder for ``work``."""
    parser = argparse.ArgumentParser(
        prog=program(), description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    if device is not None:
        parser.add_argument("--device", default=device, choices=devices)
    if rounds is not None:
        parser.add_argument("--rounds", type=int, help=rounds)
    if out is not None:
        parser.add_argument("--out", type=Path, default=RESULTS, help=f"folder for {out} (default: bench/results)")
    if work is not None:
        parser.add_argument("--work", type=Path, default=None, help=work)
    return parser


def program() -> str:
    """The command that runs the benchmark this process runs, as its usage line names it: ``python -m bench NAME``,
    NAME the script's (bench/__main__.py puts the script's path in ``sys.argv[0]``, as ``python bench/NAME.py``
    does)."""
    return f"python -m bench {Path(sys.argv[0]).stem}"


def parse(parser: argparse.ArgumentParser, argv=None, *, quick_elsewhere: bool = False) -> argparse.Namespace:
    """``parser``'s arguments; with ``quick_elsewhere``, --quick must name its own --out: its tiny models and rows
    would replace the measured ones in bench/results."""
    args = parser.parse_args(argv)
    if quick_elsewhere and args.quick and args.out.resolve() == RESULTS:
        parser.error("--quick: give --out a folder of its own, not bench/results")
    return args


def command(script: str, *options: str) -> str:
    """The command line that runs ``script`` (a path to a script of bench/) with ``options``, as a report names it:
    ``python -m bench NAME …`` (bench/__main__.py)."""
    return " ".join(["python -m bench", Path(script).stem, *options])


def command_pattern(script: str) -> str:
    """A regular expression of the command that runs benchmark ``script`` (its name, e.g. ``gpu``) as a report
    names it: :func:`command`'s ``python -m bench NAME``, or ``python bench/NAME.py`` in reports made before it."""
    return rf"python (?:-m bench {script}|bench/{script}\.py)\b"


def markdown(frame: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """``frame`` as a Markdown table without its index, "(none)" when it has no rows."""
    return frame.to_markdown(index=False, floatfmt=floatfmt) if not frame.empty else "(none)"


def value_range(values, fmt: str = ".3g") -> str:
    """The smallest and largest of ``values`` as "min–max"."""
    return f"{min(values):{fmt}}–{max(values):{fmt}}"


def write_results(out: Path, files: dict[str, pd.DataFrame | str], *, echo: bool = True) -> None:
    """Each of ``files`` (name → content) into ``out``, made if missing: a table as CSV without its index, a text as
    it is; with ``echo``, the texts printed as well."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if not isinstance(content, str):
            content.to_csv(out / name, index=False)
            continue
        (out / name).write_text(content)
        if echo:
            print(content)


def in_fresh_process(function, *args, **kwargs):
    """``function(*args, **kwargs)`` in a process of its own, which no earlier step's memory, device state or
    caches reach. It is forked from a server that imported, once, the torch, transformers and ctxvar modules this
    process has imported (Python's ``forkserver``, which never touches CUDA): each step skips the seconds of
    importing them again. Its peak RSS (``ru_maxrss``) counts the pages it touches: the libraries' pages that it
    does not touch, which a process importing them itself would count, are not in it. Its environment is this
    process's at the first call, when the server starts."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preloaded_modules())  # read when the server starts: at the first call
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args, **kwargs).result()


def preloaded_modules() -> list[str]:
    """The modules :func:`in_fresh_process`'s server imports: torch, transformers' modeling code, and ctxvar's
    modules, each where this process has imported it."""
    heavy = [name for name in ("torch", "transformers.modeling_utils") if name in sys.modules]
    return heavy + sorted(name for name in sys.modules if name == "ctxvar" or name.startswith("ctxvar."))
