"""enwik8 as Razzhigaev et al.'s published code reads it and cuts it into the pieces it embeds.

Written from AIRI-Institute/LLM-Microscope at commit b6db939b2696845ce1f88cf69cddc41e808eea17 (the code of "The
Shape of Learning: Anisotropy and Intrinsic Dimensions in Transformer-Based Models", EACL 2024 Findings, and of
its sequels), LLM_microscope.ipynb, and from ``load_enwiki_text`` in llm_microscope/functions.py of the PyPI
package llm-microscope (versions 0.0.3 to 0.0.7), not copied from them:

- ``load_enwiki_text`` cleans nothing. Versions 0.0.3 to 0.0.5 return ``open("./enwik88.txt").read()``; 0.0.6 and
  0.0.7 fetch the same file from the repository's main branch with ``urllib.request.urlopen(link).read()`` and
  return its bytes. ``enwik88.txt`` (committed in d1e95e5, "add dataset file") is the study's text, already
  cleaned; the code that cleaned it (the paper: code, media and HTML tags removed) is not published.
- The notebook's cell 4 reads ``text = open("./enwik88.txt").read()`` and, with ``N_CHARS = 512``, embeds the
  piece ``text[j : j + 512]`` at ``j = i * 512`` for the indices ``i`` it draws from ``range(len(text) // 512)``
  (``random.seed(0)``, ``steps = min(STEPS, len(text) // N_CHARS)`` with ``STEPS = 128``, then
  ``start_idxs = random.sample(list(range(len(text) // N_CHARS)), steps)``), in the order drawn; each piece is
  tokenised whole. ``get_embeddings`` takes that draw as its default ``start_idxs``. From commit 905920a on, the
  cell after it draws from the same seeded stream again (1,024 indices, then 128) before the results cell passes
  ``start_idxs`` explicitly, so that notebook run in order embeds the third draw; :func:`drawn_pieces` is cell 4's.

``open`` decodes with the platform's encoding, UTF-8 on Linux and macOS, named here; in text mode it reads
``\\r\\n`` and ``\\r`` as ``\\n``.
"""

from __future__ import annotations

import random

N_CHARS = 512
STEPS = 128


def load_enwiki_text(path) -> str:
    """``load_enwiki_text`` of llm-microscope 0.0.3 to 0.0.5 (and the notebook's read), for the file ``path``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text


def pieces(text: str) -> list[str]:
    """Every piece the notebook can draw, in index order: ``text[i*512 : i*512 + 512]`` for ``i < len(text) // 512``."""
    return [text[i * N_CHARS : i * N_CHARS + N_CHARS] for i in range(len(text) // N_CHARS)]


def drawn_pieces(text: str, seed: int = 0, steps: int = STEPS) -> list[str]:
    """The pieces cell 4 draws, in the order drawn, with Python's global ``random`` as the notebook uses it (its
    state is put back afterwards, so that other tests' draws do not depend on this one's)."""
    state = random.getstate()
    try:
        random.seed(seed)
        steps = min(steps, len(text) // N_CHARS)
        start_idxs = random.sample(list(range(len(text) // N_CHARS)), steps)
    finally:
        random.setstate(state)
    return [text[j * N_CHARS : j * N_CHARS + N_CHARS] for j in start_idxs]
