"""Every kind of model a config's ``init:`` names, declared once.

A :class:`ModelKind` says what the rest of ctxvar needs to know of a kind: which keys of a ``models[]`` entry it
takes and requires, whether the run makes the model (and by which rule) or loads it from its name, whether it
reads the corpus, has weight matrices, has several versions, and how many layers it has when the entry alone
says so. :data:`MODEL_KINDS` drives:

- the config's checks (:func:`ctxvar.config.checks.check_config`: keys, required keys, revisions, forward);
- where a model is read from and whether it needs the corpus (:mod:`ctxvar.config.entries`);
- the workflow's model rules (``workflow/rules/models.smk``: the models each rule makes), its embedding-matrix
  jobs (the models with weights) and the Gaussian null's type keying;
- resources and the cost plan (:mod:`ctxvar.run.resources`: a shape from the entry, which models get a weight
  digest; :mod:`ctxvar.run.cost`, :mod:`ctxvar.run.disk`, :mod:`ctxvar.run.inputs`: a packaged model's file).

How a kind that the run makes is built is its builder, registered under the same name in
:data:`ctxvar.models.build.BUILDERS`. The schema's ``init`` enum lists these names (a test compares them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Literal, get_args

from ctxvar.config.schema import SCHEMA
from ctxvar.errors import ConfigError

MODEL_DEFAULTS = SCHEMA["$defs"]["model_defaults"]["default"]
RANDOM_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "max_positions",
    "seed",
    "learning_rate",
)
GAUSSIAN_KEYS = ("mean_scale", "noise_scale", "offset", "layer_norm")
CHECKPOINT_PATTERN = re.compile(r"^step(\d+)$")  # a model trained N steps on the corpus in the run
Revisions = Literal["any", "steps", "none"]  # a Hub repository's revisions; stepN, trained in the run; one version
REVISIONS = get_args(Revisions)


def random_spec(entry: dict) -> dict:
    """The entry's sizes, seed and learning rate, with the schema's model defaults for those it omits."""
    return {key: entry.get(key, MODEL_DEFAULTS[key]) for key in RANDOM_KEYS}


def gaussian_spec(entry: dict) -> dict:
    """The Gaussian null model's scales and LayerNorm switch, with the schema's model defaults for those it omits."""
    return {key: entry.get(key, MODEL_DEFAULTS[key]) for key in GAUSSIAN_KEYS}


@dataclass(frozen=True)
class ModelKind:
    """One ``init:`` value. ``made_by``: the rule that makes the model in the run's ``models/{id}`` folder (None:
    loaded from its ``name``, a Hub id or a local directory); ``reads_corpus``: its build trains a tokenizer on
    the corpus; ``has_weights``: it has weight matrices (their statistics, a weight digest); ``blocks``: its
    transformer blocks from the entry alone (None: from its config.json); ``own_keys``: the entry keys only this
    kind takes; ``required``: key → what it names, for the keys an entry of this kind must set;
    ``revisions``: one of :data:`REVISIONS`; ``needs_forward``: nothing is measured of it without a forward pass;
    ``type_keyed``: built around the run's type keying (``tokens.merge_markers``), rebuilt when that changes;
    ``packaged``: read from a file of its own (fingerprinted whole; its shape from that file's header)."""

    init: str
    made_by: str | None = None
    reads_corpus: bool = False
    has_weights: bool = True
    blocks: Callable[[dict], int] | None = None
    own_keys: tuple[str, ...] = ()
    required: tuple[tuple[str, str], ...] = ()
    revisions: Revisions = "any"
    needs_forward: bool = False
    type_keyed: bool = False
    packaged: bool = False

    @property
    def built_from_entry(self) -> bool:
        """Whether the entry alone gives its shape (a model the run builds from its sizes)."""
        return self.blocks is not None


MODEL_KINDS: tuple[ModelKind, ...] = (
    ModelKind(
        "pretrained",
        required=(("name", "a Hub id or a local directory"),),
    ),
    ModelKind(
        "random",
        made_by="build_random_model",
        reads_corpus=True,
        blocks=lambda entry: random_spec(entry)["num_layers"],
        required=(("arch", "bert | roberta | gpt2"),),
        revisions="steps",
    ),
    ModelKind(
        "gaussian",
        made_by="build_random_model",
        reads_corpus=True,
        has_weights=False,
        blocks=lambda entry: int(gaussian_spec(entry)["layer_norm"]),
        own_keys=GAUSSIAN_KEYS,
        revisions="none",
        needs_forward=True,
        type_keyed=True,
    ),
    ModelKind(
        "archive",
        made_by="unpack_model",
        own_keys=("package", "archive", "gguf", "sha256"),
        revisions="none",
        packaged=True,
    ),
)


def kind_of(entry: dict) -> ModelKind:
    """The :class:`ModelKind` of a ``models[]`` entry (``init``, default pretrained)."""
    init = entry.get("init", "pretrained")
    for kind in MODEL_KINDS:
        if kind.init == init:
            return kind
    raise ConfigError(
        f"models[]: entry {entry.get('id') or entry.get('name')!r}: init {init!r} is not a model kind; "
        f"use one of {', '.join(kind.init for kind in MODEL_KINDS)}"
    )


def revision_problem(kind: ModelKind, name, revision) -> str | None:
    """One line where ``revision`` is not one a model of ``kind`` can be (a kind trained in the run: stepN);
    None where it is."""
    if kind.revisions == "steps" and not CHECKPOINT_PATTERN.fullmatch(str(revision)):
        return (
            f"models[]: entry {name!r}: revision {revision!r} of an init: {kind.init} model must be stepN "
            "(the model trained N steps on the corpus)"
        )
    return None


def entry_problem(entry: dict) -> str | None:
    """What the entry's kind refuses in it, as one line (None: nothing): a key another kind takes, a required key
    missing, a revision of a kind with one version, a kind with nothing to measure without a forward pass set
    ``forward: false``."""
    kind, name = kind_of(entry), entry.get("id") or entry.get("name")
    for other in MODEL_KINDS:
        foreign = sorted(set(other.own_keys) & set(entry)) if other is not kind else []
        if foreign:
            return f"models[]: entry {name!r} sets {', '.join(foreign)}, which only init: {other.init} uses"
    for key, what in kind.required:
        if not entry.get(key):
            return f"models[]: entry {entry.get('id')!r} has init: {kind.init} and needs {key!r} ({what})"
    asked = [key for key in ("revision", "revisions") if entry.get(key)]
    if kind.revisions == "none" and asked:
        return (
            f"models[]: entry {entry.get('id')!r}: init: {kind.init} holds one version of the model, so "
            f"{' and '.join(asked)} cannot choose one; remove {' and '.join(asked)}, or list one entry per version "
            "(each with its own id)"
        )
    revision = entry.get("revision")
    if revision not in (None, "", MODEL_DEFAULTS["revision"]):  # main, the schema's default, names no checkpoint
        problem = revision_problem(kind, entry.get("id"), revision)
        if problem:
            return problem
    if kind.needs_forward and not entry.get("forward", True):
        why = "it has no weights" if not kind.has_weights else "its weights alone are not measured"
        return (
            f"models[]: entry {entry.get('id')!r} has init: {kind.init} and forward: false; {why}, so nothing would "
            "be computed: remove forward: false"
        )
    return None
