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

from ctxvar.errors import ModelLoadError, first_line
from ctxvar.io import atomic_directory
from ctxvar.models import completeness
from ctxvar.models.archive import archive_path, check_sha256

log = logging.getLogger(__name__)

# The oldest gguf package transformers reads checkpoints with (transformers.utils.import_utils.GGUF_MIN_VERSION).
GGUF_MIN_VERSION = "0.10.0"


def convert_gguf(entry: dict, out_dir) -> None:
    """``out_dir``: the entry's GGUF file (checked against ``entry['sha256']`` under its file name first),
    dequantized to float32 and saved with its tokenizer by ``save_pretrained``, with a ``SHA256SUMS``.

    Raises :class:`IntegrityError` for a file of another digest, :class:`ModelLoadError` when the ``gguf``
    package is missing, transformers cannot read the file, or its loading report shows a tensor missing,
    unexpected or of another shape (:func:`ctxvar.models.completeness.check_loaded_whole`).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import is_gguf_available

    path = archive_path(entry)
    check_sha256(path, entry["sha256"][path.name], entry, str(path))
    if not is_gguf_available(GGUF_MIN_VERSION):
        raise ModelLoadError(
            f"model {entry['id']!r}: reading {path.name} needs the gguf package (≥ {GGUF_MIN_VERSION}); "
            f"pip install 'gguf>={GGUF_MIN_VERSION}' (the example extra has it)"
        )
    what = f"model {entry['id']!r} ({path})"
    options = {"gguf_file": path.name}
    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, **options)
        model, info = AutoModelForCausalLM.from_pretrained(
            path.parent, dtype=torch.float32, output_loading_info=True, **options
        )
    except Exception as error:  # gguf, transformers and numpy raise many types; all mean "cannot read"
        raise ModelLoadError(
            f"{what}: transformers cannot read it as a GGUF checkpoint ({type(error).__name__}: "
            f"{first_line(error)}); reinstall the package that carries it"
        ) from error
    completeness.check_loaded_whole(model, info, what)
    log.info("%s: dequantized to float32 (%d tensors)", what, len(model.state_dict()))
    with atomic_directory(out_dir) as folder:
        plain_copy(model).save_pretrained(folder)
        tokenizer.save_pretrained(folder)


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
