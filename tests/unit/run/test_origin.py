"""A run folder belongs to the config files that made it (ctxvar.run.origin). A second config that sets the same
run: on purpose stops before its first job with one line, a dry run of it shows its plan with that warning, and
the folder's own config file edited in place (or named by another path to the same file) stays the folder's own.
The record moves with the project folder (after ``mv proj proj2`` the folder's own config is still its own); an
earlier ctxvar's record is kept where its files still are and refused with one line once they moved; a second
config file that extends the folder's study (``--configfile config.yaml studies/extra.yaml`` after
``config.yaml``) is accepted, and every other config with the same run name still stops. A record that cannot be
read stops the start with one line: read as no record, it would let any config with the same run name take the
folder over unannounced."""

from __future__ import annotations

import os

import pytest

from ctxvar.config.run_name import run_name, run_named_on_purpose
from ctxvar.errors import ConfigError
from ctxvar.files.atomic import read_json, write_json
from ctxvar.run.origin import ORIGIN_FILE, check_run_origin, config_identity, record_run_origin, recorded_origin


def project(folder, *files: str):
    """A project folder holding these config files (and nothing else yet)."""
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"run: X\n# {name}\n")
    return folder


def accepted(folder, files: list[str]) -> None:
    for on_purpose in (True, False):
        assert check_run_origin(folder, files, named_on_purpose=on_purpose) is None
    record_run_origin(folder, files)


def test_a_moved_project_keeps_its_run_folder_and_still_refuses_another_config(tmp_path, monkeypatch):
    outside = project(tmp_path / "shared", "base.yaml") / "base.yaml"  # not below the project: by absolute path
    monkeypatch.chdir(project(tmp_path / "proj", "a/study.yaml", "b/study.yaml"))
    files = config_identity([os.path.abspath("a/study.yaml"), str(outside)], "config.yaml")
    record_run_origin("results/X", files)

    os.rename(tmp_path / "proj", tmp_path / "proj2")  # mv proj proj2
    monkeypatch.chdir(tmp_path / "proj2")
    moved = config_identity([str(tmp_path / "proj2" / "a" / "study.yaml"), str(outside)], "config.yaml")
    accepted("results/X", moved)
    assert recorded_origin("results/X") == files == ["a/study.yaml", str(outside)]

    other = config_identity([os.path.abspath("b/study.yaml"), str(outside)], "config.yaml")
    with pytest.raises(ConfigError, match="holds the results of a/study.yaml .*set run: to a name of its own"):
        check_run_origin("results/X", other, named_on_purpose=False)
    assert "a real run stops before its first job" in check_run_origin("results/X", other, named_on_purpose=True)
    with pytest.raises(ConfigError, match="sets the same run name and would write over them"):
        record_run_origin("results/X", other)


def test_an_earlier_ctxvars_record_is_kept_in_place_and_refused_with_its_remedy_once_moved(tmp_path, monkeypatch):
    monkeypatch.chdir(project(tmp_path / "proj", "a/study.yaml"))
    files = config_identity(["a/study.yaml"], "config.yaml")
    record = os.path.join("results", "X", ORIGIN_FILE)
    os.makedirs("results/X")
    write_json({"config_files": [os.path.realpath("a/study.yaml")]}, record)  # as the earlier version wrote it
    write_json({"config_files": [os.path.realpath("a/study.yaml")]}, "old.json")
    accepted("results/X", files)  # where it was made: its own, and rewritten to move with the project
    assert read_json(record)["config_files"] == ["a/study.yaml"]

    os.replace("old.json", record)
    os.replace("old.json.sha256", f"{record}.sha256")
    os.rename(tmp_path / "proj", tmp_path / "proj2")
    monkeypatch.chdir(tmp_path / "proj2")
    with pytest.raises(ConfigError) as at_start_up:  # a run named after its file: at start-up
        check_run_origin("results/X", files, named_on_purpose=False)
    with pytest.raises(ConfigError) as at_first_job:  # run: X on purpose: before the first job
        record_run_origin("results/X", files)
    for message in (str(at_start_up.value), str(at_first_job.value)):
        assert "\n" not in message
        assert message.startswith(f"results/X holds the results of {tmp_path / 'proj' / 'a' / 'study.yaml'}, ")
        assert (
            "recorded by absolute path by an earlier ctxvar and no longer there; if the project folder was " in message
        )
        assert f"delete {record} and {ORIGIN_FILE}.sha256 beside it" in message
        assert "re-makes nothing whose settings are unchanged), else give a/study.yaml a run: of its own" in message
    warning = check_run_origin("results/X", files, named_on_purpose=True)
    assert "no longer there" in warning and warning.endswith("a real run stops before its first job")
    os.remove(record)  # what the line says to do
    os.remove(f"{record}.sha256")
    accepted("results/X", files)
    assert recorded_origin("results/X") == ["a/study.yaml"]


