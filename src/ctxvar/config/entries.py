"""The models[] entries as the code reads them: ids, revisions (one entry per checkpoint), the schema's model
defaults for what an entry omits, where each model loads from; and the corpus's paths."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ctxvar.config.kinds import CHECKPOINT_PATTERN, MODEL_DEFAULTS, kind_of, revision_problem
from ctxvar.errors import ConfigError

# Matched with fullmatch: '$' alone would accept a trailing newline.
MODEL_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@=-]*")
REVISION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]*")
LOCAL_SOURCES = ("text", "parquet", "jsonl")  # read from corpus.path, which they need
OPTIONAL_PATH_SOURCES = ("enwik8",)  # read from corpus.path when it is set, else from the Hub
RESERVED_IDS = {"corpus", "models", "partials", "summary", "figures"}  # folders of results/


def revision_of(entry: dict) -> str:
    """The entry's revision, or the schema's default (main)."""
    return entry.get("revision") or MODEL_DEFAULTS["revision"]


def load_revision(entry: dict) -> str:
    """The revision to load: the commit the entry's revision named at start-up (``inputs.commit``, see
    :mod:`ctxvar.run.inputs`), else the revision itself."""
    return (entry.get("inputs") or {}).get("commit") or revision_of(entry)


def arch_of(entry: dict) -> str:
    """The entry's architecture, or the schema's default (an init gaussian entry's tokenizer kind)."""
    return entry.get("arch") or MODEL_DEFAULTS["arch"]


def model_id(entry: dict) -> str:
    """The id used in result paths: ``id`` if given; else, for a local directory, its name; else the Hub
    ``name`` with '/' → '--'; plus '@revision'."""
    if entry.get("id"):
        return entry["id"]
    if not entry.get("name"):
        raise ConfigError("models[]: an entry without 'name' needs an explicit 'id' (e.g. id: tiny-bert)")
    name = entry["name"]
    derived = Path(name).name if is_local_path(name) else name.rstrip("/").replace("/", "--")
    if revision_of(entry) != MODEL_DEFAULTS["revision"]:
        derived += "@" + entry["revision"]
    return derived


def is_local_path(name: str) -> bool:
    """Whether a model ``name`` is a directory (existing, or written as a path) rather than a Hub id: a path also
    when its ``org/`` part is a folder of the working directory (``checkpoints/my-bert``, misspelt or not)."""
    return (
        os.path.isdir(name)
        or name.startswith(("/", "./", "../", "~"))
        or name.count("/") > 1
        or (name.count("/") == 1 and os.path.isdir(name.split("/")[0]))
    )


def missing_model_directory(entry: dict) -> str | None:
    """Why the entry's ``name``, written as a path (see :func:`is_local_path`), names no model directory; None
    when it does, or when ``name`` is a Hub id."""
    name = entry.get("name")
    if not name or not is_local_path(name) or os.path.isdir(os.path.expanduser(name)):
        return None
    what = "is not a directory" if os.path.exists(os.path.expanduser(name)) else "does not exist"
    return (
        f"models[]: entry {entry.get('id') or Path(name).name!r}: {name} {what} (a name written as a path is a local "
        "model directory, relative to the working directory); correct the path, or give a Hub id such as "
        "bert-base-uncased"
    )


def local_with_revision(entry: dict) -> str | None:
    """Why a local model directory's entry cannot have ``revision``/``revisions`` (a directory holds one version
    of its files, which would be read whatever the revision says); None when it has neither, or is a Hub id."""
    name, asked = entry.get("name"), [key for key in ("revision", "revisions") if entry.get(key)]
    if not name or not asked or not os.path.isdir(os.path.expanduser(name)):
        return None
    return (
        f"models[]: entry {entry.get('id') or Path(name).name!r}: {name} is a local directory, which holds one "
        f"version of the model, so {' and '.join(asked)} cannot choose one; remove {' and '.join(asked)}, or list "
        "one directory per checkpoint (each with its own id)"
    )


def expand_revisions(entry: dict) -> list[dict]:
    """An entry with ``revisions`` → one entry per revision, id ``<id or name>@<revision>``, with ``family``
    (the id without revision) and ``step`` (N of 'stepN', else the revision's position in the list)."""
    if "revisions" not in entry:
        return [entry]
    if entry.get("revision"):
        raise ConfigError(
            f"models[]: entry {entry.get('id') or entry.get('name')!r} sets both revision and revisions; keep one"
        )
    kind = kind_of(entry)
    if kind.revisions == "none":
        raise ConfigError(
            f"models[]: entry {entry.get('id')!r}: init: {kind.init} holds one version of the model, so revisions "
            "cannot choose one; remove revisions, or list one entry per version (each with its own id)"
        )
    base = {key: value for key, value in entry.items() if key != "revisions"}
    family = model_id(base)
    expanded = []
    for position, revision in enumerate(entry["revisions"]):
        if not REVISION_PATTERN.fullmatch(revision):
            raise ConfigError(
                f"models[]: entry {family!r}: revision {revision!r} is not usable in file paths; "
                "use letters, digits and . _ + = -"
            )
        problem = revision_problem(kind, family, revision)
        if problem:
            raise ConfigError(problem)
        step = CHECKPOINT_PATTERN.fullmatch(revision)
        expanded.append(
            {
                **base,
                "id": f"{family}@{revision}",
                "revision": revision,
                "family": family,
                "step": int(step.group(1)) if step else position,
            }
        )
    return expanded


def models_by_id(config: dict) -> dict[str, dict]:
    """Model entries keyed by id, in config order, each with its ``id`` filled in; revisions expanded."""
    resolved: dict[str, dict] = {}
    for entry in (e for listed in config["models"] for e in expand_revisions(listed)):
        mid = model_id(entry)
        if not MODEL_ID_PATTERN.fullmatch(mid):
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


def built_in_run(entry: dict) -> bool:
    """Whether a rule makes the model in the run's ``models/{id}`` folder (its kind's ``made_by``: random-init and
    Gaussian models are built there, archives unpacked there); pretrained models load from the Hub or their own
    directory."""
    return kind_of(entry).made_by is not None


def model_source(entry: dict, run_folder) -> str:
    """Where extraction loads the model from: ``run_folder/models/{id}`` for models made in the run, else its
    Hub id or local directory."""
    return os.path.join(run_folder, "models", entry["id"]) if built_in_run(entry) else os.path.expanduser(entry["name"])


def runs_forward(entry: dict) -> bool:
    """Whether the model runs over the corpus (``forward``, default true); false: its embedding matrices alone."""
    return entry.get("forward", True)


def measured_entry(entry: dict) -> dict:
    """``entry`` as what its jobs compute depends on it: without ``forward``, which decides which outputs the run
    makes of the model, never what they hold. Its jobs' params and its sums' hash hold this, so that the schema's
    default (written into every entry) kept the hashes of runs made before the key, and so that setting or
    removing ``forward: false`` re-runs none of the model's jobs."""
    return {key: value for key, value in entry.items() if key != "forward"}


def reads_corpus(entry: dict) -> bool:
    """Whether the model needs the corpus: for its forward pass, or to train its tokenizer (its kind's
    ``reads_corpus``: init random and gaussian build one on the corpus)."""
    return runs_forward(entry) or kind_of(entry).reads_corpus


def forward_models(models: dict[str, dict]) -> list[str]:
    """The ids of the models that run over the corpus, in config order."""
    return [mid for mid, entry in models.items() if runs_forward(entry)]


def checkpoint_families(models: dict[str, dict]) -> dict[str, list[str]]:
    """``{family: [model ids by step]}`` for entries expanded from ``revisions``."""
    families: dict[str, list[str]] = {}
    for mid, entry in models.items():
        if "family" in entry:
            families.setdefault(entry["family"], []).append(mid)
    return {family: sorted(ids, key=lambda m: models[m]["step"]) for family, ids in families.items()}


def pca_model(config: dict) -> str | None:
    """The model whose embeddings Fig. 1 shows: figures.pca.model, or the first model that runs over the corpus;
    None when none does."""
    return config["figures"]["pca"]["model"] or next(iter(forward_models(models_by_id(config))), None)


def local_corpus(corpus: dict) -> bool:
    """Whether the corpus is read from the local files ``corpus.path`` names."""
    return corpus["source"] in LOCAL_SOURCES or (corpus["source"] in OPTIONAL_PATH_SOURCES and bool(corpus.get("path")))


def corpus_paths(corpus: dict) -> list[str]:
    """``corpus.path`` as a list, ``~`` expanded."""
    path = corpus.get("path")
    if path is None:
        return []
    return [os.path.expanduser(p) for p in ([path] if isinstance(path, str) else path)]
