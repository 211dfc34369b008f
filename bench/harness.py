"""What every benchmark of bench/ shares: its command line, its fresh processes and its results files.

A benchmark is a script of bench/ that measures one thing. It declares the options every benchmark spells alike
once, at its top (``OPTIONS``, an :class:`Options`: its files under ``--out``, what ``--quick`` does, its default
``--device``, what a round of ``--rounds`` runs and how many, ``--work``), and builds its parser from that
declaration (:meth:`Options.parser`, its docstring as the help). It runs each measurement in a process of its own
(:func:`in_fresh_process`) and writes its CSV tables and Markdown report under ``--out`` (default bench/results/)
with :func:`write_results`. Under its title the report names the command that made it (:func:`command`); its
tables come from :func:`markdown`, and a measure taken once a round is summarised by :func:`spread` (median, min
and max per group) and shown with :func:`median_range` or :func:`ranges`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import math
import multiprocessing
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas itself is not imported: compare_runs.py needs none
    import pandas as pd

RESULTS = Path(__file__).resolve().parent / "results"  # the committed reports that docs/performance.md quotes
DEVICES = ("cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class Options:
    """The options a benchmark shares with the others, declared once at the top of its script (``OPTIONS``); its
    command line is :meth:`parser`'s. Each given one is an option: ``out``, the files it writes (``--out``, their
    folder, default bench/results); ``quick``, what ``--quick`` does; ``device``, ``--device``'s default, one of
    ``devices`` (None: any torch device); ``rounds``, what one round runs (``--rounds``), ``default_rounds`` the
    rounds without and with --quick (None: the benchmark's mode decides, and ``args.rounds`` stays None when not
    given); ``work``, what the ``--work`` folder holds. With ``quick_elsewhere``, --quick must name an --out of its
    own: its tiny models' rows would replace the measured ones in bench/results."""

    out: str | None = None
    quick: str | None = None
    device: str | None = None
    devices: tuple[str, ...] | None = DEVICES
    rounds: str | None = None
    default_rounds: tuple[int, int] | None = (3, 1)
    work: str | None = None
    quick_elsewhere: bool = False

    def parser(self, doc: str) -> argparse.ArgumentParser:
        """The benchmark's parser, ``doc`` (its docstring) its description, with these options; the benchmark adds
        its own. Its ``parse_args`` resolves ``--rounds`` and checks ``quick_elsewhere``."""
        return BenchmarkParser(self, doc)

    def rounds_help(self) -> str:
        if self.default_rounds is None:
            return f"rounds of {self.rounds} (default: the mode's)"
        usual, quick = self.default_rounds
        return f"rounds of {self.rounds} (default {usual}" + (f"; --quick {quick})" if self.quick else ")")


class BenchmarkParser(argparse.ArgumentParser):
    """:meth:`Options.parser`: the shared options of ``options``, and what each implies once parsed."""

    def __init__(self, options: Options, doc: str):
        super().__init__(prog=program(), description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
        self.options = options
        if options.quick is not None:
            self.add_argument("--quick", action="store_true", help=options.quick)
        if options.device is not None:
            self.add_argument("--device", default=options.device, choices=options.devices)
        if options.rounds is not None:
            self.add_argument("--rounds", type=int, help=options.rounds_help())
        if options.out is not None:
            self.add_argument(
                "--out", type=Path, default=RESULTS, help=f"folder for {options.out} (default: bench/results)"
            )
        if options.work is not None:
            self.add_argument("--work", type=Path, default=None, help=options.work)

    def parse_args(self, args=None, namespace=None) -> argparse.Namespace:
        """The arguments, ``rounds`` the number to run (:attr:`Options.default_rounds` where not given)."""
        parsed = super().parse_args(args, namespace)
        options, quick = self.options, getattr(parsed, "quick", False)
        if options.quick_elsewhere and quick and parsed.out.resolve() == RESULTS:
            self.error("--quick: give --out a folder of its own, not bench/results")
        if options.rounds is not None and options.default_rounds is not None:
            parsed.rounds = parsed.rounds or options.default_rounds[quick]
        return parsed


def program() -> str:
    """The command that runs the benchmark this process runs, as its usage line names it: ``python -m bench NAME``,
    NAME the script's (bench/__main__.py puts the script's path in ``sys.argv[0]``, as ``python bench/NAME.py``
    does)."""
    return f"python -m bench {Path(sys.argv[0]).stem}"


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


SPREAD = ("median", "min", "max")  # what a report gives of a column measured once a round


def spread(table: pd.DataFrame, by, columns, *, before=None, after=None, sort: bool = False) -> pd.DataFrame:
    """Per group of ``by`` in ``table`` (in order of first appearance, or sorted with ``sort``): ``median_C``,
    ``min_C`` and ``max_C`` of each of ``columns`` over the group's rows (its rounds), after the aggregates
    ``before`` and before those of ``after`` (each name → (column, function), as ``DataFrame.agg`` takes them)."""
    spreads = {f"{stat}_{column}": (column, stat) for column in columns for stat in SPREAD}
    return table.groupby(by, sort=sort).agg(**(before or {}), **spreads, **(after or {}))


def ranges(summary: pd.DataFrame, column: str, fmt: str = ".3g") -> list[str]:
    """The range of ``column`` in each row of a :func:`spread` summary, as "min–max" (:func:`value_range`)."""
    return [value_range(pair, fmt) for pair in zip(summary[f"min_{column}"], summary[f"max_{column}"])]


def median_range(summary: pd.DataFrame, column: str, fmt: str = ".3g") -> list[str]:
    """``column`` in each row of a :func:`spread` summary as "median (min–max)": the median alone where the
    values are one (one round), nothing where there are none."""
    return [
        "" if math.isnan(median) else f"{median:{fmt}}" if low == high else f"{median:{fmt}} ({span})"
        for median, low, high, span in zip(
            summary[f"median_{column}"],
            summary[f"min_{column}"],
            summary[f"max_{column}"],
            ranges(summary, column, fmt),
        )
    ]


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
