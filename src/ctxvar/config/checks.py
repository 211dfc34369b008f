"""The checks of a config that its JSON schema (:mod:`ctxvar.config.schema`) cannot express, each a one-line
:class:`ConfigError` naming the key and the remedy."""

from __future__ import annotations

import os

from ctxvar.config.entries import (
    corpus_paths,
    local_corpus,
    local_with_revision,
    missing_model_directory,
    models_by_id,
    reads_corpus,
    runs_forward,
)
from ctxvar.config.kinds import MODEL_KINDS, entry_problem, kind_of, random_spec
from ctxvar.errors import ConfigError


def check_config(config: dict) -> None:
    """Raise :class:`ConfigError` (one line) for what the JSON schema cannot check."""
    corpus = config.get("corpus")
    if corpus is None:
        check_no_corpus_needed(config["models"])
    elif corpus["source"] == "hf" and not corpus.get("name"):
        raise ConfigError("corpus.name: required when corpus.source is 'hf' (a Hub dataset id, e.g. bookcorpus)")
    elif local_corpus(corpus):
        check_corpus_paths(corpus)
    if corpus and (conflict := rows_conflict(corpus.get("rows"), corpus.get("fraction", 1.0), corpus.get("sampling"))):
        raise ConfigError(conflict)
    analysis = config["analysis"]
    if analysis["min_log10_n"] > analysis["max_log10_n"]:
        raise ConfigError(
            f"analysis: min_log10_n ({analysis['min_log10_n']}) is above max_log10_n "
            f"({analysis['max_log10_n']}), so no type would pass the frequency filter; swap them"
        )
    for entry in config["models"]:
        name = entry.get("name")
        if name is not None and (name != name.strip() or any(ord(c) < 32 for c in name)):
            raise ConfigError(
                f"models[]: name {name!r} has leading or trailing spaces or control characters; remove them"
            )
        check = KIND_CHECKS.get(kind_of(entry).init)
        problem = entry_problem(entry) or (check(entry) if check else None)
        if problem:
            raise ConfigError(problem)
    models = models_by_id(config)
    pca_model = config.get("figures", {}).get("pca", {}).get("model")
    if pca_model is not None and pca_model not in models:
        raise ConfigError(
            f"figures.pca.model: {pca_model!r} is not a model id (ids: {', '.join(models)}); use one of them or null"
        )
    if pca_model is not None and not runs_forward(models[pca_model]):
        raise ConfigError(
            f"figures.pca.model: {pca_model!r} has forward: false, so none of its embeddings are collected; name a "
            "model that runs over the corpus, or null"
        )


def check_no_corpus_needed(entries: list[dict]) -> None:
    """A config without a ``corpus:`` section is whole only when no model reads the corpus."""
    readers = [entry.get("id") or entry.get("name") for entry in entries if reads_corpus(entry)]
    if readers:
        shown = ", ".join(map(repr, readers[:3])) + (f" and {len(readers) - 3} more" if len(readers) > 3 else "")
        built = " or ".join(kind.init for kind in MODEL_KINDS if kind.reads_corpus)
        raise ConfigError(
            f"corpus: section missing, and models {shown} read the corpus (a forward pass, or init {built}, whose "
            "tokenizer is trained on it); add one (e.g. corpus: {source: python-docs}), or set forward: false on "
            "models that need only their embedding matrices"
        )


def check_corpus_paths(corpus: dict) -> None:
    """``corpus.path`` names files that exist; for ``enwik8``, one file (whose bytes
    :func:`ctxvar.corpus.enwik8.check_file` checks)."""
    paths = corpus_paths(corpus)
    if not paths:
        raise ConfigError(f"corpus.path: required when corpus.source is {corpus['source']!r}")
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ConfigError(
            f"corpus.path: {'is a directory, not a file' if os.path.isdir(missing[0]) else 'file not found'}: "
            f"{missing[0]} (paths are relative to the working directory)"
        )
    if corpus["source"] == "enwik8" and len(paths) > 1:
        raise ConfigError(f"corpus.path: source enwik8 reads one file, not {len(paths)}; name one")


def rows_conflict(rows: int | None, fraction: float, sampling: str) -> str | None:
    """The line that says why ``corpus.rows`` cannot size the sample, or None (also when ``rows`` is null):
    ``rows`` is the sample's size in place of ``fraction``, so ``fraction`` must stay 1.0 (its default), and
    ``sampling: hash`` keeps rows by a threshold, which cannot give an exact count."""
    if rows is None:
        return None
    if sampling == "hash":
        return (
            f"corpus.rows: sampling hash keeps the rows whose hash falls below corpus.fraction, so it cannot draw "
            f"exactly {rows}; use sampling: paper or python-random with rows, or remove rows and set corpus.fraction"
        )
    if fraction != 1.0:
        return (
            f"corpus.rows: {rows} and corpus.fraction: {fraction} both set the sample's size; keep rows and remove "
            "fraction (rows needs its default, 1.0), or remove rows"
        )
    return None


def pretrained_problem(entry: dict) -> str | None:
    """An ``init: pretrained`` entry's ``name`` written as a path names a model directory, and a directory's entry
    has no ``revision(s)``."""
    return missing_model_directory(entry) or local_with_revision(entry)


def random_problem(entry: dict) -> str | None:
    """An ``init: random`` model's width splits across its attention heads."""
    sizes = random_spec(entry)
    if sizes["hidden_size"] % sizes["num_heads"]:
        return (
            f"models[]: entry {entry.get('id')!r}: hidden_size {sizes['hidden_size']} is not a "
            f"multiple of num_heads {sizes['num_heads']}; attention splits d across the heads"
        )
    return None


def archive_problem(entry: dict) -> str | None:
    """An ``init: archive`` entry names one file, ``archive`` (a zip) or ``gguf``, and ``sha256``; for a GGUF
    file, ``sha256`` lists the file itself by its name."""
    files = [key for key in ("archive", "gguf") if key in entry]
    if len(files) > 1:
        return f"models[]: entry {entry.get('id')!r} sets both archive and gguf; an init: archive entry reads one file"
    if not files or "sha256" not in entry:
        return (
            f"models[]: entry {entry.get('id')!r} has init: archive and needs 'archive' (the .zip) and 'sha256' "
            "(the digest of at least its weights file), or 'gguf' (a GGUF checkpoint) in place of 'archive'"
        )
    name = os.path.basename(entry["gguf"]) if files == ["gguf"] else None
    if name is not None and name not in entry["sha256"]:
        return f"models[]: entry {entry.get('id')!r}: sha256 must list the GGUF file itself, {name}: <its SHA-256>"
    return None


# The checks of an entry beyond what its kind declares (ctxvar.config.kinds.entry_problem), by init: optional, for
# what a kind's declaration cannot say.
KIND_CHECKS = {"pretrained": pretrained_problem, "random": random_problem, "archive": archive_problem}
