"""Versions of the software that produced an output, and what it ran on, for its metadata."""

from __future__ import annotations

import platform
from importlib import metadata

PACKAGES = (
    "ctxvar",
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "huggingface_hub",
    "numpy",
    "pyarrow",
    "pandas",
    "scipy",
)
# The attention kernels a partial records when torch chose them itself (every partial written before kernels were
# recorded, and every CPU job's: ctxvar.extraction.attention)
TORCH_DEFAULT_ATTENTION = "torch's default"


def package_versions() -> dict[str, str]:
    """Installed versions of :data:`PACKAGES`, with torch's own full version (its build tag, ``2.11.0+cu130``:
    the distribution's metadata may lack it) and the CUDA and cuDNN versions it was built with."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {**versions, **torch_build()}


def torch_build() -> dict[str, str]:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"torch": torch.__version__, "cuda": torch.version.cuda or "none", "cudnn": str(cudnn or "none")}


def device_name(device) -> str:
    """The GPU's name for a CUDA ``device`` (``NVIDIA H100 80GB HBM3``), else the host's processor."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or device.type
