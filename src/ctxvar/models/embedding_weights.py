"""A model's input and output embedding matrices read from its weight files alone, without the rest of it.

The matrices' names are the model's own: the class :func:`ctxvar.models.loading.load_with_head` would load is
built from config.json on the ``meta`` device (no weight read, no memory), its weights tied as transformers ties
them on loading (``tie_weights``: ``tie_word_embeddings`` and the class's ``_tied_weights_keys``), and
``get_input_embeddings``/``get_output_embeddings`` name the two matrices (one, when the output matrix is the input
matrix; none for the output of a class without a head). Each is read under the key transformers' loader maps to
its name (the class's renamings, such as GPT-NeoX's ``embed_out`` → ``lm_head``, and the base model's prefix added
or taken off) from the checkpoint transformers would load, in its order: ``model.safetensors``, else the one shard
file ``model.safetensors.index.json``'s ``weight_map`` names for it (``safetensors.safe_open``); where there are no
safetensors (a checkpoint saved before them, such as Pythia's older steps), ``pytorch_model.bin``, else the one
shard file of ``pytorch_model.bin.index.json``, unpickled as transformers unpickles it
(``torch.load(weights_only=True, mmap=True)``: torch's unpickler of tensors and plain values, memory-mapped, so that
of the file only the pickle's index and the matrices' bytes are read). Only those files are opened, and, for a Hub
id, only the index and those files are downloaded, at the commit config.json was read from (``hf_hub_download``
with ``revision=``; the HF cache and ``HF_HUB_OFFLINE`` apply). Each tensor is converted to the dtype the whole
model would hold it in, so the matrices are those of the loaded model, value for value.

A matrix whose row count in the files is not the one config.json builds (a head padded past the vocabulary, as
many are to a multiple of 64 or 128) is read as the files hold it, every row, with a warning in the log and the
shape config.json builds in the record (``built_shape``): the whole model loaded could not hold it (transformers
initialises it at random), so this is the one route that measures it.

Whatever else cannot be resolved so (custom model code; a quantized checkpoint or a matrix whose values
transformers converts on loading; a matrix missing from the files, under two names, or of another number of columns
than config.json builds) raises :class:`Unresolved`, with the reason in the log: the caller then loads the whole
model (a pickled checkpoint too, read by the same weights-only unpickler through transformers), whose loading report
names any fault.

What was read is recorded (:class:`EmbeddingWeights`): each file (relative to the model's folder or snapshot) and
each tensor with its dtype, shape and the SHA-256 of its bytes as stored (a pickled tensor's values, which are the
bytes the same tensor has in a safetensors file), and their :class:`~ctxvar.models.hashing.WeightsDigest`: the same
tensors saved as safetensors or pickled record the same. A file replaced or written to while it is read is refused;
in a folder with a ``SHA256SUMS`` (a model the run built or unpacked), the files read are checked against it
first.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field

import torch

from ctxvar.config.entries import built_in_run, load_revision
from ctxvar.errors import ModelLoadError, first_line
from ctxvar.files.atomic import verify_manifest
from ctxvar.models import completeness, hashing, hub, loading
from ctxvar.models.completeness import PICKLED_FILE, PICKLED_INDEX, REFETCH, SHARD_INDEX, SINGLE_FILE

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"


class Unresolved(Exception):
    """Why the matrices cannot be read alone: the whole model is loaded instead."""


@dataclass
class EmbeddingWeights:
    """The matrices (``{"input", "output"}``, ``{"tied"}`` or ``{"input"}``, as
    :func:`ctxvar.stats.embedding_matrices.embedding_matrices` names them), on the CPU in the dtype the loaded model
    holds them in, and ``record``: what was read (module docstring)."""

    matrices: dict[str, torch.Tensor]
    record: dict = field(default_factory=dict)


def read_embedding_weights(entry: dict, source: str, dtype: str) -> EmbeddingWeights:
    """The embedding matrices of the model of ``entry`` at ``source`` (a folder or a Hub id) in the job's ``dtype``,
    read alone; :class:`Unresolved`, its reason also in the log, where they cannot be (module docstring)."""
    what = loading.described(entry, source)
    try:
        return read_matrices(entry, source, dtype, what)
    except Unresolved as reason:
        log.info("%s: the embedding matrices cannot be read alone (%s); the whole model is loaded", what, reason)
        raise


def read_matrices(entry: dict, source: str, dtype: str, what: str) -> EmbeddingWeights:
    """:func:`read_embedding_weights` without the log line."""
    if entry.get("trust_remote_code"):
        raise Unresolved("the model's class is its own code (trust_remote_code)")
    if os.path.isdir(source):
        completeness.check_checkpoint_files(source, what, copies=False)
    config = loading.load_config(entry, source)
    skeleton = empty_with_head(config, dtype, what)
    wanted = wanted_matrices(skeleton)  # kind → (module name, the parameter the loaded model would hold)
    files = CheckpointFiles(entry, source, config, what)
    try:
        keys = {kind: files.key_of(module_name, skeleton) for kind, (module_name, _) in wanted.items()}
        if files.local:
            verify_manifest(source, built_in_run(entry), files.names_read(keys.values()))
        digest = hashing.WeightsDigest(what)
        matrices = {kind: files.read(keys[kind], like, digest) for kind, (_, like) in wanted.items()}
    finally:
        files.unpickled.clear()  # the memory-mapped files: the matrices are copies
    if "output" in matrices and torch.equal(matrices["output"], matrices["input"]):
        matrices = {"tied": matrices["input"]}  # equal values: one matrix, as the whole model's are measured
    log.info("%s: read %s from %s alone", what, ", ".join(sorted(keys.values())), ", ".join(sorted(files.read_files)))
    return EmbeddingWeights(matrices, files.record(digest, config))


def empty_with_head(config, dtype: str, what: str):
    """The model :func:`ctxvar.models.loading.load_with_head` loads, built from ``config`` on the ``meta`` device
    in ``dtype`` (float32 where the class keeps it so), its weights tied as loading ties them."""
    from accelerate import init_empty_weights

    quantization = getattr(config, "quantization_config", None)
    if quantization:
        raise Unresolved("its checkpoint is quantized: transformers dequantizes it on loading")
    if getattr(config, "transformers_weights", None):
        raise Unresolved(f"config.json names its own weight file ({config.transformers_weights})")
    model_class = loading.head_class(config, what)
    loading.register_null_model()
    try:
        with init_empty_weights(include_buffers=False), loading.transformers_into_log():
            model = model_class.from_config(config, dtype=loading.DTYPES[dtype])
    except Exception as error:  # transformers raises many types; the whole load names the cause
        raise Unresolved(f"{model_class.__name__} cannot be built from config.json ({first_line(error)})") from error
    loading.keep_in_float32(model, loading.DTYPES[dtype])
    model.tie_weights()
    return model


def loaded_names(model, stored) -> dict[str, list[tuple[str, str | None]]]:
    """``{name in model: [(checkpoint key, converter pattern or None), …]}`` for the checkpoint keys ``stored``,
    as transformers' loader maps them (``convert_and_load_state_dict_in_model``): the class's renamings (GPT-NeoX's
    ``embed_out`` → ``lm_head``, the legacy ``gamma``/``beta``), then at most one converter (a key whose values
    it converts), the base model's prefix added or taken off."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key
    except ImportError as error:
        raise Unresolved(f"this transformers has no key mapping to follow ({error})") from error
    mapping = get_model_conversion_mapping(model)
    renamings = [entry for entry in mapping if isinstance(entry, WeightRenaming)]
    converters = [entry for entry in mapping if isinstance(entry, WeightConverter)]
    meta, prefix = model.state_dict(), model.base_model_prefix
    names: dict[str, list[tuple[str, str | None]]] = {}
    for key in sorted(stored):
        renamed, pattern = rename_source_key(key, renamings, converters, prefix, meta)
        if renamed not in meta and key in meta:  # as the loader: the key itself, with the prefix if need be
            renamed, pattern = rename_source_key(key, [], [], base_model_prefix=prefix, meta_state_dict=meta)
        names.setdefault(renamed, []).append((key, pattern))
    return names


