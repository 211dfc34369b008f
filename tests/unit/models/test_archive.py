"""A model zip whose members Python's zipfile cannot read (a password, or a compression method it lacks) is one
line at start-up and in the unpack job, never a traceback: the start-up disk estimate reads its config.json."""

from __future__ import annotations

import json
import zipfile

import pytest

from ctxvar.errors import IntegrityError
from ctxvar.models.archive import unpack_model
from ctxvar.run.disk import packaged_model

CONFIG = {"num_hidden_layers": 2, "hidden_size": 8, "vocab_size": 10}


def encrypted_zip(path) -> None:
    """A zip whose one member is marked encrypted (general-purpose flag bit 0), as ``zip -e`` writes it."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(CONFIG))
    blob = bytearray(path.read_bytes())
    blob[blob.find(b"PK\x01\x02") + 8] |= 1  # the central directory's flags
    blob[blob.find(b"PK\x03\x04") + 6] |= 1  # the local header's
    path.write_bytes(blob)


def test_an_encrypted_zip_is_one_line_at_start_up_and_when_unpacked(tmp_path):
    archive = tmp_path / "model.zip"
    encrypted_zip(archive)
    entry = {"id": "zipped", "init": "archive", "archive": str(archive), "sha256": {"config.json": "0" * 64}}
    shape, folder_bytes = packaged_model(entry)
    assert shape is None and folder_bytes == len(json.dumps(CONFIG))
    with pytest.raises(IntegrityError, match=r"is encrypted.*zip the model folder again without a password"):
        unpack_model(entry, tmp_path / "models" / "zipped")
    assert not (tmp_path / "models" / "zipped").exists()
