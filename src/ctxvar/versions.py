"""Versions of the software that produced an output, for its metadata."""

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


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
