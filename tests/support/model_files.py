"""Model directories as a user has them: a copy of a tiny model without the SHA256SUMS that ctxvar writes beside
the models it builds, and an object that runs code when a pickled checkpoint holding it is unpickled."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ctxvar.files.atomic import MANIFEST


def user_copy(tiny_models, tmp_path, arch="bert") -> Path:
    """A copy of the session's tiny ``arch`` in ``tmp_path / "user-model"``, without its manifest."""
    model_dir = tmp_path / "user-model"
    shutil.copytree(tiny_models[arch], model_dir, ignore=shutil.ignore_patterns(MANIFEST))
    return model_dir


class RunsCode:
    """An object whose unpickling calls ``os.makedirs(path)``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return os.makedirs, (self.path,)
