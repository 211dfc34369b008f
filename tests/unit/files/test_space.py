"""Free disk space (ctxvar.files.space): the check before a job writes, one line naming the folder, the bytes needed
and free and the remedy, skipped with CTXVAR_SKIP_DISK_CHECK=1; a full disk told from other errors, by errno or by
the words of a library's message, along the chain of causes, and named in one line; and outputs removed when a job
fails half-way."""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from ctxvar.errors import ConfigError, DiskSpaceError
from ctxvar.files import space


def free(monkeypatch, n_bytes: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - n_bytes, n_bytes))


def test_the_nearest_existing_folder_stands_for_one_not_made_yet(tmp_path):
    assert space.nearest_existing(tmp_path / "results" / "run" / "model") == str(tmp_path)
    assert space.nearest_existing(tmp_path) == str(tmp_path)


def test_a_check_that_fails_names_the_folder_the_bytes_and_the_remedy(tmp_path, monkeypatch):
    free(monkeypatch, 2_000_000)
    space.require_free_space(tmp_path / "merged", 2_000_000, "the merged sums")  # just fits
    with pytest.raises(DiskSpaceError) as error:
        space.require_free_space(tmp_path / "merged", 3_000_000, "the merged sums")
    message = str(error.value)
    assert message.startswith(f"disk: the merged sums in {tmp_path / 'merged'} need up to 3 MB (3000000 bytes) but")
    assert "has 2 MB (2000000 bytes) free; free space on the results disk" in message and "\n" not in message
    monkeypatch.setenv(space.SKIP_DISK_CHECK, "1")
    assert space.disk_check_skipped()
    space.require_free_space(tmp_path / "merged", 3_000_000, "the merged sums")


@pytest.mark.parametrize(
    "error, full",
    [
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (OSError("Error writing bytes to file. Detail: [errno 28] No space left on device"), True),  # Arrow's
        (RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"), True),
        (OSError(errno.EACCES, "Permission denied"), False),
        (ValueError("not a disk error"), False),
    ],
)
def test_a_full_disk_is_told_by_errno_or_by_the_librarys_words(error, full):
    assert space.disk_full(error) is full


def test_a_full_disk_is_found_among_the_causes_and_its_file_names_the_folder(tmp_path):
    cause = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "0.parquet"))
    try:
        try:
            raise cause
        except OSError as error:
            raise RuntimeError("the writer failed") from error
    except RuntimeError as wrapped:
        assert space.disk_full(wrapped) and space.written_folder(wrapped) == str(tmp_path / "out")
    assert space.written_folder(ValueError("no file")) == os.getcwd()


def test_a_full_disk_in_the_block_becomes_one_line_and_other_errors_pass(tmp_path, monkeypatch):
    free(monkeypatch, 1000)
    with pytest.raises(DiskSpaceError) as error:
        with space.full_disk_named(tmp_path, needed=5_000_000, what="the partials"):
            raise OSError(errno.ENOSPC, "No space left on device")
    message = str(error.value)
    assert message.startswith(f"disk full while this job wrote its outputs in {tmp_path} ([Errno 28] No space left")
    assert "; the partials need about 5 MB (5000000 bytes) there; its disk has 1 kB (1000 bytes) free now;" in message
    assert isinstance(error.value.__cause__, OSError)
    with pytest.raises(ValueError, match="other"):
        with space.full_disk_named(tmp_path):
            raise ValueError("other")
    with pytest.raises(ConfigError, match="No space left on device"):  # ctxvar's own errors pass as they are
        with space.full_disk_named(tmp_path):
            raise ConfigError("No space left on device, says the config")


def test_outputs_are_removed_when_the_block_fails_and_kept_when_it_does_not(tmp_path):
    outputs = [tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "never-made.parquet"]
    with pytest.raises(KeyboardInterrupt):
        with space.removed_on_failure(outputs):
            outputs[0].write_text("whole")
            outputs[1].write_text("half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with space.removed_on_failure(outputs):
        outputs[0].write_text("whole")
    assert outputs[0].read_text() == "whole"
