"""GGUF checkpoints (``init: archive`` with ``gguf``): a llama.cpp file made into a ``save_pretrained`` folder.

transformers reads the file with the ``gguf`` package (``from_pretrained(folder, gguf_file=name)``) and
dequantizes every tensor to float32: a Q4_1 block of 32 weights, stored as 4-bit integers q with a float16
scale d and offset m, becomes d·q + m, exact in float32. That float32 model, saved as ``model.safetensors``
with its tokenizer, is the model the run measures. It is not bit-for-bit what llama.cpp computes, whose
matrix products take the quantized blocks themselves (and quantize the activations); the weights are the same.

After the conversion the folder is an ordinary ``save_pretrained`` directory: extraction loads it like any
other, with the same completeness checks and hashes (:mod:`ctxvar.models.loading`).
"""

from __future__ import annotations

import logging
import math
import struct
from pathlib import Path

from ctxvar.errors import ModelLoadError, first_line
from ctxvar.files.atomic import atomic_directory
from ctxvar.files.space import full_disk_named, require_free_space
from ctxvar.models import completeness
from ctxvar.models.archive import archive_path, check_sha256
from ctxvar.models.transformers_log import transformers_into_log

log = logging.getLogger(__name__)

# The oldest gguf package transformers reads checkpoints with (transformers.utils.import_utils.GGUF_MIN_VERSION).
GGUF_MIN_VERSION = "0.10.0"
# What to use instead of a GGUF file that transformers cannot convert, whose digest is the one the entry names
# (so reinstalling it gives the same file).
OTHER_FILE = (
    "use a GGUF file of another quantisation (Q8_0, Q4_K_M, F16, …: those the gguf package dequantizes), or the "
    "model's save_pretrained folder (models[].name: its path, init: pretrained)"
)
SAVED_FOLDER = "use the model's save_pretrained folder instead (models[].name: its path, init: pretrained)"
# The tokenizer.ggml keys from which transformers builds each kind of tokenizer.ggml.model (any one suffices);
# Gemma's sentencepiece files need neither (their merges come from the order of the tokens).
TOKENIZER_NEEDS = {
    "gpt2": ("merges",),
    "llama": ("merges", "scores"),
    "t5": ("scores",),
    "gemma4": ("merges", "scores"),
}
ORDER_MERGES = ("gemma", "gemma2", "gemma3")


def gguf_version() -> str:
    """The installed gguf package's version (the package has no ``__version__``)."""
    import importlib.metadata

    return importlib.metadata.version("gguf")


def field_value(reader, key: str):
    """The scalar or string ``key`` of a GGUF file's metadata (``GGUFReader``), or None if it has none."""
    from gguf import GGUFValueType

    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    part = field.parts[field.data[0]]
    if field.types[0] == GGUFValueType.STRING:
        return bytes(part).decode("utf-8", "replace")
    return part[0].item() if field.types[0] != GGUFValueType.ARRAY else None


# GGUF metadata value types of a fixed size, as struct formats: u8, i8, u16, i16, u32, i32, f32, bool, u64, i64, f64.
GGUF_VALUE_FORMATS = dict(
    zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), ("<B", "<b", "<H", "<h", "<I", "<i", "<f", "<?", "<Q", "<q", "<d"))
)
GGUF_STRING, GGUF_ARRAY = 8, 9


