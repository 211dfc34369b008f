"""The docs' declared rows, written from the declarations between anchor lines that stay; anchors edited away stop
the command with one line and leave every doc as it was."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from ctxvar.stats.declarations_doc import blocks, rewritten, write_docs

from support.workflow_runs import REPO

TABLE = ["| a | b |", "| --- | --- |", "| first | stays |", "| old | row |", "| last | stays |", "", "text below"]


@pytest.fixture
def docs(tmp_path):
    """A copy of the docs the command rewrites."""
    for name in dict.fromkeys(name for name, *_ in blocks()):
        shutil.copy(REPO / "docs" / name, tmp_path / name)
    return tmp_path


def test_the_shipped_docs_hold_the_declared_rows(docs):
    assert write_docs(docs) == []


def test_the_rows_between_the_anchors_are_replaced_and_the_rest_kept():
    text = "\n".join(TABLE)
    assert rewritten(text, "| first", "| last", ["| new | row |"]).split("\n") == [
        *TABLE[:3],
        "| new | row |",
        *TABLE[4:],
    ]
    assert rewritten(text, "| last", "", ["| added |"]).split("\n") == [*TABLE[:5], "| added |", *TABLE[5:]]


@pytest.mark.parametrize(
    "lines, after, until, message",
    [
        (TABLE, "| gone", "| last", "0 lines start with '| gone'"),
        ([*TABLE, "| first | again |"], "| first", "| last", "2 lines start with '| first'"),
        (TABLE, "| first", "| gone", "no line starting with '| gone' follows '| first' in its table"),
        ([*TABLE, "| gone | below the table |"], "| first", "| gone", "no line starting with '| gone'"),
    ],
)
def test_a_missing_or_repeated_anchor_is_named_not_guessed(lines, after, until, message):
    with pytest.raises(ValueError, match="^doc.md: .*" + message.replace("|", r"\|")):
        rewritten("\n".join(lines), after, until, ["| new |"], "doc.md")


def test_a_lost_anchor_stops_the_command_with_one_line_and_writes_no_doc(docs):
    file, after, *_ = blocks()[-1]
    before = {path.name: path.read_text(encoding="utf-8") for path in docs.iterdir()}
    edited = before[file].replace(after, "| renamed |")
    (docs / file).write_text(edited, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "ctxvar.stats.declarations_doc", str(docs)], capture_output=True, text=True
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"declarations_doc: {docs / file}: 0 lines start with {after!r}, not one; the declared rows follow that "
        "line: restore it as it was (the rows below it are generated)"
    ]
    assert {path.name: path.read_text(encoding="utf-8") for path in docs.iterdir()} == {**before, file: edited}
