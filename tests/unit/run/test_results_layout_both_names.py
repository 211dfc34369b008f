"""A model folder holding merged sums under both names (stats.parquet beside sums.parquet: an older run's files
left when a newer version merged again) is refused with a remedy that keeps the current files: delete the older
names. Renaming them would write over the current sums."""

from __future__ import annotations

import pytest

from ctxvar.errors import IntegrityError
from ctxvar.run.layout import check_results_layout


def test_old_names_beside_the_current_ones_are_to_be_deleted_not_renamed(tmp_path):
    (tmp_path / "tiny-bert").mkdir()
    for name in ("stats.parquet", "stats.moments.parquet", "sums.parquet", "sums.moments.parquet"):
        (tmp_path / "tiny-bert" / name).write_bytes(b"")
    with pytest.raises(IntegrityError) as error:
        check_results_layout(tmp_path, ["tiny-bert"])
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path}/tiny-bert/stats.moments.parquet and 1 more in {tmp_path}: ")
    assert "sums.moments.parquet" in message and "delete the stats*.parquet files" in message
    assert "rename each" not in message


def test_old_names_alone_ask_for_a_fresh_run_folder(tmp_path):
    (tmp_path / "tiny-bert").mkdir()
    (tmp_path / "tiny-bert" / "stats.parquet").write_bytes(b"")
    (tmp_path / "tiny-bert" / "sums.moments.parquet").write_bytes(b"")  # another file's current name
    with pytest.raises(IntegrityError, match="aside or delete it, and the run makes every file again"):
        check_results_layout(tmp_path, ["tiny-bert"])