def gguf_header(path) -> tuple[dict, int, int]:
    """``(metadata, tensor elements, bytes before the tensor data)`` of the GGUF file ``path``, read with the
    standard library from its header alone (llama.cpp's GGUF v2/v3 layout, little-endian): scalar and string
    values, and the length of each array. Raises ``ValueError`` for a file that is not one."""
    import mmap

    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as blob:
        if blob[:4] != b"GGUF" or struct.unpack_from("<I", blob, 4)[0] not in (2, 3):
            raise ValueError(f"{path} is not a GGUF v2 or v3 file")
        tensors, count = struct.unpack_from("<QQ", blob, 8)
        position = 24

        def string() -> str:
            nonlocal position
            (length,) = struct.unpack_from("<Q", blob, position)
            position += 8 + length
            return blob[position - length : position].decode("utf-8", "replace")

        def value(kind: int):
            nonlocal position
            if kind in GGUF_VALUE_FORMATS:
                (scalar,) = struct.unpack_from(GGUF_VALUE_FORMATS[kind], blob, position)
                position += struct.calcsize(GGUF_VALUE_FORMATS[kind])
                return scalar
            if kind == GGUF_STRING:
                return string()
            if kind != GGUF_ARRAY:
                raise ValueError(f"{path}: unknown GGUF value type {kind}")
            item, length = struct.unpack_from("<IQ", blob, position)
            position += 12
            if item in GGUF_VALUE_FORMATS:
                position += length * struct.calcsize(GGUF_VALUE_FORMATS[item])
            else:
                for _ in range(length):
                    value(item)
            return length

        metadata = {}
        for _ in range(count):
            key = string()
            (kind,) = struct.unpack_from("<I", blob, position)
            position += 4
            metadata[key] = value(kind)
        elements = 0
        for _ in range(tensors):
            string()
            (dims,) = struct.unpack_from("<I", blob, position)
            shape = struct.unpack_from(f"<{dims}Q", blob, position + 4)
            position += 4 + 8 * dims + 12
            elements += math.prod(shape)
    return metadata, elements, position


def gguf_shape(path) -> tuple[int, int, int, int] | None:
    """``(hidden states, width, vocabulary, bytes)`` of the GGUF file ``path`` once converted: its blocks + 1, its
    embedding length, its tokens, and its tensors in float32 plus its metadata (:func:`gguf_header`); None if
    the header says less or is not a GGUF file's (the conversion job says why)."""
    try:
        metadata, elements, header_bytes = gguf_header(path)
    except (OSError, ValueError, struct.error):
        return None
    architecture = metadata.get("general.architecture")
    layers, width = (metadata.get(f"{architecture}.{key}") for key in ("block_count", "embedding_length"))
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not all(isinstance(number, int) for number in (layers, width, tokens)):
        return None
    return layers + 1, width, tokens, converted_bytes(elements, header_bytes)


def converted_bytes(elements: int, header_bytes: int) -> int:
    """About what ``save_pretrained`` writes for a GGUF file of ``elements`` tensor elements: each in float32,
    plus the file's metadata (the tokenizer)."""
    return 4 * elements + header_bytes


