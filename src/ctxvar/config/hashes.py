"""The hashes that name what made a run's numbers: the extraction hash that tags a model's partial sums (every
setting that changes them) and the corpus sample's identity."""

from __future__ import annotations

import hashlib
import json

from ctxvar.config.entries import measured_entry

ANALYSIS_ONLY_GEOMETRY = ("spectrum_k", "batches")  # geometry keys that leave the partial sums as they are
# (batches enters below only when above 1); every other key, a new sum's switch among them, enters the hash
EXTRACTION_GEOMETRY_ORDER = ("covariance", "cosine", "twonn", "sample_size", "seed", "ethayarajh")


def extraction_geometry(config: dict) -> dict:
    """The geometry settings that change what extraction accumulates (not spectrum_k, an analysis choice).
    ``batches`` only when above 1: one batch is the sample accumulated before the key existed, so such
    runs keep their extraction hash and partials.

    The keys come in a fixed order, whatever the config's: Snakemake compares a job's params as text, so the
    order of the keys in ``config.yaml`` must not re-run extraction. The keys of :data:`EXTRACTION_GEOMETRY_ORDER`
    come first, in that order (the params of runs made before any other key existed), then any other, sorted."""
    geometry = config["geometry"]
    keys = [key for key in EXTRACTION_GEOMETRY_ORDER if key in geometry]
    keys += sorted(key for key in geometry if key not in keys and key not in ANALYSIS_ONLY_GEOMETRY)
    chosen = {key: geometry[key] for key in keys}
    return chosen | ({"batches": geometry["batches"]} if geometry.get("batches", 1) > 1 else {})


# The rule of ctxvar.models.tokens.type_key, part of the extraction hash: a new rule re-extracts every model
# (and rebuilds the Gaussian null, whose means follow the types).
TYPE_KEY_RULE = "one leading copy of the tokenizer's own marker; tokens made only of the marker whole"


def stable_hash(obj) -> str:
    """Hex SHA-256 of ``obj`` as canonical JSON (sorted keys); 16 characters."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


CORPUS_HASH = "corpus_hash"  # the key that names one corpus sample in counts.json and in each model's run.json
# corpus keys that came after runs were made, left out of the params and the hashes at null, the value that samples
# as configs without them did: such runs keep their corpus and extraction hashes, and their sample
UNSET_AT_NULL = ("rows", "revision", "data_dir")


def corpus_settings(corpus: dict) -> dict:
    """``corpus`` without the keys of :data:`UNSET_AT_NULL` that are null: what the sampling job's params, the
    corpus hash and the extraction hash hold of it."""
    return {key: value for key, value in corpus.items() if not (key in UNSET_AT_NULL and value is None)}


def corpus_hash(corpus: dict) -> str:
    """The identity of one corpus sample: the hash of the ``corpus:`` settings (:func:`corpus_settings`) with what
    identified its files at start-up (``inputs``, :mod:`ctxvar.run.inputs`), as the sampling job and each model's
    final merge receive them."""
    return stable_hash(corpus_settings(corpus))


def extraction_config_hash(config: dict, model: dict, declared_sums: list) -> str:
    """Hash of every setting that changes a model's partial sums (not batch size or device), of the rule
    that keys token types (:data:`TYPE_KEY_RULE`) and of the sums the run keeps beyond the first three
    (``declared_sums``, :func:`ctxvar.stats.declarations.hashed_sums`): partials made under another setting, rule
    or set of sums re-extract and never merge with these. A run that keeps only the first three sums has the hash
    it had before the sums entered it."""
    settings = {
        "corpus": corpus_settings(config["corpus"]),
        "shards": config["shards"],
        "model": measured_entry(model),
        "dtype": config["dtype"],
        "tokens": config["tokens"],
        "type_key_rule": TYPE_KEY_RULE,
        "geometry": extraction_geometry(config),
    }
    return stable_hash(settings | ({"declared_sums": declared_sums} if declared_sums else {}))
