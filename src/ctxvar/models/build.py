"""Models built locally, with no weights to download: random-init transformers and the Gaussian null model."""

from __future__ import annotations

from ctxvar.config.entries import arch_of, random_spec
from ctxvar.models.gaussian_null import build_gaussian_model
from ctxvar.models.random_init import build_random_model, save_model, train_tokenizer


def build_local_model(entry: dict, texts, out_dir, merge_markers: bool = True) -> None:
    """Build the ``init: random`` or ``init: gaussian`` model of ``entry`` into ``out_dir`` (``save_pretrained``
    format with SHA256SUMS; the folder appears only when complete).

    ``init: gaussian`` builds the Gaussian null model (:mod:`ctxvar.models.gaussian_null`) over an ``arch``
    (default bert) tokenizer trained on ``texts``, its types keyed with ``merge_markers``; ``init: random``
    is :func:`~ctxvar.models.random_init.build_random_model`.
    """
    if entry.get("init") != "gaussian":
        build_random_model(entry, texts, out_dir)
        return
    spec = random_spec(entry)
    tokenizer = train_tokenizer(arch_of(entry), texts, spec["vocab_size"])
    save_model(
        build_gaussian_model(entry, tokenizer, merge_markers, spec["hidden_size"], spec["seed"]), tokenizer, out_dir
    )
