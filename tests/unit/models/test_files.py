"""A model folder's fingerprint (ctxvar.models.files) ends on links that lead back up the folder: os.walk follows
links without remembering where it has been, so two links to ``.`` made Snakemake's start-up walk 2⁴⁰ paths."""

from __future__ import annotations

import os
import subprocess
import sys

from ctxvar.models.files import directory_fingerprint

from support.workflow_runs import REPO


def test_links_back_up_the_folder_end_the_walk(tmp_path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    for name, target in (("a", "."), ("b", "."), ("sub/up", "..")):
        os.symlink(target, folder / name)
    code = f"from ctxvar.models.files import directory_fingerprint; print(directory_fingerprint({str(folder)!r}))"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    walked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert walked.returncode == 0 and len(walked.stdout.strip()) == 64
    before = walked.stdout.strip()
    (folder / "config.json").write_text('{"changed": 1}')
    assert directory_fingerprint(str(folder)) != before


def test_a_linked_folder_is_still_fingerprinted(tmp_path):
    weights, folder = tmp_path / "weights", tmp_path / "model"
    weights.mkdir()
    folder.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    os.symlink(weights, folder / "shards")
    before = directory_fingerprint(str(folder))
    (weights / "model.safetensors").write_bytes(b"other")
    assert directory_fingerprint(str(folder)) != before
