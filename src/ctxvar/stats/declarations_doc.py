"""Writes the declared sums' rows into the docs, between rows that stay, so that a new sum's rows come from its
declaration (:func:`ctxvar.stats.declarations.docs_rows`, :func:`~ctxvar.stats.declarations.layer_docs_rows`)::

    python -m ctxvar.stats.declarations_doc      # rewrite the rows in docs/outputs.md and docs/geometry.md

Each block is the lines after the first line that starts with ``after`` up to the next line that starts with
``until``: the sums-file table's sums, the ``tokens.parquet`` columns, the moments file's per-layer sums and the
``geometry.csv`` columns of the per-layer sums.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ctxvar.stats.declarations import docs_rows, layer_docs_rows


def blocks() -> list[tuple[str, str, str, list[str]]]:
    """``(file, after, until, rows)`` of every block of generated rows."""
    sums, columns = docs_rows()
    layer_sums, layer_columns = layer_docs_rows()
    return [
        ("outputs.md", "| | `n` | int64 | occurrences n_t |", "| moments", sums),
        ("outputs.md", "| `tokens.parquet` column | definition |", "", ["| --- | --- |", *columns]),
        ("outputs.md", "| | `sum_outer` |", "| sample", layer_sums),
        ("geometry.md", "| `layer`, `depth`, `n` |", "| `config_hash` |", layer_columns),
    ]


def rewritten(text: str, after: str, until: str, rows: list[str]) -> str:
    """``text`` with the lines between the line starting with ``after`` and the next starting with ``until`` (a
    blank line for ``""``) replaced by ``rows``."""
    lines = text.split("\n")
    start = next(index for index, line in enumerate(lines) if line.startswith(after)) + 1
    end = next(
        index
        for index in range(start, len(lines))
        if (lines[index] == "" if until == "" else lines[index].startswith(until))
    )
    return "\n".join(lines[:start] + rows + lines[end:])


def write_docs(docs: Path) -> list[str]:
    """Rewrite the generated rows in ``docs``; returns the names of the files that changed."""
    changed = []
    for name in dict.fromkeys(name for name, *_ in blocks()):
        path = docs / name
        text = path.read_text(encoding="utf-8")
        new = text
        for file, after, until, rows in blocks():
            if file == name:
                new = rewritten(new, after, until, rows)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(name)
    return changed


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs")
    print(", ".join(write_docs(folder)) or "the docs hold the declared rows already")
