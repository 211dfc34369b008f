"""The fingerprints a partial carries of what made its numbers: SHA-256 of the weight files the model was loaded
from, of the model's configuration and of the tokenizer, as loaded.

Partials whose fingerprints differ are not added together (:data:`ctxvar.stats.merge.MUST_MATCH`).

The weights are hashed from the files ``from_pretrained`` read (:func:`weight_files`), never from the model's
tensors: copying every device tensor back to the host costs seconds per GB on a GPU while the batches run, and a
model whose blocks are read one at a time has no whole set of tensors to copy. The job's dtype is not in the
weight hash (the files' bytes are the same in every dtype); it is a key of its own in ``MUST_MATCH``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ctxvar.config.entries import load_revision
from ctxvar.errors import ModelLoadError, first_line
from ctxvar.models import hub
from ctxvar.models.completeness import CONVERT, PICKLED_FILE, PICKLED_INDEX, REFETCH, SHARD_INDEX, SINGLE_FILE

READ_BYTES = 16 * 2**20  # the hasher reads a file in pieces of this size (the host holds one a thread)
HASH_THREADS = 8
MAX_HEADER_BYTES = 100 * 2**20  # safetensors' own limit on a file's JSON header
# safetensors' names of the torch dtypes (the ``dtype`` of a tensor in a file's header).
SAFETENSORS_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
}
TORCH_DTYPES = {name: dtype for dtype, name in SAFETENSORS_DTYPES.items()}


class WeightsDigest:
    """SHA-256 naming a set of named tensors by their bytes as stored: for each tensor the SHA-256 of its bytes,
    then the SHA-256 of the lines ``name\\tdtype\\tshape\\tdigest\\n`` sorted by name (``dtype``: safetensors'
    name, ``F32``, ``BF16``, …; ``shape``: comma-separated). The tensors may come in any order and from any files,
    so a checkpoint saved in one file or in shards hashes the same, and a reader that loads tensor by tensor can
    feed them as it reads them (:meth:`add_tensor`). A name given twice must come with the same dtype, shape and
    bytes (transformers would keep one of two different copies without a word)."""

    def __init__(self, what: str) -> None:
        self.what = what  # the model, as errors name it: model 'id' (source)
        self.tensors: dict[str, tuple[str, str, str, str]] = {}  # name → (dtype, shape, digest, where)

    def add(self, name: str, dtype: str, shape, pieces, where: str) -> None:
        """The tensor ``name`` of ``dtype`` and ``shape`` whose bytes are the concatenation of ``pieces``
        (bytes-like objects), read from ``where`` (a file, named in errors)."""
        digest = hashlib.sha256()
        for piece in pieces:
            digest.update(piece)
        self.add_digest(name, dtype, shape, digest.hexdigest(), where)

    def add_digest(self, name: str, dtype: str, shape, hexdigest: str, where: str) -> None:
        """:meth:`add` of a tensor whose bytes' SHA-256 is ``hexdigest``."""
        entry = (dtype, ",".join(map(str, shape)), hexdigest, where)
        held = self.tensors.setdefault(name, entry)
        if held[:3] != entry[:3]:
            raise ModelLoadError(
                f"{self.what}: the weight files hold the tensor {name} twice with other values ({held[3]}, "
                f"{where}), and transformers loads one of the copies without a word; a file of another save is among "
                f"them: restore the files ({REFETCH})"
            )

    def add_tensor(self, name: str, tensor: torch.Tensor, where: str) -> None:
        """A tensor as read from a weight file, on the host and in the file's dtype (before any conversion to the
        job's): the same entry as :meth:`add` of its bytes in the file."""
        if tensor.device.type != "cpu":
            raise ValueError(f"WeightsDigest.add_tensor: {name} is on {tensor.device}; hash it as read, on the host")
        data = tensor.detach().contiguous().reshape(-1)
        pieces = [data.view(torch.uint8).numpy().data] if data.numel() else []
        self.add(name, SAFETENSORS_DTYPES[tensor.dtype], tuple(tensor.shape), pieces, where)

    def hexdigest(self) -> str:
        entries = sorted(self.tensors.items())
        lines = (f"{name}\t{dtype}\t{shape}\t{digest}\n" for name, (dtype, shape, digest, _) in entries)
        return hashlib.sha256("".join(lines).encode()).hexdigest()


