"""Checks the schema cannot express, model ids, and the hash that tags partial sums."""

from __future__ import annotations

import hashlib
import json
import os
import re

from .errors import ConfigError

MODEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@=-]*$")
LOCAL_SOURCES = ("text", "parquet", "jsonl")
RESERVED_IDS = {"corpus", "models", "partials", "summary", "figures"}  # folders of results/


CHECKPOINT_PATTERN = re.compile(r"^step(\d+)$")


def model_id(entry: dict) -> str:
    """The id used in result paths: ``id`` if given, else ``name`` with '/' → '--', plus '@revision'."""
    if entry.get("id"):
        return entry["id"]
    if not entry.get("name"):
        raise ConfigError("models[]: an entry without 'name' needs an explicit 'id' (e.g. id: tiny-bert)")
    derived = entry["name"].rstrip("/").replace("/", "--")
    if entry.get("revision") not in (None, "main"):
        derived += "@" + entry["revision"]
    return derived


def expand_revisions(entry: dict) -> list[dict]:
    """An entry with ``revisions`` → one entry per revision, id ``<id or name>@<revision>``, with ``family``
    (the id without revision) and ``step`` (N of 'stepN', else the revision's position in the list)."""
    if "revisions" not in entry:
        return [entry]
    if entry.get("revision"):
        raise ConfigError(f"models[]: entry {entry.get('id') or entry.get('name')!r} sets both revision and revisions; keep one")
    if entry.get("init") == "gaussian":
        raise ConfigError(f"models[]: entry {entry.get('id')!r}: revisions apply to pretrained and random models, not gaussian; "
                          "list one gaussian entry per seed instead")
    base = {key: value for key, value in entry.items() if key != "revisions"}
    family = model_id(base)
    expanded = []
    for position, revision in enumerate(entry["revisions"]):
        step = CHECKPOINT_PATTERN.match(revision)
        if entry.get("init") == "random" and not step:
            raise ConfigError(f"models[]: entry {family!r}: revision {revision!r} of a random model must be stepN "
                              "(the random-init model trained N steps on the corpus)")
        expanded.append({**base, "id": f"{family}@{revision}", "revision": revision, "family": family,
                         "step": int(step.group(1)) if step else position})
    return expanded


def models_by_id(config: dict) -> dict[str, dict]:
    """Model entries keyed by id, in config order, each with its ``id`` filled in; revisions expanded."""
    resolved: dict[str, dict] = {}
    for entry in (e for listed in config["models"] for e in expand_revisions(listed)):
        mid = model_id(entry)
        if not MODEL_ID_PATTERN.match(mid):
            raise ConfigError(
                f"models[]: id {mid!r} is not usable in file paths; "
                "use letters, digits and . _ + @ = - (set 'id:' explicitly)"
            )
        if mid in RESERVED_IDS:
            raise ConfigError(f"models[]: id {mid!r} is reserved for a results/ folder; choose another 'id'")
        if mid in resolved:
            raise ConfigError(f"models[]: duplicate model id {mid!r}; give each entry a distinct 'id'")
        resolved[mid] = {**entry, "id": mid}
    return resolved


def check_schema(config: dict, schema_path) -> None:
    """Raise :class:`ConfigError` naming the key and what is allowed, for the most relevant schema violation."""
    import jsonschema
    import yaml

    schema = yaml.safe_load(open(schema_path))
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is None:
        return
    where = ".".join(str(part) for part in error.absolute_path) or "config"
    message = error.message
    if error.validator == "additionalProperties":
        message += f"; allowed keys: {', '.join(error.schema['properties'])}"
    elif error.validator == "enum":
        message = f"{error.instance!r} is not allowed; use one of {', '.join(map(str, error.validator_value))}"
    raise ConfigError(f"{where}: {message}")


def check_config(config: dict) -> None:
    """Raise :class:`ConfigError` (one line) for what the JSON schema cannot check."""
    corpus = config["corpus"]
    if corpus["source"] == "hf" and not corpus.get("name"):
        raise ConfigError("corpus.name: required when corpus.source is 'hf' (a Hub dataset id, e.g. bookcorpus)")
    if corpus["source"] in LOCAL_SOURCES:
        paths = corpus_paths(corpus)
        if not paths:
            raise ConfigError(f"corpus.path: required when corpus.source is {corpus['source']!r}")
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:
            raise ConfigError(f"corpus.path: file not found: {missing[0]} (paths are relative to the working directory)")
    for entry in config["models"]:
        if entry.get("init") != "gaussian" and GAUSSIAN_ONLY & set(entry):
            raise ConfigError(f"models[]: entry {entry.get('id') or entry.get('name')!r} sets "
                              f"{', '.join(sorted(GAUSSIAN_ONLY & set(entry)))}, which only init: gaussian uses")
        if entry.get("init", "pretrained") == "pretrained" and not entry.get("name"):
            raise ConfigError(f"models[]: entry {entry.get('id')!r} needs 'name' (a Hub id or a local directory)")
        if entry.get("init") == "random" and not entry.get("arch"):
            raise ConfigError(f"models[]: entry {entry.get('id')!r} has init: random and needs 'arch' (bert | roberta | gpt2)")
    models = models_by_id(config)
    pca_model = config.get("figures", {}).get("pca", {}).get("model")
    if pca_model is not None and pca_model not in models:
        raise ConfigError(f"figures.pca.model: {pca_model!r} is not a model id (ids: {', '.join(models)}); use one of them or null")


GAUSSIAN_ONLY = {"mean_scale", "noise_scale", "offset", "layer_norm"}


def checkpoint_families(models: dict[str, dict]) -> dict[str, list[str]]:
    """``{family: [model ids by step]}`` for entries expanded from ``revisions``."""
    families: dict[str, list[str]] = {}
    for mid, entry in models.items():
        if "family" in entry:
            families.setdefault(entry["family"], []).append(mid)
    return {family: sorted(ids, key=lambda m: models[m]["step"]) for family, ids in families.items()}


def extraction_geometry(config: dict) -> dict:
    """The geometry settings that change what extraction accumulates (not spectrum_k, an analysis choice)."""
    return {key: config["geometry"][key] for key in ("covariance", "cosine", "twonn", "sample_size", "seed")}


def pca_model(config: dict) -> str:
    """The model whose embeddings Fig. 1 shows: figures.pca.model, or the first model."""
    return config["figures"]["pca"]["model"] or next(iter(models_by_id(config)))


def corpus_paths(corpus: dict) -> list[str]:
    path = corpus.get("path")
    if path is None:
        return []
    return [path] if isinstance(path, str) else list(path)


def stable_hash(obj) -> str:
    """Hex SHA-256 of ``obj`` as canonical JSON (sorted keys); 16 characters."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def extraction_config_hash(config: dict, model: dict) -> str:
    """Hash of every setting that changes a model's partial sums (not batch size or device)."""
    return stable_hash(
        {
            "corpus": config["corpus"],
            "shards": config["shards"],
            "chunk_sentences": config["chunk_sentences"],
            "model": model,
            "dtype": config["dtype"],
            "tokens": config["tokens"],
            "geometry": extraction_geometry(config),
        }
    )
