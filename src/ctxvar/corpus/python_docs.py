"""Real English prose that ships with every CPython: the Python documentation's pydoc topics.

``pydoc_data.topics`` holds the plain-text rendering of the Language Reference pages that
``help()`` shows (about 465,000 characters in CPython 3.11; the text follows the Python
version). The documentation is © Python Software Foundation, under the PSF License
Version 2 (https://docs.python.org/3/license.html).

Only prose is kept: headings, grammar productions, code examples and interpreter sessions
are dropped, paragraphs are re-joined and split into sentences. The result is
deterministic for a given Python version, which :func:`provenance` records.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import sys
import textwrap

LICENCE = "PSF License Version 2 (Python documentation, © Python Software Foundation)"
SOURCE = "pydoc_data.topics (the Language Reference text behind help(), shipped with CPython)"

HEADING_UNDERLINE = re.compile(r"^([*=\-~^\"'`#+])\1{2,}$")
LIST_MARKER = re.compile(r"^(?:[*\-+]|\d+\.|\(\d+\)|\[\d+\])\s+")  # bullets, numbers and footnote marks
EMPHASIS = re.compile(r"(\*\*?)([^*\s](?:[^*]*[^*\s])?)\1(?![\w*])")  # *word* and **PEP 8** as rendered by reST
CODE_SIGNS = (">>>", "::=", "...", "{", "}", "->", "==", "=>", "\\")
# A sentence ends at . ! or ? followed by space and an upper-case letter, a digit or an opening quote.
SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[\"'(]?[A-Z0-9])")
SENTENCE_ENDS = (".", ":", "!", "?", '."', ".)")
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Dr.", "No.", "approx.")
MIN_WORDS = 3


@functools.cache
def python_docs_sentences() -> tuple[str, ...]:
    """Every prose sentence of the pydoc topics, in topic order (topics sorted by name); parsed once per process
    (sampling and :func:`provenance` both read it)."""
    topics = pydoc_topics()
    sentences = []
    for name in sorted(topics):
        for paragraph in prose_paragraphs(topics[name]):
            sentences.extend(split_sentences(paragraph))
    return tuple(sentences)


def pydoc_topics() -> dict[str, str]:
    """``pydoc_data.topics.topics`` as its source file holds it now: the file's code run from its text, where an
    import would take Python's bytecode cache, which keys on a source's size and modification time and so gives
    the text of a file edited in place with both kept (the corpus's fingerprint, with the change time, names the
    new one)."""
    path = importlib.util.find_spec("pydoc_data.topics").origin
    with open(path, "rb") as handle:
        code = compile(handle.read(), path, "exec")
    namespace: dict = {}
    exec(code, namespace)  # the standard library's module, as an import would run it
    return namespace["topics"]


def prose_paragraphs(text: str) -> list[str]:
    """The paragraphs of ``text`` that read as prose, each joined into one line.

    Paragraphs are blocks between blank lines, dedented (definition bodies and notes are
    indented prose). A block is prose when it starts with a letter or a quote, has no
    line that looks like code, ends like a sentence, and is at least 85 % letters and
    spaces. Headings (a line over an underline of * = - ~ ^) are dropped.
    """
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in textwrap.dedent(block).splitlines() if line.strip()]
        if not lines or any(HEADING_UNDERLINE.match(line.strip()) for line in lines):
            continue
        if lines[0].startswith((" ", "\t")) and not all(line.startswith(" ") for line in lines[1:]):
            continue  # a hanging indent: a grammar production or code continued from above
        joined = " ".join(line.strip() for line in lines)
        joined = EMPHASIS.sub(r"\2", LIST_MARKER.sub("", joined))
        if _reads_as_prose(joined):
            paragraphs.append(joined)
    return paragraphs


def _reads_as_prose(paragraph: str) -> bool:
    if not paragraph or not (paragraph[0].isalpha() or paragraph[0] in "\"'(") or not paragraph.endswith(SENTENCE_ENDS):
        return False
    if any(sign in paragraph for sign in CODE_SIGNS):
        return False
    wordy = sum(c.isalpha() or c.isspace() or c in "\"'’,.()_" for c in paragraph)
    return wordy >= 0.85 * len(paragraph)


def split_sentences(paragraph: str) -> list[str]:
    """``paragraph`` split after . ! ? before a capital, digit or quote; not after e.g., i.e., etc.

    Sentences of fewer than three words (list fragments, labels) are dropped.
    """
    sentences: list[str] = []
    for piece in SENTENCE_BOUNDARY.split(" ".join(paragraph.split())):
        if sentences and sentences[-1].endswith(ABBREVIATIONS):
            sentences[-1] += " " + piece
        else:
            sentences.append(piece)
    return [sentence for sentence in sentences if len(sentence.split()) >= MIN_WORDS]


def provenance() -> dict:
    """Where the text came from: the source, its licence, the Python version and the SHA-256 of the sentences."""
    digest = hashlib.sha256("\n".join(python_docs_sentences()).encode("utf-8")).hexdigest()
    return {
        "source": SOURCE,
        "licence": LICENCE,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "sentences_sha256": digest,
    }
