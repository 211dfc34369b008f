"""Text and jsonl corpora of a few lines written in each encoding ctxvar reads (UTF-8 with and without a
byte-order mark, UTF-16, UTF-32), with the corpus settings that sample every line of them."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

LINES = ["the cat sat on the mat .", "naïve café , déjà vu", "tab\tseparated words", "one more line here"]
ENCODED_CORPUS = {"text_column": "text", "fraction": 1.0, "max_words": 63, "seed": 0, "sampling": "paper"}
ENCODINGS = {  # an encoding → the byte-order mark written before its text (utf-16 and utf-32 write their own)
    "utf-8": b"",
    "utf-8 bom": codecs.BOM_UTF8,
    "utf-16": b"",
    "utf-16-be bom": codecs.BOM_UTF16_BE,
    "utf-32": b"",
}


def encoded(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding`` (a key of :data:`ENCODINGS`), its byte-order mark first."""
    codec = encoding.split()[0]
    return ENCODINGS[encoding] + text.encode(codec)


def corpus_file(tmp_path: Path, source: str, encoding: str) -> Path:
    """:data:`LINES` as a ``text`` file, one a line, or a ``jsonl`` one, a ``{"text": ...}`` object a line, in
    ``encoding``."""
    if source == "text":
        path = tmp_path / "c.txt"
        path.write_bytes(encoded("\n".join(LINES) + "\n", encoding))
    else:
        path = tmp_path / "c.jsonl"
        path.write_bytes(encoded("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in LINES), encoding))
    return path
