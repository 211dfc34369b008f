"""Writes the declared sums' rows into the docs, between rows that stay, so that a new sum's rows come from its
declaration (:func:`ctxvar.stats.declarations.docs_rows`, :func:`~ctxvar.stats.declarations.layer_docs_rows`)::

    python -m ctxvar.stats.declarations_doc      # rewrite the rows in docs/outputs.md and docs/geometry.md

Each block is the lines after the one line that starts with ``after`` up to the next line of its table that starts
with ``until``: the sums-file table's sums, the ``tokens.parquet`` columns, the moments file's per-layer sums and the
``geometry.csv`` columns of the per-layer sums. A doc whose anchor lines are gone or repeated stops the command
with one line naming the file and the anchor, and no file is written.
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


def rewritten(text: str, after: str, until: str, rows: list[str], name: str = "the text") -> str:
    """``text`` with the lines between the line starting with ``after`` and the next starting with ``until`` (a
    blank line for ``""``) replaced by ``rows``. Raises :class:`ValueError` naming ``name`` and the anchor unless
    exactly one line starts with ``after`` and a line starting with ``until`` follows it in the same table (before
    a blank line): rows are never written where the anchors are not, nor over the text below a table."""
    lines = text.split("\n")
    starts = [index for index, line in enumerate(lines) if line.startswith(after)]
    if len(starts) != 1:
        raise ValueError(
            f"{name}: {len(starts)} lines start with {after!r}, not one; the declared rows follow that line: "
            "restore it as it was (the rows below it are generated)"
        )
    start = starts[0] + 1
    # the table's end (a blank line) stops the search, so that a lost ``until`` never takes the text below it
    ends = (
        index for index in range(start, len(lines)) if lines[index] == "" or until and lines[index].startswith(until)
    )
    end = next(ends, None)
    if end is None or (until != "" and not lines[end].startswith(until)):
        raise ValueError(
            f"{name}: no line starting with {until!r} follows {after!r} in its table; the declared rows end before "
            "that line: restore it as it was"
        )
    return "\n".join(lines[:start] + rows + lines[end:])


def write_docs(docs: Path) -> list[str]:
    """Rewrite the generated rows in ``docs``; returns the names of the files that changed. Every file is
    rewritten in memory first, so that an anchor missing from one (:func:`rewritten`) leaves all as they were."""
    texts = {}
    for name in dict.fromkeys(name for name, *_ in blocks()):
        path = docs / name
        text = path.read_text(encoding="utf-8")
        new = text
        for file, after, until, rows in blocks():
            if file == name:
                new = rewritten(new, after, until, rows, str(path))
        texts[path] = (text, new)
    changed = []
    for path, (text, new) in texts.items():
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path.name)
    return changed


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs")
    try:
        changed = write_docs(folder)
    except (ValueError, OSError) as error:
        sys.exit(f"declarations_doc: {error}")
    print(", ".join(changed) or "the docs hold the declared rows already")
