"""A run folder's record of its config files (ctxvar.run.origin) that cannot be read stops the start with one
line: read as no record, it let any config with the same run name take the folder over unannounced."""

from __future__ import annotations

import pytest

from ctxvar.errors import ConfigError
from ctxvar.files.atomic import write_json
from ctxvar.run.origin import ORIGIN_FILE, check_run_origin, record_run_origin


@pytest.mark.parametrize("damage", ["flip", "truncate", "no checksum", "not a list"])
def test_a_damaged_run_record_stops_the_start_rather_than_letting_another_config_take_over(tmp_path, damage):
    folder, first, second = str(tmp_path / "results" / "study"), ["/a/study.yaml"], ["/b/study.yaml"]
    record_run_origin(folder, first)
    record = tmp_path / "results" / "study" / ORIGIN_FILE
    if damage == "flip":
        record.write_bytes(record.read_bytes().replace(b"/a/", b"/b/"))
    elif damage == "truncate":
        record.write_bytes(record.read_bytes()[:5])
    elif damage == "no checksum":
        (tmp_path / "results" / "study" / f"{ORIGIN_FILE}.sha256").unlink()
    else:
        write_json({"config_files": "/a/study.yaml"}, record)
    for files, on_purpose in ((second, False), (second, True), (first, False)):
        with pytest.raises(ConfigError, match=f"{ORIGIN_FILE}: the record .* cannot be read .*; delete it"):
            check_run_origin(folder, files, named_on_purpose=on_purpose)
    with pytest.raises(ConfigError):
        record_run_origin(folder, second)  # never overwritten with another config's files
    assert "/b/study.yaml" not in record.read_text() or damage == "flip"