def unsupported_part(path) -> str | None:
    """What in the GGUF file ``path`` transformers cannot convert, with what to do instead: an architecture it does
    not read, tensors of a quantisation the gguf package cannot dequantize, a tokenizer it cannot build; None if
    none, or if the gguf package cannot parse the file."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGUFReader, dequantize
    from transformers import __version__

    try:
        reader = GGUFReader(path)
    except Exception:  # ValueError, struct and numpy errors: the caller's line names transformers' error
        return None

    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        GGUF_SUPPORTED_ARCHITECTURES = None
    architecture = field_value(reader, "general.architecture")
    if GGUF_SUPPORTED_ARCHITECTURES is not None and architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        return (
            f"its architecture (general.architecture) is {architecture!r}, which transformers {__version__} does "
            f"not read from GGUF files; {SAVED_FOLDER}"
        )
    by_type: dict = {}
    for tensor in reader.tensors:
        by_type.setdefault(tensor.tensor_type, []).append(tensor.name)
    for kind, names in sorted(by_type.items(), key=lambda item: item[0].name):
        try:
            dequantize(np.zeros(GGML_QUANT_SIZES[kind][1], np.uint8), kind)
        except NotImplementedError:
            return (
                f"{len(names)} of its tensors ({completeness.listed(names)}) are of quantisation {kind.name}, which "
                f"the gguf package {gguf_version()} cannot dequantize; {OTHER_FILE}"
            )
        except Exception:  # a block of zeros need not be valid data of every kind: only "not implemented" counts
            continue
    kind = field_value(reader, "tokenizer.ggml.model")
    needs = TOKENIZER_NEEDS.get(kind)
    if needs is None:
        return (
            f"its tokenizer (tokenizer.ggml.model) is {kind!r}, which transformers {__version__} does not build "
            f"(it builds {', '.join(sorted(TOKENIZER_NEEDS))}); {SAVED_FOLDER}"
        )
    if architecture not in ORDER_MERGES and not any(f"tokenizer.ggml.{key}" in reader.fields for key in needs):
        return (
            f"its tokenizer ({kind!r}) has no {' and no '.join(f'tokenizer.ggml.{key}' for key in needs)}, from "
            f"which transformers builds it; use a GGUF file written with them (llama.cpp's convert_hf_to_gguf.py "
            f"writes them) or {SAVED_FOLDER.removeprefix('use ')}"
        )
    return None


def convert_gguf(entry: dict, out_dir) -> None:
    """``out_dir``: the entry's GGUF file (checked against ``entry['sha256']`` under its file name first),
    dequantized to float32 and saved with its tokenizer by ``save_pretrained``, with a ``SHA256SUMS``.

    Raises :class:`IntegrityError` for a file of another digest, :class:`ModelLoadError` when the ``gguf``
    package is missing, the file is not one it reads, transformers cannot convert it (what in the file it cannot
    convert, :func:`unsupported_part`, and what to use instead), or its loading report shows a tensor missing,
    unexpected or of another shape (:func:`ctxvar.models.completeness.check_loaded_whole`); and
    :class:`DiskSpaceError` when the float32 model does not fit in ``out_dir``'s folder (before it is made, or
    when the disk fills while it is written), naming the folder and the bytes.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import is_gguf_available

    from ctxvar.models.loading import torch_kernels_only

    path = archive_path(entry)
    check_sha256(path, entry["sha256"][path.name], entry, str(path))
    if not is_gguf_available(GGUF_MIN_VERSION):
        raise ModelLoadError(
            f"model {entry['id']!r}: reading {path.name} needs the gguf package (≥ {GGUF_MIN_VERSION}); "
            f"pip install 'gguf>={GGUF_MIN_VERSION}' (the example extra has it)"
        )
    what = f"model {entry['id']!r} ({path})"
    try:
        _, elements, header_bytes = gguf_header(path)
    except (ValueError, struct.error) as error:
        raise ModelLoadError(
            f"{what}: not a GGUF file ({first_line(error)}); it has the SHA-256 the entry names, so it was written "
            f"so: get a whole copy from where it came and put its SHA-256 in sha256:, or "
            f"{SAVED_FOLDER.removeprefix('use ')}"
        ) from error
    needed, folder = converted_bytes(elements, header_bytes), Path(out_dir).parent
    require_free_space(folder, needed, f"the float32 model converted from {path.name}")
    options = {"gguf_file": path.name}
    try:
        with transformers_into_log():
            tokenizer = AutoTokenizer.from_pretrained(path.parent, **options)
            model, info = AutoModelForCausalLM.from_pretrained(
                path.parent,
                dtype=torch.float32,
                output_loading_info=True,
                ignore_mismatched_sizes=True,
                **options,
                **torch_kernels_only(),
            )
    except Exception as error:  # gguf, transformers and numpy raise many types; all mean "cannot convert"
        from transformers import __version__

        reason = unsupported_part(path) or (
            f"transformers {__version__} cannot convert it ({type(error).__name__}: {first_line(error)}); it has "
            f"the SHA-256 the entry names, so reinstalling it gives the same file: {OTHER_FILE}"
        )
        raise ModelLoadError(f"{what}: {reason}") from error
    completeness.check_loaded_whole(
        model, info, what, f"the file's tensors do not fit the model its metadata describes: {OTHER_FILE}"
    )
    log.info("%s: dequantized to float32 (%d tensors)", what, len(model.state_dict()))
    with full_disk_named(folder, needed, "the float32 model"), atomic_directory(out_dir) as converted:
        plain_copy(model).save_pretrained(converted)
        tokenizer.save_pretrained(converted)


def plain_copy(model):
    """The dequantized ``model`` as an ordinary float32 model of its class: transformers marks a model read from
    GGUF as quantized (``quantization_config``) and will not save it, although its tensors are plain float32.
    The copy is built from the config less that mark and takes every tensor of ``model`` (``strict``)."""
    from transformers import AutoModelForCausalLM

    settings = model.config.to_dict()
    settings.pop("quantization_config", None)
    config = type(model.config).from_dict(settings)
    copy = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    copy.load_state_dict(model.state_dict(), strict=True)
    return copy.eval()