@dataclass(frozen=True)
class WeightFiles:
    """The weight files a model was loaded from, with what ``os.stat`` said of each once it was loaded."""

    what: str  # the model, as errors name it: model 'id' (source)
    paths: tuple[str, ...]
    states: tuple[tuple[int, ...], ...]  # per file: device, inode, size, mtime_ns, ctime_ns

    @staticmethod
    def of(what: str, paths) -> WeightFiles:
        return WeightFiles(what, tuple(paths), tuple(file_state(os.stat(path)) for path in paths))


def file_state(status: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is replaced or written to: device, inode, size, mtime and ctime (no tool sets
    ctime back)."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def weight_files(entry: dict, source: str, model) -> WeightFiles:
    """The files ``from_pretrained(source, use_safetensors=True)`` loaded ``model``'s weights from
    (:func:`checkpoint_paths`), with their state now.

    Reads file names and headers, not tensors; refuses files that hold fewer numbers than ``model``'s parameters
    (then they are not what it was loaded from). ``model`` may be a skeleton whose parameters are on ``meta``."""
    what = f"model {entry['id']!r} ({source})"
    paths = checkpoint_paths(entry, source, model.config)
    stored = sum(numbers_in(path, what) for path in paths)
    used = sum(parameter.numel() for parameter in model.parameters())
    if stored < used:
        raise ModelLoadError(
            f"{what}: its weight files ({', '.join(map(os.path.basename, paths))}) hold {stored} numbers, fewer than "
            f"the {used} of the model loaded from them; restore the files ({REFETCH})"
        )
    return WeightFiles.of(what, paths)


def checkpoint_paths(entry: dict, source: str, config) -> list[str]:
    """The weight files ``from_pretrained(source)`` reads a model of ``config`` from (transformers' own choice,
    ``modeling_utils._get_resolved_checkpoint_files``): the file config.json names in ``transformers_weights`` if
    any, else ``model.safetensors``, else the files ``model.safetensors.index.json`` maps tensors to, else a
    checkpoint saved before safetensors (``pytorch_model.bin``, or the files ``pytorch_model.bin.index.json`` maps
    tensors to: unpickled weights-only, :func:`unpickled_tensors`), and the extra files of the config's class; in
    the directory ``source``, or in the HF cache's snapshot of the commit the config was loaded from (the entry's
    revision where it does not say). None of them there is a :class:`ModelLoadError`."""
    commit = getattr(config, "_commit_hash", None)
    revision = commit if isinstance(commit, str) and hub.COMMIT.fullmatch(commit) else load_revision(entry)
    what = f"model {entry['id']!r} ({source})"

    def found(name: str) -> str | None:
        if os.path.isdir(source):
            path = os.path.join(source, name)
            return path if os.path.isfile(path) else None
        return hub.model_file(source, name, revision)

    explicit = getattr(config, "transformers_weights", None)
    names = [explicit] if explicit else [SINGLE_FILE, SHARD_INDEX, PICKLED_FILE, PICKLED_INDEX]
    chosen = next((path for path in map(found, names) if path), None)
    if chosen is None:
        raise ModelLoadError(
            f"{what}: none of {', '.join(names)} is there to hash the weights it was loaded from; restore the files "
            f"({REFETCH})"
        )
    paths = shard_files(chosen, what) if chosen.endswith(".index.json") else [chosen]
    extra = getattr(type(config), "extra_files", ())  # older transformers (5.17 among them) have none
    return paths + [path for path in map(found, extra) if path and path not in paths]


def is_pickled(path: str) -> bool:
    """Whether a weight file is a checkpoint saved before safetensors (``pytorch_model*.bin``)."""
    return path.endswith(".bin")


def weights_only_is_safe() -> bool:
    """Whether this torch's weights-only unpickler is one transformers trusts: 2.6 or later (CVE-2025-32434)."""
    release = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return release is not None and tuple(map(int, release.groups())) >= (2, 6)


def unpickling_reason(error: Exception) -> str:
    """The line of torch's error that says why a file cannot be unpickled weights-only (the global it would
    have to import, say): torch's first line is the same for every file."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Weights only load failed"):
        return lines[1]
    return first_line(error)


def unpickled_tensors(path: str, what: str) -> tuple[dict, tuple[int, ...]]:
    """``(tensors by name, the file's state before it was read)`` of the pickled checkpoint file ``path``, as
    transformers reads one (``torch.load(weights_only=True)``: torch's unpickler of tensors and plain values, which
    runs no code the file names; memory-mapped where the file is torch's zip format, so that only the tensors used
    are read from disk). A torch whose unpickler is not safe, a file it refuses or that holds anything but named
    tensors is a :class:`ModelLoadError` naming it (``what``: the model)."""
    if not weights_only_is_safe():
        raise ModelLoadError(
            f"{what}: {path} is pickled, and torch {torch.__version__}'s weights-only unpickler is not safe "
            f"(CVE-2025-32434): upgrade torch to 2.6 or later, or {CONVERT}"
        )
    state = file_state(os.stat(path))
    mmap = {"mmap": True} if zipfile.is_zipfile(path) else {}  # torch's older format maps nothing
    try:
        tensors = torch.load(path, map_location="cpu", weights_only=True, **mmap)
    except Exception as error:  # UnpicklingError, RuntimeError of a damaged zip, EOFError, …
        raise ModelLoadError(
            f"{what}: {path} cannot be read by torch's weights-only unpickler ({unpickling_reason(error)}): restore "
            f"it ({REFETCH}), or {CONVERT}"
        ) from error
    if not isinstance(tensors, dict):
        raise ModelLoadError(
            f"{what}: {path} holds a {type(tensors).__name__}, not a state dict of named tensors: not a checkpoint "
            f"transformers saved; {CONVERT}"
        )
    others = sorted(repr(name) for name, tensor in tensors.items() if not isinstance(tensor, torch.Tensor))
    if others:
        raise ModelLoadError(
            f"{what}: {path} holds entries that are not tensors ({', '.join(others[:5])}), which transformers does "
            f"not load as weights: not a checkpoint it saved; {CONVERT}"
        )
    return tensors, state


def shard_files(index: str, what: str) -> list[str]:
    """The files a sharded checkpoint's ``index`` maps tensors to, beside it, sorted."""
    try:
        with open(index, encoding="utf-8") as handle:
            weight_map = json.load(handle)["weight_map"]
        names = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ModelLoadError(f"{what}: {index} is damaged ({error}); restore it ({REFETCH})") from error
    folder = os.path.dirname(index)
    absent = [name for name in names if not os.path.isfile(os.path.join(folder, name))]
    if absent:
        raise ModelLoadError(f"{what}: the weight files {', '.join(absent)} that {index} lists are missing; {REFETCH}")
    return [os.path.join(folder, name) for name in names]


def safetensors_header(handle, path: str) -> tuple[int, dict]:
    """``(offset of the data, {name: (dtype, shape, begin, end)})`` of the safetensors file open in ``handle``;
    begin and end count from the offset."""
    size = os.fstat(handle.fileno()).st_size
    try:
        (length,) = struct.unpack("<Q", handle.read(8))
        if not 0 < length <= min(MAX_HEADER_BYTES, size - 8):
            raise ValueError(f"a header of {length} bytes in a file of {size}")
        header = json.loads(handle.read(length))
        tensors = {
            name: (entry["dtype"], tuple(map(int, entry["shape"])), *map(int, entry["data_offsets"]))
            for name, entry in header.items()
            if name != "__metadata__"
        }
        check_tiling(tensors, size - 8 - length)
    except (struct.error, ValueError, TypeError, KeyError) as error:
        raise ModelLoadError(
            f"{path} is damaged or was changed since the model was loaded from it (unreadable safetensors header: "
            f"{error}); restore the files ({REFETCH}) and re-run"
        ) from error
    return 8 + length, tensors


def check_tiling(tensors: dict, data_bytes: int) -> None:
    """A ValueError unless the ``tensors`` of a header (``{name: (dtype, shape, begin, end)}``) tile the file's
    ``data_bytes`` exactly, as safetensors requires before it reads a tensor: in the order of their offsets each
    begins where the one before ends, the last ends with the file, and each of a dtype torch reads spans its
    shape's bytes. A reader by offsets (the hash, streamed weights) then reads what safetensors would."""
    end_of_last = 0
    for name, (dtype, shape, begin, end) in sorted(tensors.items(), key=lambda item: item[1][2:]):
        if begin != end_of_last or end < begin:
            raise ValueError(f"tensor {name}'s bytes [{begin}, {end}) do not follow the tensor before it")
        kind = TORCH_DTYPES.get(dtype)
        if kind is not None and end - begin != torch.Size(shape).numel() * kind.itemsize:
            raise ValueError(f"tensor {name} ({dtype} {list(shape)}) spans {end - begin} bytes")
        end_of_last = end
    if end_of_last != data_bytes:
        raise ValueError(f"the tensors' bytes end at {end_of_last} of the {data_bytes} bytes of data")


def numbers_in(path: str, what: str = "the model") -> int:
    """How many numbers the weight file ``path`` holds (a safetensors header's shapes, or a pickled file's
    tensors)."""
    if is_pickled(path):
        return sum(tensor.numel() for tensor in unpickled_tensors(path, what)[0].values())
    with open(path, "rb") as handle:
        _, tensors = safetensors_header(handle, path)
    return sum(int(torch.Size(shape).numel()) for _, shape, _, _ in tensors.values())


def hash_threads(device) -> int:
    """Threads for the weight hash of a job on ``device``: one beside a forward pass on the CPU, which has the cores;
    beside a GPU's, up to :data:`HASH_THREADS` of the cores this process may run on (SLURM's allotment)."""
    if torch.device(device).type == "cpu":
        return 1
    return max(1, min(HASH_THREADS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


def weights_sha256(files: WeightFiles, threads: int = 1) -> str:
    """:class:`WeightsDigest` of every tensor in ``files`` (see :func:`weight_files`), read from the files once, in
    pieces of at most ``READ_BYTES`` (from the page cache, where the loading left them), by up to ``threads``
    threads, a tensor each at a time (hashlib releases the GIL, so a model's files hash up to ``threads`` times
    as fast; :func:`hash_threads`). Every tensor of the files counts, those that do not feed the
    hidden states (a pooler, a head) too: a change to any weight the job used changes the hash. A file replaced or
    written to since the model was loaded from it is refused: the hash would name other weights than the model's."""
    if any(map(is_pickled, files.paths)):
        return pickled_weights_sha256(files)
    tensors = []
    for path, state in zip(files.paths, files.states, strict=True):
        with open(path, "rb") as handle:
            check_unchanged(files.what, path, state, os.fstat(handle.fileno()))
            start, header = safetensors_header(handle, path)
        for name, (dtype, shape, begin, end) in sorted(header.items(), key=lambda item: item[1][2]):
            tensors.append(StoredTensor(path, state, start + begin, end - begin, name, dtype, shape))
    buffers = threading.local()
    buffer_bytes = max(1, min(READ_BYTES, max((tensor.n_bytes for tensor in tensors), default=1)))

    def tensor_digest(tensor: StoredTensor) -> str:
        if not hasattr(buffers, "view"):
            buffers.view = memoryview(bytearray(buffer_bytes))
        sha = hashlib.sha256()
        with open(tensor.path, "rb") as handle:
            check_unchanged(files.what, tensor.path, tensor.state, os.fstat(handle.fileno()))
            handle.seek(tensor.offset)
            for piece in pieces(handle, tensor.n_bytes, buffers.view, tensor.path):
                sha.update(piece)
            check_unchanged(files.what, tensor.path, tensor.state, os.fstat(handle.fileno()))
        return sha.hexdigest()

    largest_first = sorted(tensors, key=lambda tensor: -tensor.n_bytes)  # so that the threads end together
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(tensors)))) as pool:
        digests = dict(zip(map(id, largest_first), pool.map(tensor_digest, largest_first)))
    digest = WeightsDigest(files.what)
    for tensor in tensors:  # in file order: a name held twice with other bytes is named with its files in that order
        digest.add_digest(tensor.name, tensor.dtype, tensor.shape, digests[id(tensor)], tensor.path)
    return digest.hexdigest()


def pickled_weights_sha256(files: WeightFiles) -> str:
    """:func:`weights_sha256` of a checkpoint saved before safetensors: each file unpickled weights-only
    (:func:`unpickled_tensors`), each tensor's bytes as stored digested (:meth:`WeightsDigest.add_tensor`, the same
    digest as the tensor's in a safetensors file), the file checked unchanged since the model was loaded from it
    before and after."""
    digest = WeightsDigest(files.what)
    for path, state in zip(files.paths, files.states, strict=True):
        check_unchanged(files.what, path, state, os.stat(path))
        tensors, _ = unpickled_tensors(path, files.what)
        for name, tensor in tensors.items():
            if tensor.dtype not in SAFETENSORS_DTYPES:
                raise ModelLoadError(
                    f"{files.what}: {path} holds {name} in {tensor.dtype}, which the hash does not name"
                )
            digest.add_tensor(name, tensor, path)
        del tensors
        check_unchanged(files.what, path, state, os.stat(path))
    return digest.hexdigest()


class StoredTensor(NamedTuple):
    """Where a tensor's bytes are in a safetensors file (``state``: the file's when the model was loaded)."""

    path: str
    state: tuple[int, ...]
    offset: int
    n_bytes: int
    name: str
    dtype: str
    shape: tuple[int, ...]


def pieces(handle, n_bytes: int, buffer: memoryview, path: str):
    """The next ``n_bytes`` of ``handle``, as views of ``buffer``."""
    while n_bytes:
        read = handle.readinto(buffer[: min(n_bytes, len(buffer))])
        if not read:
            raise ModelLoadError(f"{path} ended early: it was changed since the model was loaded from it; re-run")
        n_bytes -= read
        yield buffer[:read]


def check_unchanged(what: str, path: str, state: tuple[int, ...], status: os.stat_result) -> None:
    """Refuse the file ``path`` of the model ``what`` if ``status`` is not ``state``, the file's when it was loaded."""
    if file_state(status) != state:
        raise ModelLoadError(
            f"{what}: {path} was replaced or written to after the job loaded the model from it, so its hash would "
            "name other weights: leave a model's files alone while a run uses them, and re-run"
        )


# Keys of a model's config that do not change what it computes, or that the metadata holds on their own.
CONFIG_KEYS_NOT_HASHED = ("transformers_version", "dtype", "torch_dtype")


def model_config_sha256(config) -> str:
    """SHA-256 of the model's configuration as loaded: ``config.to_dict()`` as JSON with sorted keys, less its
    private keys (``_name_or_path``: where the model sits does not matter) and :data:`CONFIG_KEYS_NOT_HASHED`.
    It covers what changes the hidden states without changing a tensor (model_type, attention heads,
    layer_norm_eps, the activation), which :func:`weights_sha256` cannot see."""
    settings = {
        key: value
        for key, value in config.to_dict().items()
        if not key.startswith("_") and key not in CONFIG_KEYS_NOT_HASHED
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def tokenizer_sha256(tokenizer) -> str:
    """SHA-256 of everything that decides how text becomes tokens: the vocabulary (token → id, sorted), the fast
    tokenizer's whole definition (normalizer, pre-tokenizer, model, post-processor, added tokens: ``to_str()``),
    the special tokens and the settings the tokenizer was made with (lower-casing, prefix space, …)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    settings = {key: value for key, value in getattr(tokenizer, "init_kwargs", {}).items() if not key.startswith("_")}
    for key in ("name_or_path", "tokenizer_file", "vocab_file", "merges_file"):  # where it sits, not what it does
        settings.pop(key, None)
    described = {
        "vocab": sorted(tokenizer.get_vocab().items()),
        "backend": backend.to_str() if backend is not None else None,
        "special_tokens": getattr(tokenizer, "special_tokens_map", {}),
        "settings": settings,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()
