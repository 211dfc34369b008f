"""What the manual says a run writes, read from its tables, and checks of a finished run's folder against it.

``docs/outputs.md``'s first table (``| file | contents |``) names every file: each backticked path in the file
cell is a pattern (``{run}`` the run, ``{id}`` a model, ``{i}`` a shard, any other ``{name}`` one path segment,
``{a,b}`` either, ``*`` any part of a name, ``…`` anything below, ``…/`` any folders or none, a trailing ``/``
everything in that folder); a name without a ``/`` is in the folder of the path before it. A table file's
(``.csv``, ``.parquet``) columns are the backticked names outside parentheses in its contents cell (``x{a,b}`` is
``xa`` and ``xb``; "`a_1` … `a_k`" is ``a_`` followed by any number), or, where the cell says "columns below" or
links the columns elsewhere, the paragraph ``docs/outputs.md`` begins with "`{name}` columns" or the
``| column |`` table of the linked page; a partial's ("as the merged files"), those of the merged file of its kind;
where it says "then each declared sum the run keeps", the rest of its layout table's columns, and where "the
columns the table below lists", the first cells of the ``| `{name}` column |`` table.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
OUTPUTS = REPO / "docs" / "outputs.md"
TABLE_SUFFIXES = (".csv", ".parquet")
PLACEHOLDER = re.compile(r"\{(\w+)\}")
ALTERNATIVES = re.compile(r"\{([^{}/]*,[^{}/]*)\}")
BACKTICKED = re.compile(r"`([^`]+)`")
CELL_BORDER = re.compile(r"(?<!\\)\|")  # a cell's \| is text
RANGE = re.compile(r"`(\w*?)(\d+)` … `\1[^`]+`")  # "`explained_1` … `explained_k`"
STACKED = re.compile(r"every model's `([^`]+)` stacked, with a leading `(\w+)` column")
COLUMN_NAME = re.compile(r"[A-Za-z_][\w{},]*")  # a backticked config key (`geometry.cosine`) or value is not one


def table_rows(lines: list[str], header: list[str]) -> list[list[str]]:
    """The cells of each row of the Markdown table in ``lines`` whose header row is ``header``."""
    for start, line in enumerate(lines):
        if line.startswith("|") and cells(line) == header:
            break
    else:
        raise AssertionError(f"no table with the header {header}")
    rows = []
    for line in lines[start + 2 :]:  # after the --- row
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    return rows


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in CELL_BORDER.split(line.strip())[1:-1]]


@dataclass(frozen=True)
class FileRow:
    """One row of the file table: its path patterns (from the working directory) and its contents cell."""

    paths: tuple[str, ...]
    contents: str


def file_rows(text: str | None = None) -> list[FileRow]:
    """The rows of docs/outputs.md's file table (``text``: another version of that file)."""
    lines = (OUTPUTS.read_text(encoding="utf-8") if text is None else text).splitlines()
    rows = []
    for file_cell, contents in table_rows(lines, ["file", "contents"]):
        paths, folder = [], None
        for name in BACKTICKED.findall(file_cell):
            if "/" not in name:
                assert folder is not None, f"docs/outputs.md: `{name}` names no folder and follows no path"
                name = f"{folder}/{name}"
            folder = name.rstrip("/") if name.endswith("/") else name.rsplit("/", 1)[0]
            paths.append(name)
        assert paths, f"docs/outputs.md: a file-table row names no file: {file_cell!r}"
        rows.append(FileRow(tuple(paths), contents))
    return rows


@functools.cache
def run_folders() -> tuple[str, ...]:
    """The folders of a run that are not a model's (``corpus``, ``summary``, …): those the file table names."""
    paths = [path for row in file_rows() for path in row.paths]
    return tuple(sorted({m.group(1) for p in paths if (m := re.match(r"results/\{run\}/(\w+)/", p))}))


