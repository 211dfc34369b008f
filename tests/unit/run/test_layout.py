"""A results folder whose merged sums carry the older names (stats*.parquet) is refused with one line
(ctxvar.run.layout); a model folder holding merged sums under both names (stats.parquet beside sums.parquet: an
older run's files left when a newer version merged again) is refused with a remedy that keeps the current files:
delete the older names, since renaming them would write over the current sums."""

from __future__ import annotations

import pytest

from ctxvar.errors import IntegrityError
from ctxvar.run.layout import check_results_layout, old_sums_files


def test_a_folder_with_the_current_names_passes(tmp_path):
    (tmp_path / "tiny-bert").mkdir()
    for name in ("sums.parquet", "sums.moments.parquet", "tokens.parquet"):
        (tmp_path / "tiny-bert" / name).write_bytes(b"")
    check_results_layout(tmp_path, ["tiny-bert", "not-yet-run"])


def test_the_older_names_are_refused_in_one_line_saying_what_to_do(tmp_path):
    for model in ("tiny-bert", "gpt2@step[1]"):  # glob characters in an id are taken literally
        (tmp_path / model).mkdir()
        for name in ("stats.parquet", "stats.moments.parquet"):
            (tmp_path / model / name).write_bytes(b"")
    assert [path.rsplit("/", 2)[-2:] for path in old_sums_files(tmp_path, ["tiny-bert", "gpt2@step[1]"])] == [
        ["tiny-bert", "stats.moments.parquet"],
        ["tiny-bert", "stats.parquet"],
        ["gpt2@step[1]", "stats.moments.parquet"],
        ["gpt2@step[1]", "stats.parquet"],
    ]
    with pytest.raises(IntegrityError) as error:
        check_results_layout(tmp_path, ["tiny-bert", "gpt2@step[1]"])
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path}/tiny-bert/stats.moments.parquet and 3 more in {tmp_path}: ")
    assert "named sums*.parquet now" in message and f"move {tmp_path} aside or delete it" in message
    assert "renamed, load_results still refuses them" in message  # no corpus_hash, and no job re-makes one


def test_only_the_configured_models_are_looked_at(tmp_path):
    (tmp_path / "removed-model").mkdir()
    (tmp_path / "removed-model" / "stats.parquet").write_bytes(b"")
    check_results_layout(tmp_path, ["tiny-bert"])


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
