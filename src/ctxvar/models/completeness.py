"""Whether the model transformers built is the whole model the user named, and the tokenizer one that fits it.

``from_pretrained`` fills every tensor the files lack with a fresh random (or
constant) initialisation and only warns; it drops tensors the config has no place
for, and its tokenizer classes build a near-empty vocabulary when no tokenizer file
is there. Any of these gives hidden states of a model nobody named, so each is
refused here with one line, and the full report goes to the job log.

Tensors that do not feed the hidden states are not the model measured: an encoder's
pooler (``pooler.*``, not built where the class allows ``add_pooling_layer=False``)
and the heads of a checkpoint saved with one (``cls.*``, ``lm_head.*``, …). They may be
missing or unexpected, and are neither checked nor hashed.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re

from ctxvar.errors import ModelLoadError

log = logging.getLogger(__name__)

# Top-level modules of a base model whose output is not among the hidden states (BERT's and RoBERTa's pooler).
NOT_HIDDEN_STATE_MODULES = ("pooler",)
SINGLE_FILE = "model.safetensors"
SHARD_INDEX = "model.safetensors.index.json"
SHARD_FILES = "model-*-of-*.safetensors"  # the names save_pretrained gives a sharded checkpoint's files
PICKLED_FILE = "pytorch_model.bin"  # a checkpoint saved before safetensors: pickled by torch.save
PICKLED_INDEX = "pytorch_model.bin.index.json"  # a sharded one's map of tensors to pytorch_model-*-of-*.bin
REFETCH = "download the model again, or save_pretrained it again"  # how a damaged or incomplete model is restored
CONVERT = "convert it to safetensors where you trust it: from_pretrained then save_pretrained writes model.safetensors"
INCONSISTENT = "the model directory is incomplete or its config.json does not match its weights: restore the files"
# A tokenizer with fewer entries than this share of the model's embedding rows belongs to another model.
# Real checkpoints pad their rows by well under 5 % (GPT-J: 50,257 of 50,400; Phi-2: 50,295 of 51,200).
MIN_VOCABULARY_SHARE = 0.5
LISTED = 5  # tensor names shown in a one-line error; the rest are counted


def feeds_hidden_states(name: str) -> bool:
    """Whether the tensor ``name`` (a parameter or buffer of the loaded base model) can change its hidden states."""
    return name.split(".", 1)[0] not in NOT_HIDDEN_STATE_MODULES


def structure(name: str) -> str:
    """``name`` with its numbers (layer indices) replaced by ``*``: ``encoder.layer.*.output.dense.weight``."""
    return re.sub(r"(?<=\.)\d+(?=\.)|^\d+(?=\.)", "*", name)


def own_tensor_names(model, names) -> list[str]:
    """The checkpoint tensors in ``names`` that the model has a place of the same kind for (a layer the config
    leaves out, say): their names, the base model's prefix removed, match a tensor of the model's but for numbers."""
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    shapes = {structure(n) for n, _ in [*model.named_parameters(), *model.named_buffers()]}
    return sorted(n for n in names if structure(n.removeprefix(prefix)) in shapes)


def listed(names) -> str:
    """The first few of ``names`` and a count of the rest."""
    names = sorted(names)
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(names[:LISTED]) + more


def log_loading_report(what: str, info: dict) -> None:
    """Every key of transformers' loading report (missing, unexpected, mismatched) into the job log."""
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        entries = sorted(map(str, info.get(kind) or ()))
        log.info("%s loading report: %d %s%s", what, len(entries), kind.replace("_", " "), ":" if entries else "")
        for entry in entries:
            log.info("    %s", entry)


def refuse_mismatched(info: dict, what: str, remedy: str = INCONSISTENT) -> None:
    """Refuse a model whose loading report has tensors of other shapes in the files than config.json builds
    (transformers, told to ``ignore_mismatched_sizes``, initialises them at random), naming both shapes."""
    mismatched = [
        f"{name} {tuple(found)} in the files, {tuple(built)} in config.json"
        for name, found, built in info.get("mismatched_keys") or ()
    ]
    if mismatched:
        raise ModelLoadError(
            f"{what}: {len(mismatched)} tensor(s) have other shapes than config.json says and would be "
            f"initialised at random: {listed(mismatched)}; {remedy}"
        )