def path_regex(pattern: str, run: str) -> re.Pattern:
    """The paths (relative to the working directory, with /) that a documented pattern names in run ``run``; the
    first ``{id}`` is the group ``id``, a model: not one of :func:`run_folders`."""
    expanded, named = "", False
    model = "(?P<id>(?!(?:" + "|".join(map(re.escape, run_folders())) + ")/)[^/]+)"
    for token in re.split(r"(\{[^{}]*\}|\*|…/|…)", pattern):
        if token == "{run}":
            expanded += re.escape(run)
        elif token == "{id}":
            expanded += model if not named else "(?P=id)"
            named = True
        elif token == "{i}":
            expanded += r"\d+"
        elif token == "*":
            expanded += "[^/]*"
        elif token == "…/":
            expanded += "(?:.+/)?"
        elif token == "…":
            expanded += ".+"
        elif ALTERNATIVES.fullmatch(token):
            expanded += "(?:" + "|".join(re.escape(part) for part in token[1:-1].split(",")) + ")"
        elif PLACEHOLDER.fullmatch(token):
            expanded += "[^/]+"
        else:
            expanded += re.escape(token)
    return re.compile(expanded + (".+" if pattern.endswith("/") else ""))


def sample_path(pattern: str) -> str:
    """One path a pattern names: each placeholder, ``*`` and ``…`` by a plain name, each ``{a,b}`` by its first."""
    path = ALTERNATIVES.sub(lambda match: match.group(1).split(",")[0], pattern)
    path = PLACEHOLDER.sub(lambda match: "0" if match.group(1) == "i" else f"x{match.group(1)}", path)
    return path.replace("*", "x").replace("…", "x")


def run_files(workdir: Path, run: str) -> list[str]:
    """Every file of run ``run`` in ``workdir`` (its results, logs and benchmarks), as paths from ``workdir``."""
    found = []
    for top in ("results", "logs", "benchmarks"):
        found += [p.relative_to(workdir).as_posix() for p in (workdir / top / run).rglob("*") if p.is_file()]
    return sorted(found)


def undocumented_files(workdir: Path, run: str, rows: list[FileRow]) -> list[str]:
    """The files of the run that no documented pattern names."""
    regexes = [path_regex(path, run) for row in rows for path in row.paths]
    return [file for file in run_files(workdir, run) if not any(r.fullmatch(file) for r in regexes)]


def matches(workdir: Path, run: str, pattern: str) -> dict[str | None, list[str]]:
    """The run's files a documented pattern names, by model (``None`` for a pattern without ``{id}``)."""
    regex, found = path_regex(pattern, run), {}
    for file in run_files(workdir, run):
        match = regex.fullmatch(file)
        if match:
            found.setdefault(match.groupdict().get("id"), []).append(file)
    return found


def expand_braces(name: str) -> list[str]:
    """``slope_log{Q,M,V}`` → ``slope_logQ``, ``slope_logM``, ``slope_logV``."""
    match = ALTERNATIVES.search(name)
    if not match:
        return [name]
    head, tail = name[: match.start()], name[match.end() :]
    return [expanded for part in match.group(1).split(",") for expanded in expand_braces(head + part + tail)]


def top_level(text: str) -> str:
    """``text`` without its parenthesised parts."""
    kept, depth = "", 0
    for char in text:
        depth += char == "("
        if depth == 0:
            kept += char
        depth -= char == ")" and depth > 0
    return kept


def named_columns(text: str) -> list[str | re.Pattern]:
    """The columns a piece of the docs names: backticked names outside parentheses, a "`a_1` … `a_k`" range as
    the pattern ``a_\\d+``."""
    text = top_level(text)
    ranges = [re.compile(re.escape(match.group(1)) + r"\d+") for match in RANGE.finditer(text)]
    text = RANGE.sub("", text)
    names = [name for name in BACKTICKED.findall(text) if COLUMN_NAME.fullmatch(name)]
    return [*(expanded for name in names for expanded in expand_braces(name)), *ranges]


def columns_paragraph(name: str) -> str:
    """The paragraph of docs/outputs.md that begins "`{name}` columns", from its first colon."""
    paragraphs = OUTPUTS.read_text(encoding="utf-8").split("\n\n")
    found = [p for p in paragraphs if p.startswith(f"`{name}` columns")]
    assert len(found) == 1, f"docs/outputs.md: {len(found)} paragraphs begin '`{name}` columns'"
    return found[0].split(":", 1)[1]