def wanted_matrices(model) -> dict[str, tuple[str, torch.Tensor]]:
    """``{kind: (module name, weight)}`` of the matrices to read: ``input`` and ``output``; ``tied`` alone (the
    input matrix) when the output matrix is the input matrix; ``input`` alone when the model has no output
    matrix."""
    modules = {module: name for name, module in model.named_modules(remove_duplicate=False)}
    inp, head = model.get_input_embeddings(), model.get_output_embeddings()
    out = getattr(head, "weight", None)
    if out is None:
        return {"input": (modules[inp], inp.weight)}
    if out is inp.weight:
        return {"tied": (modules[inp], inp.weight)}
    return {"input": (modules[inp], inp.weight), "output": (modules[head], out)}


class CheckpointFiles:
    """The weight files of a model (a folder, or a Hub id's snapshot at the commit its config came from) as far as
    they are read: the single file or the index, then the shard files holding the tensors read. Safetensors where
    the checkpoint has them, else ``pytorch_model.bin`` or ``pytorch_model.bin.index.json``'s shards (a checkpoint
    saved before safetensors), in transformers' order; a pickled file is unpickled by torch's weights-only
    unpickler, memory-mapped (:meth:`pickled_tensors`)."""

    def __init__(self, entry: dict, source: str, config, what: str) -> None:
        self.source, self.what, self.local = source, what, os.path.isdir(source)
        commit = getattr(config, "_commit_hash", None)
        self.revision = commit if isinstance(commit, str) and hub.COMMIT.fullmatch(commit) else load_revision(entry)
        self.read_files: dict[str, str] = {}  # name relative to the folder or snapshot → path
        self.unpickled: dict[str, tuple[dict, tuple[int, ...]]] = {}  # path → (its tensors, its state when read)
        self.built_shapes: dict[str, tuple[int, ...]] = {}  # key → the shape config.json builds, where not the file's
        for single_name, index_name in ((SINGLE_FILE, SHARD_INDEX), (PICKLED_FILE, PICKLED_INDEX)):
            single = self.path(single_name)
            index = None if single else self.path(index_name)
            if single or index:
                break
        else:
            raise Unresolved(f"it has none of {SINGLE_FILE}, {SHARD_INDEX}, {PICKLED_FILE} and {PICKLED_INDEX}")
        self.pickled = single_name == PICKLED_FILE
        if self.pickled and single and self.local and os.path.isfile(os.path.join(source, index_name)):
            raise ModelLoadError(
                f"{what}: the directory holds two checkpoints, {single} and the sharded one of "
                f"{os.path.join(source, index_name)}; keep one of them (delete the other)"
            )
        self.single_name, self.index_name = single_name, index_name
        self.weight_map = self.index(index) if index else None
        self.single = single
        self.names: dict | None = None  # loaded_names, once asked for

    def path(self, name: str) -> str | None:
        """The local path of the file ``name``: in the folder; for a Hub id in the HF cache, else downloaded
        (at the commit); None where the folder or the repository has no such file."""
        if self.local:
            path = os.path.join(self.source, name)
            return path if os.path.isfile(path) else None
        cached = hub.model_file(self.source, name, self.revision)
        if cached or hub.unavailable_reason():
            return cached
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        try:
            return hf_hub_download(self.source, name, revision=self.revision)
        except EntryNotFoundError:
            return None
        except Exception as error:  # gated, a network error: the whole load names the cause
            raise Unresolved(f"{name} cannot be downloaded ({first_line(error)})") from error

    def index(self, path: str) -> dict[str, str]:
        """The index's ``weight_map`` (tensor → shard file), its shard names checked to be files beside it."""
        self.read_files[self.index_name] = path
        try:
            with open(path, encoding="utf-8") as handle:
                weight_map = json.load(handle)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ModelLoadError(f"{self.what}: {path} is damaged ({error}); restore it ({REFETCH})") from error
        if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
            raise ModelLoadError(f"{self.what}: {path}'s weight_map is not an object of tensor names and files")
        outside = sorted({f for f in weight_map.values() if os.path.basename(f) != f or f in (".", "..")})
        if outside:
            raise ModelLoadError(f"{self.what}: {path} names weight files outside its folder ({', '.join(outside)})")
        return weight_map

    def stored_keys(self) -> set[str]:
        """Every tensor name of the checkpoint: the index's, or the single file's (its header's, or its unpickled
        keys)."""
        if self.weight_map is not None:
            return set(self.weight_map)
        if self.pickled:
            return set(self.pickled_tensors(self.single)[0])
        from safetensors import safe_open

        with safe_open(self.single, "pt") as weights:
            return set(weights.keys())

    def key_of(self, module_name: str, model) -> str:
        """The checkpoint's key of the weight of the module ``module_name`` of ``model``, as transformers' loader
        maps keys to names (:func:`loaded_names`): exactly one key, whose values it does not convert."""
        if self.names is None:
            self.names = loaded_names(model, self.stored_keys())
        name = f"{module_name}.weight"
        found = self.names.get(name, [])
        if len(found) != 1:
            held = "is not in the files" if not found else f"is in the files {len(found)} times"
            raise Unresolved(f"the matrix {name} {held}")
        key, converter = found[0]
        if converter is not None:
            raise Unresolved(f"transformers converts {key}'s values on loading ({converter})")
        return key

    def file_of(self, key: str) -> tuple[str, str]:
        """``(name, path)`` of the file holding the tensor ``key``."""
        if self.weight_map is None:
            return self.single_name, self.single
        name = self.weight_map[key]
        path = self.path(name)
        if path is None and self.pickled:  # the whole model's load would stop at the same missing file
            raise ModelLoadError(
                f"{self.what}: {name}, which {self.index_name} maps {key} to, is not there; restore the files "
                f"({REFETCH})"
            )
        if path is None:
            raise Unresolved(f"{name}, which {self.index_name} maps {key} to, is not there")
        return name, path

    def names_read(self, keys) -> set[str]:
        """The files a read of the tensors ``keys`` opens, relative to the folder (config.json included)."""
        if self.weight_map is None:
            return {CONFIG_FILE, self.single_name}
        return {CONFIG_FILE, self.index_name} | {self.weight_map[key] for key in keys}

    def pickled_tensors(self, path: str) -> tuple[dict, tuple[int, ...]]:
        """``(tensors, the file's state before it was read)`` of the pickled checkpoint file ``path``, unpickled
        once (:func:`ctxvar.models.hashing.unpickled_tensors`)."""
        if path not in self.unpickled:
            self.unpickled[path] = hashing.unpickled_tensors(path, self.what)
        return self.unpickled[path]

    def stored(self, key: str, path: str) -> tuple[torch.Tensor, tuple[int, ...]]:
        """``(the tensor key as stored in the file path, the file's state before it was read)``."""
        if self.pickled:
            tensors, state = self.pickled_tensors(path)
            tensor = tensors.get(key)
            if not isinstance(tensor, torch.Tensor):
                raise ModelLoadError(f"{self.what}: {path} holds no tensor {key}; restore the files ({REFETCH})")
            return tensor, state
        from safetensors import safe_open

        state = hashing.file_state(os.stat(path))
        with safe_open(path, "pt") as weights:
            return weights.get_tensor(key), state

    def read(self, key: str, like: torch.Tensor, digest: hashing.WeightsDigest) -> torch.Tensor:
        """The tensor ``key`` as the loaded model holds ``like`` (its dtype), its bytes as stored added to
        ``digest``; the file must not change while it is read. Of the shape config.json builds, or of another row
        count (a head padded past the vocabulary), which is measured as the files hold it and recorded
        (``built_shape``); another shape, or a dtype torch does not name, is :class:`Unresolved`."""
        name, path = self.file_of(key)
        self.read_files[name] = path
        tensor, state = self.stored(key, path)
        found, built = tuple(tensor.shape), tuple(like.shape)
        if len(found) != len(built) or found[1:] != built[1:] or tensor.dtype not in hashing.SAFETENSORS_DTYPES:
            raise Unresolved(f"{key} is {tensor.dtype} {found} in the files, {built} built")
        if found != built:
            self.built_shapes[key] = built
            log.warning(
                "%s: %s has %d rows in the files, another row count than the %d config.json builds (its "
                "vocabulary): measured as the files hold it, every row",
                self.what,
                key,
                found[0],
                built[0],
            )
        digest.add_tensor(key, tensor, name)
        converted = tensor.to(like.dtype, copy=True)  # a copy: a memory-mapped tensor would follow the file
        hashing.check_unchanged(self.what, path, state, os.stat(path))
        return converted

    def built_shape(self, key: str) -> dict:
        """``{"built_shape": "rows,columns"}``, the shape config.json builds, for a tensor the files hold with
        another row count; else nothing."""
        built = self.built_shapes.get(key)
        return {"built_shape": ",".join(map(str, built))} if built else {}

    def record(self, digest: hashing.WeightsDigest, config) -> dict:
        """What was read: the files (bytes), each tensor (file, dtype, shape, SHA-256 of its bytes, and the shape
        config.json builds where the file's has another row count), their
        :class:`~ctxvar.models.hashing.WeightsDigest` and the config's SHA-256; the Hub commit for a Hub id."""
        return {
            "read": "tensors",
            **({} if self.local else {"commit": self.revision}),
            "files": {name: os.path.getsize(path) for name, path in sorted(self.read_files.items())},
            "tensors": {
                name: {
                    "file": where,
                    "dtype": dtype,
                    "shape": shape,
                    "sha256": sha,
                    **self.built_shape(name),
                }
                for name, (dtype, shape, sha, where) in sorted(digest.tensors.items())
            },
            "weights_sha256": digest.hexdigest(),
            "config_sha256": hashing.model_config_sha256(config),
        }
