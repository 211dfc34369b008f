"""The tracked text holds no merge-conflict markers, and the manual (docs, docstrings, comments) describes the
software, not its making: no sessions, issue numbers, review rounds, or dates of who measured what."""

from __future__ import annotations

import re
import subprocess

import pytest

from support.workflow_runs import REPO

CONFLICT = re.compile(rf"^({'<' * 7}|{'>' * 7})( |$)|^{'=' * 7}$", flags=re.M)  # built, so this file holds none
MAKING = re.compile(
    r"\bthis (session|round)\b|\bsessions? (that|which)\b|\b(was|were) lent\b|\blent to\b|\bissue ?#?\d+\b"
    r"|\bprevious run\b|\bhostile (review|sweep)\b|\bmeasured (today|yesterday)\b|\(measured \d{4}-\d\d-\d\d\)",
    flags=re.I,
)
ISSUE_NUMBER = re.compile(r"(?<![\w&])#\d+\b")  # '#29' in prose (Markdown only: code has colours like #123456)


def tracked_text_files() -> list:
    """The repository's tracked files that are text (no NUL byte), or a skip outside a git checkout."""
    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = [REPO / name for name in names.decode().split("\0") if name]
    return [path for path in files if path.is_file() and b"\0" not in path.read_bytes()]


def test_no_tracked_text_file_holds_merge_conflict_markers():
    marked = [str(path.relative_to(REPO)) for path in tracked_text_files() if CONFLICT.search(path.read_text())]
    assert marked == [], f"merge-conflict markers in {marked}"


def test_docs_docstrings_and_comments_describe_the_software_not_its_making():
    """Generated reports (bench/results/) say when they were made; everything else describes what is."""
    found = []
    for path in tracked_text_files():
        relative = str(path.relative_to(REPO))
        if relative.startswith("bench/results/") or relative == "tests/unit/project/test_docs_text.py":
            continue
        text = path.read_text()
        patterns = [MAKING, ISSUE_NUMBER] if path.suffix == ".md" else [MAKING]
        for pattern in patterns:
            found += [f"{relative}: {match.group(0)!r}" for match in pattern.finditer(text)]
    assert found == [], "words about how the docs were made: " + "; ".join(found)
