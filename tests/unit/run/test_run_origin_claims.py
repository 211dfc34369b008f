"""A run folder belongs to the config files that made it (ctxvar.run.origin): a second config that sets the same
run: on purpose stops before its first job with one line (it only got a warning and wrote over the first's
results), a dry run of it shows its plan with that warning, and the folder's own config file edited in place
(or named by another path to the same file) stays the folder's own."""

from __future__ import annotations

import os

import pytest

from ctxvar.errors import ConfigError
from ctxvar.run.origin import ORIGIN_FILE, check_run_origin, config_identity, record_run_origin, recorded_origin


def config(path, text: str) -> list[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return config_identity([str(path)], "config.yaml")


def test_a_second_config_setting_the_same_run_stops_before_its_first_job(tmp_path):
    folder = str(tmp_path / "results" / "X")
    first = config(tmp_path / "a" / "study.yaml", "run: X\nshards: 2\n")
    second = config(tmp_path / "b" / "other.yaml", "run: X\nshards: 4\n")
    assert check_run_origin(folder, first, named_on_purpose=True) is None
    record_run_origin(folder, first)  # the first real run
    warning = check_run_origin(folder, second, named_on_purpose=True)  # start-up, dry run or not
    assert warning.startswith(f"{folder} holds the results of {first[0]}; {second[0]} sets the same run name")
    assert warning.endswith("a real run stops before its first job")
    with pytest.raises(ConfigError) as error:
        record_run_origin(folder, second)  # a real run's start
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{folder} holds the results of {first[0]}; {second[0]}")
    assert f"set run: to a name of its own in {second[0]}" in message
    assert f"delete {os.path.join(folder, ORIGIN_FILE)} (its results are then re-made" in message
    assert recorded_origin(folder) == first


def test_the_folders_own_config_edited_in_place_is_still_its_own(tmp_path):
    folder = str(tmp_path / "results" / "X")
    path = tmp_path / "a" / "study.yaml"
    first = config(path, "run: X\nshards: 2\n")
    record_run_origin(folder, first)
    edited = config(path, "run: X\nshards: 4\nmodels: []\n")  # the same file, other content
    link = tmp_path / "link.yaml"
    link.symlink_to(path)
    for files in (edited, config_identity([str(link)], "config.yaml")):
        assert check_run_origin(folder, files, named_on_purpose=True) is None
        assert check_run_origin(folder, files, named_on_purpose=False) is None
        record_run_origin(folder, files)
    assert recorded_origin(folder) == first


def test_taking_the_folder_over_as_the_line_says_records_the_new_config(tmp_path):
    folder = str(tmp_path / "results" / "X")
    first = config(tmp_path / "a" / "study.yaml", "run: X\n")
    second = config(tmp_path / "b" / "study.yaml", "run: X\nseed: 1\n")
    record_run_origin(folder, first)
    os.remove(os.path.join(folder, ORIGIN_FILE))  # what the line says to do
    os.remove(os.path.join(folder, f"{ORIGIN_FILE}.sha256"))
    record_run_origin(folder, second)
    assert recorded_origin(folder) == second
    with pytest.raises(ConfigError, match="holds the results of .*b/study.yaml"):
        record_run_origin(folder, first)
