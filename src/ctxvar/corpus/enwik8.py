"""enwik8 as Razzhigaev et al. embed it: a text read whole and cut into pieces of 512 characters, in order.

enwik8 is the first 10⁸ bytes of an English Wikipedia XML dump of 2006 (the Hutter Prize's file, in
``enwik8.zip``). The study's code reads its copy of the text whole with Python's ``open(path).read()`` (UTF-8,
every line end made ``\\n``) and cuts ``text[j*512 : j*512 + 512]`` for each ``j < len(text) // 512``: the pieces
follow each other, none overlaps, the shorter tail is left out. Its function ``load_enwiki_text`` returns that
copy, ``enwik88.txt``, as it is: it cleans nothing. That file is the study's cleaned text (its paper: code, media
and HTML tags removed), made by code it did not publish; with it as ``corpus.path`` the pieces are the study's.
The Hutter Prize's file gives the same cut of the raw XML, markup and all.

The text comes from a local file (``corpus.path``): the raw file, a zip holding it as ``enwik8``, or any UTF-8 text
(``enwik88.txt``); or, with no path, from the Hub dataset ``LTCB/enwik8``, whose configuration ``enwik8-raw`` is the
file's text in one row, read by the dataset's loading script as ``open(filepath, encoding="utf-8").read()``.
``datasets`` 4 and later run no loading script, so the row is read from the Hub's Parquet export of the dataset
(its branch ``refs/convert/parquet``), at the commit resolved at start-up.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import zipfile

from ctxvar.config.entries import corpus_paths
from ctxvar.errors import ConfigError, CorpusError

PIECE_CHARACTERS = 512  # N_CHARS of the study's notebook: the length of every piece embedded
ZIP_MEMBER = "enwik8"  # the one file of the Hutter Prize's enwik8.zip
HUB_ID = "LTCB/enwik8"
HUB_REVISION = "refs/convert/parquet"  # the Hub's Parquet export of the dataset, which datasets ≥ 4 can read
HUB_CONFIG = "enwik8-raw"  # the export's folder of the configuration whose one row is the whole text
HEAD_BYTES = 1 << 16  # what the start-up check reads of a file to tell whether it is UTF-8 text
USE = "use the Hutter Prize's enwik8 or enwik8.zip, or a UTF-8 text such as the study's enwik88.txt"


@contextlib.contextmanager
def opened_bytes(path, shown=None):
    """The bytes of the text in the file ``path`` (named ``shown`` in messages): the file's own, or for a zip its
    member ``enwik8``; :class:`CorpusError` for a zip without one or one that cannot be read."""
    shown = shown or path
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as handle:
            yield handle
        return
    with zip_of(path, shown) as archive, archive.open(member_of(archive, shown)) as member:
        yield member


def zip_of(path, shown) -> zipfile.ZipFile:
    """The zip ``path`` (named ``shown`` in messages) opened; :class:`CorpusError` for one that cannot be read."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise CorpusError(f"corpus.path: {shown} is a damaged zip ({error}); {USE}") from error


def member_of(archive: zipfile.ZipFile, shown) -> zipfile.ZipInfo:
    """The member ``enwik8`` of ``archive`` (the file named ``shown``); :class:`CorpusError` if it has none."""
    try:
        return archive.getinfo(ZIP_MEMBER)
    except KeyError:
        members = ", ".join(archive.namelist()[:5]) or "none"
        raise CorpusError(
            f"corpus.path: {shown} is a zip without a member named enwik8 (members: {members}); {USE}"
        ) from None