def test_a_second_config_file_extends_the_study_in_its_folder_and_no_other_takes_it_over(tmp_path, monkeypatch):
    monkeypatch.chdir(project(tmp_path / "proj", "config.yaml", "studies/extra.yaml", "studies/other.yaml"))
    paper, extra, other = (
        config_identity([name], "config.yaml")[0]
        for name in ("config.yaml", "studies/extra.yaml", "studies/other.yaml")
    )
    record_run_origin("results/paper", [paper])  # snakemake --cores 8

    extended = [paper, extra]  # --configfile config.yaml studies/extra.yaml (run: paper, from config.yaml)
    warning = check_run_origin("results/paper", extended, named_on_purpose=True)
    assert warning == (
        "results/paper holds the results of config.yaml; config.yaml studies/extra.yaml extends them with "
        "studies/extra.yaml: results whose settings differ are re-made in results/paper, the others kept (to "
        "leave results/paper as it is, give studies/extra.yaml a run: of its own)"
    )
    record_run_origin("results/paper", extended)  # a real run goes on
    record_run_origin("results/paper", [paper, other])
    accepted("results/paper", [paper])  # config.yaml alone: the study again
    assert recorded_origin("results/paper") == [paper]

    for files in ([extra], [extra, paper], [other, extra]):  # not the folder's study, extended or not
        assert "a real run stops" in check_run_origin("results/paper", files, named_on_purpose=True)
        with pytest.raises(ConfigError, match="sets the same run name and would write over them"):
            record_run_origin("results/paper", files)
    with pytest.raises(ConfigError, match="its run name is its file's name"):  # a name from a file: not on purpose
        check_run_origin("results/paper", extended, named_on_purpose=False)

    record_run_origin("results/both", extended)  # a folder first made by both files
    assert "is their study without studies/extra.yaml" in check_run_origin("results/both", [paper], True)
    record_run_origin("results/both", [paper])
    with pytest.raises(ConfigError, match="would write over them"):
        record_run_origin("results/both", [paper, other])


def test_a_later_config_file_writes_into_an_earlier_ones_run_only_when_it_names_that_run():
    """``--configfile config.yaml studies/extra.yaml`` ran as ``paper`` (config.yaml's run:), into the paper's
    folder, where a corpus: in extra.yaml re-made the paper's results; now as ``extra`` unless extra.yaml says
    ``run: paper``."""
    paper = {"run": "paper", "corpus": {"source": "synthetic"}}
    for extra, name, on_purpose in (({}, "extra", False), ({"run": "paper"}, "paper", True)):
        files = {"config.yaml": paper, "studies/extra.yaml": extra}
        assert (run_name({**paper, **extra}, files, {}), run_named_on_purpose(files, {})) == (name, on_purpose)
    files = {"config.yaml": paper, "studies/extra.yaml": {}}
    assert (run_name(paper, files, {"run": "paper"}), run_named_on_purpose(files, {"run": "paper"})) == ("paper", True)


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
