"""An ``init: archive`` model whose archive is gone after it was unpacked keeps the inputs it was unpacked from:
read as unknown, they changed the unpack job's params, so Snakemake deleted the unpacked folder and re-ran the
job, which failed for the missing archive (and every result of the model was to be re-made)."""

from __future__ import annotations

import zipfile

from ctxvar.run.inputs import model_inputs, record_archive_inputs, with_inputs


def test_an_archive_gone_after_unpacking_keeps_its_fingerprint(tmp_path):
    archive, run_folder = tmp_path / "model.zip", tmp_path / "results" / "run"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("config.json", "{}")
    entry = {"id": "zipped", "init": "archive", "archive": str(archive), "sha256": {"config.json": "0" * 64}}
    unpacked = with_inputs({"zipped": entry}, str(run_folder))["zipped"]
    assert unpacked["inputs"]["archive"] is not None
    (run_folder / "models" / "zipped").mkdir(parents=True)  # what the unpack job makes, then records
    record_archive_inputs(unpacked, run_folder / "models" / "zipped")
    archive.unlink()
    assert with_inputs({"zipped": entry}, str(run_folder))["zipped"] == unpacked
    assert model_inputs(entry) == {"archive": None}  # no run folder: nothing to go by


def test_without_the_unpacked_folder_the_record_is_not_used(tmp_path):
    archive, run_folder = tmp_path / "model.zip", tmp_path / "results" / "run"
    entry = {"id": "zipped", "init": "archive", "archive": str(archive), "sha256": {"config.json": "0" * 64}}
    (run_folder / "models").mkdir(parents=True)
    record_archive_inputs({**entry, "inputs": {"archive": "f" * 64}}, run_folder / "models" / "zipped")
    assert model_inputs(entry, str(run_folder)) == {"archive": None}  # the start then names the missing archive
