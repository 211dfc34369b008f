"""A merge that cannot fit on its disk fails before it writes, with one line naming the folder, the bytes it needs
and the bytes free; a disk that fills while it writes (ENOSPC) ends in one line too and leaves none of the job's
outputs, so no later step reads a set of merged files made by a failed job."""

from __future__ import annotations

import errno
import os
import shutil

import numpy as np
import pytest

from ctxvar.errors import DiskSpaceError
from ctxvar.run.job_log import job_log
from ctxvar.stats import sums
from ctxvar.stats.declarations import kept_layer_sums
from ctxvar.stats.merge import merge_job
from ctxvar.stats.merge_io import merge_output_bytes
from ctxvar.stats.sums import LayerWriter, moments_schema, moments_table, write_sums

from support.declared_sums import layer_sums_of, layer_values

N_LAYERS, D, SHARDS = 3, 16, 3


def partials(folder) -> dict:
    """Three shards' sums and moments of random vectors over overlapping types, every sum declared kept."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    inputs = {"partials": [], "moments": []}
    layer_sums = [item.name for item in kept_layer_sums({})]
    for shard in range(SHARDS):
        metadata = {"n_layers": N_LAYERS, "d": D, "shard": shard, "model_id": "m", "n_tokens": 100}
        types = np.array(sorted({f"t{i:03d}" for i in rng.integers(0, 80, 50)}), object)
        labels = np.repeat(np.arange(len(types)), rng.integers(1, 9, len(types)))
        points = [rng.normal(size=(len(labels), D)) for _ in range(N_LAYERS)]
        layers = [layer_sums_of(layer, types, labels, points[layer], {}) for layer in range(N_LAYERS)]
        write_sums(folder / f"{shard}.parquet", layers, D, metadata)
        schema = moments_schema(D, metadata, layer_sums=layer_sums)
        with LayerWriter(folder / f"{shard}.moments.parquet", schema) as writer:
            for layer, rows in enumerate(points):
                sum_, outer = rows.sum(axis=0), rows.T @ rows
                writer.write(moments_table(layer, len(rows), sum_, outer, schema, layer_values(rows, {})))
        inputs["partials"].append(str(folder / f"{shard}.parquet"))
        inputs["moments"].append(str(folder / f"{shard}.moments.parquet"))
    return inputs


def merged_outputs(folder) -> dict:
    return {name: str(folder / f"{name}.parquet") for name in ("stats", "tokens", "moments")}


def free_bytes(monkeypatch, free: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - free, free))


def test_the_estimate_bounds_what_the_merge_writes(tmp_path):
    inputs, outputs = partials(tmp_path / "partials"), merged_outputs(tmp_path / "merged")
    (tmp_path / "merged").mkdir()
    estimate = merge_output_bytes(inputs, outputs)
    merge_job(inputs, outputs)
    written = sum(os.path.getsize(path) for path in outputs.values())
    assert written <= estimate <= sum(os.path.getsize(path) for paths in inputs.values() for path in paths) * 2


def test_a_merge_that_cannot_fit_stops_before_writing_with_one_line(tmp_path, monkeypatch):
    inputs, outputs = partials(tmp_path / "partials"), merged_outputs(tmp_path / "merged")
    needed = merge_output_bytes(inputs, outputs)
    free_bytes(monkeypatch, needed - 1)
    with pytest.raises(DiskSpaceError) as error:
        merge_job(inputs, outputs)
    message = str(error.value)
    assert "\n" not in message
    assert f"in {tmp_path / 'merged'} need up to" in message
    assert f"({needed} bytes)" in message and f"({needed - 1} bytes) free" in message
    assert "free space on the results disk, or run in a folder on a larger one" in message
    assert not (tmp_path / "merged").exists() or not any((tmp_path / "merged").iterdir())
    monkeypatch.setenv("CTXVAR_SKIP_DISK_CHECK", "1")  # the estimate is an upper bound: the user may skip it
    merge_job(inputs, outputs)
    assert os.path.isfile(outputs["moments"])


def test_a_disk_that_fills_during_the_merge_ends_in_one_line_and_leaves_no_output(tmp_path, monkeypatch, capsys):
    inputs, outputs = partials(tmp_path / "partials"), merged_outputs(tmp_path / "merged")
    (tmp_path / "merged").mkdir()
    original = sums.LayerWriter.write

    def fill_the_disk_in_the_moments(self, table):  # the sums and tokens are whole by then
        if str(self.path).endswith("moments.parquet") and self._next_layer == 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        original(self, table)

    monkeypatch.setattr(sums.LayerWriter, "write", fill_the_disk_in_the_moments)
    log = tmp_path / "merge.log"
    with pytest.raises(SystemExit) as stop:
        with job_log(log):
            merge_job(inputs, outputs)
    assert stop.value.code == 1
    console = capsys.readouterr().err.splitlines()
    assert len(console) == 1 and console[0].startswith("ctxvar error: disk full while this job wrote its outputs")
    assert "free space on the results disk" in console[0] and str(log) in console[0]
    assert sorted(os.listdir(tmp_path / "merged")) == [], "no output, whole or partial, and no temporary file"


def test_a_damaged_partial_is_named_by_the_estimate_as_by_the_merge(tmp_path):
    from ctxvar.errors import IntegrityError

    inputs, outputs = partials(tmp_path / "partials"), merged_outputs(tmp_path / "merged")
    with open(inputs["partials"][1], "r+b") as handle:
        handle.seek(-8, os.SEEK_END)
        handle.write(b"\0" * 4)  # the footer's length
    with pytest.raises(IntegrityError, match=r"1.parquet: not a readable Parquet file"):
        merge_job(inputs, outputs)
