"""Why a model directory does not load: one line naming the damaged or missing file, or what in config.json
stops transformers, with the remedy (:func:`load_error`, which :mod:`ctxvar.models.loading` raises)."""

from __future__ import annotations

import glob
import json
import os

from ctxvar.errors import ModelLoadError, first_line
from ctxvar.models import completeness

# Files of a saved model that are JSON objects, and may be damaged by a copy or a full disk.
JSON_FILES = (
    "config.json",
    "model.safetensors.index.json",  # a sharded checkpoint's map of tensors to files
    "tokenizer_config.json",
    "tokenizer.json",
    "special_tokens_map.json",
    "generation_config.json",
    "vocab.json",
    "added_tokens.json",
)


# The files a tokenizer of transformers reads its vocabulary from: the fast tokenizers' file, WordPiece's, BPE's,
# SentencePiece's (spiece.model, tokenizer.model, sentencepiece.bpe.model).
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model", "tekken.json")


def load_error(what: str, directory: str, cls, error: Exception) -> ModelLoadError:
    """One line for a model directory that ``cls.from_pretrained`` failed on, naming the damaged file if one is."""
    damaged = damaged_file(directory)
    if damaged:
        return ModelLoadError(f"{what}: {damaged[0]} is damaged ({damaged[1]}); restore it ({completeness.REFETCH})")
    kind = "model" if hasattr(cls, "_model_mapping") else cls.__name__[4:].lower()  # AutoModelFor…LM too
    if not os.path.isfile(os.path.join(directory, "config.json")):
        return ModelLoadError(f"{what}: no config.json in {directory}; save the model there with save_pretrained")
    if kind == "tokenizer" and not any(glob.glob(os.path.join(glob.escape(directory), p)) for p in VOCABULARY_FILES):
        return ModelLoadError(
            f"{what}: no tokenizer vocabulary in {directory} (none of {', '.join(VOCABULARY_FILES)}); save the "
            "model's tokenizer with it (tokenizer.save_pretrained into the same directory)"
        )
    if kind == "model" and not glob.glob(os.path.join(glob.escape(directory), "*.safetensors")):
        import torch

        pickled = [
            name
            for name in (completeness.PICKLED_FILE, completeness.PICKLED_INDEX)
            if os.path.isfile(os.path.join(directory, name))
        ]
        return ModelLoadError(
            f"{what}: no safetensors weights in {directory} "
            + (
                f"(it has {', '.join(pickled)}, pickled weights, which torch {torch.__version__}'s weights-only "
                "unpickler cannot read safely (CVE-2025-32434), so they are not loaded: upgrade torch to 2.6 or "
                "later, or convert them: from_pretrained then save_pretrained writes model.safetensors)"
                if pickled
                else "(model.safetensors, or model-*-of-*.safetensors with model.safetensors.index.json); "
                "save the model there with save_pretrained"
            )
        )
    reason = first_line(error).split(" For details look at the", 1)[0]  # that report is in the job log
    return ModelLoadError(
        f"{what}: the directory has no loadable {kind} ({type(error).__name__}: {reason}); "
        + unloadable_remedy(directory)
    )


def unloadable_remedy(directory: str) -> str:
    """The remedy for a model whose config.json parses but that transformers still cannot build, by what
    config.json says: custom code (``auto_map``), no or an unknown ``model_type``, else its values."""
    from transformers import CONFIG_MAPPING, __version__

    try:
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict):
        return f"restore its config.json ({completeness.REFETCH})"
    model_type = config.get("model_type")
    if "auto_map" in config:
        return "its config.json names custom code, which runs only with trust_remote_code: true (if you trust it)"
    if not model_type:
        return "its config.json names no model_type: save the model there with save_pretrained"
    if model_type not in CONFIG_MAPPING:
        return (
            f"transformers {__version__} does not know model_type {model_type!r}: upgrade transformers, or set "
            "trust_remote_code: true if the model ships its own code"
        )
    return "a value in its config.json is wrong (the error above names it): restore config.json"


def damaged_file(directory: str) -> tuple[str, str] | None:
    """``(path, reason)`` of the first file in a model directory that cannot be parsed: a link to a missing file
    (a Hub cache whose blob is gone), a JSON file (or one that is not an object), a tokenizer.json that the
    tokenizers library cannot build from, or a safetensors file whose header is unreadable or does not cover the
    file (truncated); None if all parse."""
    from safetensors import safe_open
    from tokenizers import Tokenizer

    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else ():
        path = os.path.join(directory, name)
        if os.path.islink(path) and not os.path.exists(path):
            return path, f"a link to {os.readlink(path)}, which does not exist"
    for name in JSON_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    value = json.load(handle)
            except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError
                return path, f"not valid JSON: {first_line(error)}"
            if not isinstance(value, dict):
                return path, f"a JSON {type(value).__name__}, not an object"
    tokenizer_json = os.path.join(directory, "tokenizer.json")
    if os.path.isfile(tokenizer_json):
        try:
            Tokenizer.from_file(tokenizer_json)
        except Exception as error:  # tokenizers raises a bare Exception for a file it cannot build from
            return tokenizer_json, f"not a tokenizers file: {first_line(error)}"
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "*.safetensors"))):
        try:
            with safe_open(path, "pt") as weights:
                weights.keys()
        except Exception as error:  # SafetensorError and OSError
            return path, f"unreadable safetensors: {first_line(error)}"
    return None