def check_matrices_loaded(model, info: dict, what: str, alone: str | None = None) -> None:
    """Refuse a model loaded with its head whose input or output embedding matrix (``get_input_embeddings``,
    ``get_output_embeddings``) is not the files' own: missing from them (initialised at random), of another row
    count than config.json builds (:func:`refuse_other_rows`; ``alone``: why the matrices were not read alone), or
    any tensor of another shape than config.json says. A tied output matrix is the input matrix, loaded once."""
    log_loading_report(what, info)
    refuse_other_rows(model, info, what, alone)
    refuse_mismatched(info, what)
    missing = set(info.get("missing_keys") or ())
    head = model.get_output_embeddings()
    for kind, module in (("input", model.get_input_embeddings()), ("output", head)):
        weight = getattr(module, "weight", None)
        names = sorted(n for n, p in model.named_parameters(remove_duplicate=False) if p is weight and n in missing)
        if weight is not None and names:
            raise ModelLoadError(
                f"{what}: its {kind} embedding matrix {names[0]} {tuple(weight.shape)} is not in its weight files "
                f"and would be initialised at random; {INCONSISTENT}"
            )


def refuse_other_rows(model, info: dict, what: str, alone: str | None) -> None:
    """Refuse, naming both shapes, an input or output embedding matrix that the files hold with another row count
    than config.json builds (a head padded past the vocabulary, as many are to a multiple of 64 or 128). Such a
    matrix is sound, and read alone it is measured as the files hold it (:mod:`ctxvar.models.embedding_weights`);
    the whole model loaded cannot hold it (transformers initialises it at random), so this route, taken where it
    cannot be read alone (``alone`` says why), refuses it rather than blame the files."""
    kinds = {}
    for kind, module in (("input", model.get_input_embeddings()), ("output", model.get_output_embeddings())):
        weight = getattr(module, "weight", None)
        if weight is not None:
            kinds.update((n, kind) for n, p in model.named_parameters(remove_duplicate=False) if p is weight)
    for name, found, built in info.get("mismatched_keys") or ():
        found, built = tuple(found), tuple(built)
        if name in kinds and len(found) == len(built) == 2 and found[1] == built[1]:
            raise ModelLoadError(
                f"{what}: its {kinds[name]} embedding matrix {name} is {found} in the files, {built} as config.json "
                f"builds it (another row count than its vocabulary), which the whole model loaded cannot hold (it "
                f"would be initialised at random), and the matrices cannot be read alone, as the files hold them "
                f"({alone or 'the job log says why'}); it is not measured"
            )


def check_loaded_whole(model, info: dict, what: str, remedy: str = INCONSISTENT) -> None:
    """Refuse a model that transformers built with tensors the files lack, lacks tensors the files hold for its
    own layers, or holds with other shapes; heads and poolers of the checkpoint are ignored (module docstring).
    ``remedy`` ends each line (a model directory's files to restore, by default)."""
    log_loading_report(what, info)
    refuse_mismatched(info, what, remedy)
    missing = [name for name in info.get("missing_keys") or () if feeds_hidden_states(name)]
    if missing:
        raise ModelLoadError(
            f"{what}: {len(missing)} tensor(s) of the model are not in its weight files and would be "
            f"initialised at random: {listed(missing)}; {remedy}"
        )
    extra = own_tensor_names(model, info.get("unexpected_keys") or ())
    if extra:
        raise ModelLoadError(
            f"{what}: the weight files hold {len(extra)} tensor(s) of layers config.json does not build: "
            f"{listed(extra)}; {remedy}"
        )
    ignored = sorted(info.get("unexpected_keys") or ())
    if ignored:
        log.info(
            "%s: ignored %d tensor(s) that do not feed the hidden states (heads): %s",
            what,
            len(ignored),
            listed(ignored),
        )