def linked_columns(page: str) -> str:
    """The backticked names in the first cells of a docs page's ``| column |`` table, as one text."""
    lines = (OUTPUTS.parent / page).read_text(encoding="utf-8").splitlines()
    header = next(cells(line) for line in lines if line.startswith("| column |"))
    return ", ".join(row[0] for row in table_rows(lines, header))


def documented_columns(row: FileRow, rows: list[FileRow], path: str | None = None) -> list[str | re.Pattern]:
    """The columns the docs give the table file ``path`` of ``row`` (default: its first)."""
    path = path or row.paths[0]
    if "as the merged files" in row.contents:  # {i}.moments.parquet: as {id}/sums.moments.parquet
        merged = "/{id}/sums" + path.rsplit("/", 1)[1].removeprefix("{i}")
        found = [other for other in rows if other.paths[0].endswith(merged)]
        assert len(found) == 1, f"docs/outputs.md: {len(found)} rows of a merged file {merged}"
        return documented_columns(found[0], rows)
    stacked = STACKED.search(row.contents)
    if stacked:  # a summary table: the per-model table's columns after the leading one
        name, leading = stacked.groups()
        per_model = [other for other in rows if any(path.endswith("/{id}/" + name) for path in other.paths)]
        assert len(per_model) == 1, f"docs/outputs.md: {len(per_model)} rows of a per-model {name}"
        return [leading, *documented_columns(per_model[0], rows)]
    if "then each declared sum the run keeps" in row.contents:  # a sums file: its layout table lists them
        named = named_columns(row.contents)
        return named + [column for column, _ in layout_rows()[path.rsplit("/", 1)[1]] if column not in named]
    if "the columns the table below lists" in row.contents:  # tokens.parquet: the declared sums' columns
        lines = OUTPUTS.read_text(encoding="utf-8").splitlines()
        name = path.rsplit("/", 1)[1]
        return named_columns(row.contents) + [
            cell.strip("`") for cell, _ in table_rows(lines, [f"`{name}` column", "definition"])
        ]
    link = re.search(r"columns \[below\]\(([\w.]+\.md)\)", row.contents)
    if link:
        return named_columns(linked_columns(link.group(1)))
    if re.search(r"\bcolumns below\b", row.contents):
        return named_columns(columns_paragraph(path.rsplit("/", 1)[1]))
    return named_columns(row.contents)


def table_columns(path: Path) -> list[str]:
    """The columns a CSV or Parquet file holds."""
    if path.suffix == ".parquet":
        return pq.read_schema(path).names
    with path.open(newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def column_differences(documented: list[str | re.Pattern], held: list[str]) -> tuple[list[str], list[str]]:
    """(documented columns the file does not hold, columns it holds that the docs do not name)."""
    names = [c for c in documented if isinstance(c, str)]
    patterns = [c for c in documented if not isinstance(c, str)]
    missing = [c for c in names if c not in held] + [
        p.pattern for p in patterns if not any(p.fullmatch(c) for c in held)
    ]
    extra = [c for c in held if c not in names and not any(p.fullmatch(c) for p in patterns)]
    return missing, extra


def layout_rows() -> dict[str, list[tuple[str, str]]]:
    """The sums files' layout table: file name (``sums.parquet``, …) → [(column, Parquet type)]."""
    lines = OUTPUTS.read_text(encoding="utf-8").splitlines()
    layouts, current = {}, None
    for file_cell, column, kind, _ in table_rows(lines, ["file", "column", "Parquet type", "contents"]):
        if file_cell:
            current = BACKTICKED.findall(file_cell)[0]
        layouts.setdefault(current, []).append((BACKTICKED.findall(column)[0], kind))
    return layouts


def parquet_type(kind: str, d: int) -> pa.DataType:
    """The Arrow type a layout table's type names for a model of width ``d``: ``fixed_size_binary(8·d)``, ``int16``…"""
    width = re.fullmatch(r"fixed_size_binary\((\d+)·d\)", kind)
    if width:
        return pa.binary(int(width.group(1)) * d)
    return pa.string() if kind == "string" else pa.type_for_alias(kind)
