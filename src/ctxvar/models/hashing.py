"""The fingerprints a partial carries of what made its numbers: SHA-256 of the weights, the model's
configuration and the tokenizer, as loaded.

Partials whose fingerprints differ are not added together (:data:`ctxvar.stats.merge.MUST_MATCH`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json

import torch

from ctxvar.models import completeness


def weights_sha256(model: torch.nn.Module) -> str:
    """SHA-256 over every parameter and buffer of the model as loaded (in the job's dtype) that feeds its hidden
    states (:func:`ctxvar.models.completeness.feeds_hidden_states`: a pooler does not), sorted by name: for
    each, ``name:dtype:shape`` then its bytes. Partials of other weights, or of the same in another dtype,
    differ; where the model sits does not matter.

    The tensors come to the host one at a time, so the host holds at most the largest
    of them. On a GPU they are copied on a stream of their own (after the loading's
    copies), so hashing in a background thread overlaps the batches' work instead of
    queueing behind it.
    """
    tensors = {
        name: tensor
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]
        if completeness.feeds_hidden_states(name)
    }
    device = next(iter(tensors.values())).device if tensors else torch.device("cpu")
    digest = hashlib.sha256()
    with _copy_stream(device):
        for name, tensor in sorted(tensors.items()):
            data = tensor.detach().contiguous().cpu()
            digest.update(f"{name}:{data.dtype}:{tuple(data.shape)}".encode())
            digest.update(data.reshape(-1).view(torch.uint8).numpy().data if data.numel() else b"")
    return digest.hexdigest()


def _copy_stream(device: torch.device):
    """A side CUDA stream that first waits for the work queued so far on ``device``; elsewhere, nothing."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    return torch.cuda.stream(stream)


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