def check_checkpoint_files(directory: str, what: str, copies: bool = True) -> None:
    """Refuse a directory whose weights are ambiguous or incomplete before transformers picks one: both a single
    ``model.safetensors`` and a sharded set (transformers would load the single file without a word), shard files
    without their index, an index without a ``weight_map`` object or naming shard files which are not there, or
    (with ``copies``, for a reader of every shard) a tensor in several shard files (transformers would take the
    last file's copy without a word). A reader of some tensors alone reads each from the one file the index maps
    it to, and opens no other shard (``copies`` false)."""
    single, index = (os.path.join(directory, name) for name in (SINGLE_FILE, SHARD_INDEX))
    if os.path.isfile(single) and os.path.isfile(index):
        raise ModelLoadError(
            f"{what}: the directory holds two checkpoints, {single} and the sharded one of {index}; "
            "keep one of them (delete the other)"
        )
    restore = f"restore the files ({REFETCH})"
    if not os.path.isfile(index):
        orphans = sorted(glob.glob(os.path.join(glob.escape(directory), SHARD_FILES)))
        if orphans and not os.path.isfile(single):
            raise ModelLoadError(
                f"{what}: the directory holds the shard files of a sharded checkpoint "
                f"({listed(map(os.path.basename, orphans))}) but not their index {index}; {restore}"
            )
        return
    try:
        with open(index, encoding="utf-8") as handle:
            content = json.load(handle)
    except (OSError, ValueError):
        return  # not JSON: named by load_errors.damaged_file once from_pretrained fails
    weight_map = content.get("weight_map") if isinstance(content, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
        raise ModelLoadError(
            f"{what}: {index} is damaged (its weight_map is not an object of tensor names and files); restore it "
            f"({REFETCH})"
        )
    shards = sorted(set(weight_map.values()))
    elsewhere = [s for s in shards if os.path.basename(s) != s or s in (".", "..")]
    if elsewhere:
        raise ModelLoadError(
            f"{what}: {index} names weight files outside the directory ({listed(elsewhere)}), whose changes would "
            f"not re-run the model's jobs; {restore}"
        )
    absent = [s for s in shards if not os.path.isfile(os.path.join(directory, s))]
    if absent:
        raise ModelLoadError(
            f"{what}: {len(absent)} weight file(s) that {index} lists are missing: {listed(absent)}; {restore}"
        )
    held_twice = tensors_in_several_files(directory, shards) if copies else []
    if held_twice:
        raise ModelLoadError(
            f"{what}: {len(held_twice)} tensor(s) are in more than one weight file of {index}, with other "
            f"values, and transformers would load one of the copies without a word: {listed(held_twice)}; "
            f"a file of another save is among them: {restore}"
        )


def tensors_in_several_files(directory: str, files) -> list[str]:
    """``name (file, file, …)`` of each tensor that more than one of the safetensors ``files`` holds with other
    values (headers are read, and the tensors found twice); files that cannot be read are left to the loading,
    which names them."""
    from safetensors import safe_open

    holders: dict[str, list[str]] = {}
    for file in files:
        try:
            with safe_open(os.path.join(directory, file), "pt") as weights:
                names = list(weights.keys())
        except Exception:  # SafetensorError and OSError: load_errors.damaged_file names the file
            continue
        for name in names:
            holders.setdefault(name, []).append(file)
    return sorted(
        f"{name} ({', '.join(found)})"
        for name, found in holders.items()
        if len(found) > 1 and not copies_equal(directory, name, found)
    )


def copies_equal(directory: str, name: str, files: list[str]) -> bool:
    """Whether the tensor ``name`` has the same dtype, shape and values in each of ``files``."""
    import torch
    from safetensors import safe_open

    copies = []
    for file in files:
        with safe_open(os.path.join(directory, file), "pt") as weights:
            copies.append(weights.get_tensor(name))
    return all(c.dtype == copies[0].dtype and torch.equal(c, copies[0]) for c in copies[1:])


def embedding_rows(model) -> int | None:
    """Rows of the model's input embedding (ids it can look up); None if the model does not say."""
    try:
        return model.get_input_embeddings().num_embeddings
    except (AttributeError, NotImplementedError):
        return getattr(model.config, "vocab_size", None)


def tokenizer_file_names(tokenizer) -> list[str]:
    """The files ``tokenizer``'s class reads its vocabulary from (``tokenizer.json`` always serves); empty for a
    tokenizer that needs none (byte-level ByT5)."""
    names = set(getattr(type(tokenizer), "vocab_files_names", {}).values())
    return sorted(names | {"tokenizer.json"}) if names else []


def check_tokenizer_files(tokenizer, found: list[str], what: str) -> None:
    """Refuse a tokenizer built without any of its files (transformers then makes one of its special tokens
    alone, and every word becomes the unknown token). ``found``: the files of
    :func:`tokenizer_file_names` present for the model."""
    expected = tokenizer_file_names(tokenizer)
    if expected and not found:
        raise ModelLoadError(
            f"{what}: no tokenizer files ({type(tokenizer).__name__} reads {' or '.join(expected)}); save the "
            "model's tokenizer with it (tokenizer.save_pretrained into the same directory)"
        )


def check_tokenizer_fits(tokenizer, model, what: str) -> None:
    """Refuse a tokenizer whose ids the model cannot look up, or one of far fewer entries than the model's
    embedding rows (another model's tokenizer; see ``MIN_VOCABULARY_SHARE``)."""
    rows = embedding_rows(model)
    vocabulary = tokenizer.get_vocab()
    if not rows or not vocabulary:
        return
    largest = max(vocabulary.values())
    remedy = "the tokenizer belongs to another model: use the tokenizer saved with these weights"
    if largest >= rows:
        raise ModelLoadError(
            f"{what}: the tokenizer has ids up to {largest}, but the model's embedding has {rows} rows; {remedy}"
        )
    if len(vocabulary) < MIN_VOCABULARY_SHARE * rows:
        raise ModelLoadError(
            f"{what}: the tokenizer has {len(vocabulary)} entries for the model's {rows} embedding rows; {remedy}"
        )