def read_pieces(path, shown=None) -> list[str]:
    """The pieces of the text in the file ``path`` (:func:`opened_bytes`), decoded as ``open(path).read()``
    decodes it: UTF-8, strictly, with ``\\r\\n`` and ``\\r`` read as ``\\n``. Bytes that are not UTF-8 are a
    :class:`CorpusError` naming how far the text had been read, as the study's read stops there."""
    shown = shown or path
    with opened_bytes(path, shown) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline=None)
        try:
            return pieces_into([], text)
        except UnicodeDecodeError:
            pass
        finally:
            text.detach()
    with opened_bytes(path, shown) as raw:
        raise CorpusError(not_utf8(shown, *first_bad_byte(raw)))


def pieces(text: str) -> list[str]:
    """``text[j*512 : j*512 + 512]`` for each ``j < len(text) // 512``, in order."""
    return pieces_into([], io.StringIO(text))


def pieces_into(found: list[str], stream: io.TextIOBase) -> list[str]:
    """Append to ``found`` each whole piece that ``stream`` reads, in order, and return it; the tail shorter than
    a piece is left out (``read(n)`` returns ``n`` characters until the end of the text)."""
    while len(piece := stream.read(PIECE_CHARACTERS)) == PIECE_CHARACTERS:
        found.append(piece)
    return found


def hub_text(dataset) -> str:
    """The one row of the Hub's ``enwik8-raw`` configuration: the whole text."""
    if dataset.num_rows != 1 or "text" not in dataset.column_names:
        raise CorpusError(
            f"corpus: {HUB_ID} ({HUB_CONFIG}) holds {dataset.num_rows} rows with columns {dataset.column_names}, "
            "not the one row of text it is made of; use a local copy of the Hutter Prize's file (corpus.path)"
        )
    return dataset.data.column("text")[0].as_py()


def pieces_at_most(path) -> int:
    """An upper bound on the pieces of the file ``path``: its text's bytes over 512 (a character is one byte or
    more, and reading ``\\r\\n`` as ``\\n`` only shortens it)."""
    if not zipfile.is_zipfile(path):
        return os.path.getsize(path) // PIECE_CHARACTERS
    with zip_of(path, path) as archive:
        return member_of(archive, path).file_size // PIECE_CHARACTERS


def check_file(corpus: dict) -> None:
    """At start-up, after :func:`ctxvar.config.checks.check_config` (which checks that ``corpus.path`` names one
    file that exists): a one-line :class:`ConfigError` if enwik8's local file cannot be its text: a zip without
    the member ``enwik8``, or first 64 KiB that are not UTF-8 (a bad byte further on stops the sampling). Nothing
    for other sources and for enwik8 from the Hub."""
    if corpus["source"] != "enwik8" or not corpus_paths(corpus):
        return
    path = corpus_paths(corpus)[0]
    try:
        with opened_bytes(path) as raw:
            head = raw.read(HEAD_BYTES)
    except CorpusError as error:
        raise ConfigError(str(error)) from error
    except OSError as error:
        raise ConfigError(f"corpus.path: {path} cannot be read ({error.strerror or error}); {USE}") from error
    if (bad := first_bad_byte(io.BytesIO(head), final=False)) is not None:
        raise ConfigError(not_utf8(path, *bad))


def first_bad_byte(raw, final: bool = True) -> tuple[int, bytes] | None:
    """Where the binary stream ``raw`` first stops being UTF-8, and the bytes there; None if it never does (with
    ``final`` False, a sequence cut short at the end is not counted: the stream is the head of a file)."""
    decoder, offset = codecs.getincrementaldecoder("utf-8")(), 0
    while True:
        block = raw.read(1 << 20)
        pending = decoder.getstate()[0]
        try:
            decoder.decode(block, final=final and not block)
        except UnicodeDecodeError as error:
            return offset - len(pending) + error.start, (pending + block)[error.start : error.start + 4]
        if not block:
            return None
        offset += len(block)


def not_utf8(path, offset: int, found: bytes) -> str:
    """The one line that says the file ``path`` is not UTF-8 text at byte ``offset``, where it holds ``found``."""
    return f"corpus.path: {path} is not UTF-8 text (byte {offset:,}: {found!r}); {USE}"
