"""Atomic outputs and checksummed files (ctxvar.files.atomic): ``atomic_path`` leaves nothing on failure,
clears the temporaries of killed attempts and gives outputs the permissions of ordinary new files; CSV and JSON
outputs are verified against their checksum files when read."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from ctxvar.errors import IntegrityError
from ctxvar.files.atomic import atomic_path, read_csv, read_json, write_csv, write_json

from support.byte_flips import flip
from support.messages import one_line


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_clears_temporaries_of_killed_attempts(tmp_path):
    target = tmp_path / "out.csv"
    (tmp_path / ".out.csv.abc123.tmp").write_text("left by a killed job")
    (tmp_path / ".other.csv.abc123.tmp").write_text("not ours")
    with atomic_path(target) as tmp:
        tmp.write_text("done")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.csv.abc123.tmp", "out.csv"]


def test_atomic_outputs_get_the_permissions_of_ordinary_new_files(tmp_path):
    previous = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "out.csv") as tmp:
            tmp.write_text("done")
        (tmp_path / "plain.csv").write_text("done")
    finally:
        os.umask(previous)
    assert (tmp_path / "out.csv").stat().st_mode & 0o777 == (tmp_path / "plain.csv").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("kind", ["csv", "json"])
@pytest.mark.parametrize("damage", ["flipped", "missing checksum", "edited"])
def test_csv_and_json_outputs_are_verified(tmp_path, kind, damage):
    path = tmp_path / f"layers.{kind}"
    if kind == "csv":
        write_csv(pd.DataFrame({"layer": [0, 1], "slope_VM": [-0.65, -0.61]}), path)
    else:
        write_json({"n_tokens": 12345}, path)
    if damage == "flipped":
        flip(path, path.stat().st_size // 2)
    elif damage == "missing checksum":
        Path(f"{path}.sha256").unlink()
    else:
        path.write_text(path.read_text().replace("1", "7"))
    with pytest.raises(IntegrityError, match=f"{path.name}: .*delete it and re-run") as error:
        read_csv(path) if kind == "csv" else read_json(path)
    one_line(error)


def test_intact_csv_and_json_read_back_equal(tmp_path):
    frame = pd.DataFrame({"token": ["a", "NA", ""], "n": [1, 2, 3]})
    write_csv(frame, tmp_path / "t.csv")
    write_json({"a": [1, 2]}, tmp_path / "t.json")
    pd.testing.assert_frame_equal(read_csv(tmp_path / "t.csv", keep_default_na=False), frame, check_dtype=False)
    assert read_json(tmp_path / "t.json") == {"a": [1, 2]}
