"""The partial files an extraction job writes a layer at a time (ctxvar.extraction.partials): the sums file, whose
columns after n are the declared sums the job's geometry keeps, and the moments and sample files only where the job
keeps them, each layer's values read back as written."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from ctxvar.extraction.accumulator import NO_GEOMETRY, GeometryOptions
from ctxvar.extraction.partials import PartialFiles, sum_names
from ctxvar.stats.sample_file import SampleFile, points
from ctxvar.stats.sums import MomentsFile, SumsFile

from support.declared_sums import layer_sums_of, layer_values

D, N_LAYERS = 4, 2
TYPES = np.array(["a", "b", "c"], object)
LABELS = np.array([0, 0, 1, 2, 2, 2])
SAMPLED = {  # two sampled positions, in key order
    "tokens": np.array([1, 4]),
    "key": np.array([3, 9], np.uint64),
    "sentence_id": np.array([0, 1]),
    "window": np.array([0, 0], np.int32),
    "position": np.array([2, 1], np.int32),
    "token": np.array(["a", "c"], object),
}


def host_layers(options: GeometryOptions, rows: list[np.ndarray]) -> list[tuple]:
    """Each layer as :func:`ctxvar.extraction.passes.host_layers` gives it: sums, (Σxxᵀ, per-layer sums), the
    sampled points, no word parts."""
    return [
        (
            layer_sums_of(layer, TYPES, LABELS, x, options),
            (x.T @ x if options.covariance else None, layer_values(x, options)),
            x[SAMPLED["tokens"]].astype(np.float32),
            (),
        )
        for layer, x in enumerate(rows)
    ]


def test_the_sums_columns_are_the_declared_sums_the_geometry_keeps():
    assert sum_names(NO_GEOMETRY)[:2] == ["sum_sq", "sum"] and "sum_unit" not in sum_names(NO_GEOMETRY)
    assert "sum_unit" in sum_names(GeometryOptions(cosine=True))


def test_each_layer_goes_into_the_files_the_job_keeps_and_reads_back_as_written(tmp_path):
    options = GeometryOptions(covariance=True, cosine=True, sample_size=2)
    rows = [np.random.default_rng(layer).normal(size=(len(LABELS), D)) for layer in range(N_LAYERS)]
    files = {"moments": tmp_path / "0.moments.parquet", "sample": tmp_path / "0.sample.parquet"}
    layers = host_layers(options, rows)
    with ExitStack() as opened:
        partial = PartialFiles(opened, tmp_path / "0.parquet", files, D, {"n_layers": N_LAYERS}, options, SAMPLED)
        partial.write(layers[:1])
        partial.write(layers[1:])
    sums, moments, sample = SumsFile(tmp_path / "0.parquet"), MomentsFile(files["moments"]), SampleFile(files["sample"])
    assert list(sums.types()) == list(TYPES) and sums.held() == tuple(sum_names(options))
    for layer, x in enumerate(rows):
        read = sums.layer(layer)
        np.testing.assert_array_equal(read.count, [2, 1, 3])
        for name, values in layers[layer][0].sums.items():
            np.testing.assert_array_equal(read.sums[name], values)
        n, total, outer = moments.layer(layer)
        assert n == len(LABELS)
        np.testing.assert_allclose(total, x.sum(axis=0), rtol=1e-15)
        np.testing.assert_array_equal(outer, x.T @ x)
        table = sample.layer(layer)
        assert table.column("key").to_pylist() == [3, 9] and table.column("token").to_pylist() == ["a", "c"]
        np.testing.assert_array_equal(points(table), x[[1, 4]].astype(np.float32))


def test_a_job_without_moments_or_sample_writes_the_sums_file_alone(tmp_path):
    rows = [np.ones((len(LABELS), D)) * (layer + 1) for layer in range(N_LAYERS)]
    with ExitStack() as opened:
        partial = PartialFiles(opened, tmp_path / "0.parquet", {}, D, {"n_layers": N_LAYERS}, NO_GEOMETRY, None)
        assert partial.moments is None and partial.sample is None and partial.words is None
        partial.write(host_layers(NO_GEOMETRY, rows))
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.endswith(".sha256")) == ["0.parquet"]
    np.testing.assert_array_equal(SumsFile(tmp_path / "0.parquet").layer(1).sum, [[4.0] * D, [2.0] * D, [6.0] * D])
