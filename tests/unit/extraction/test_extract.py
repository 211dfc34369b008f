"""An extraction job's files by kind: exactly those its geometry keeps, refused before any model is loaded
otherwise."""

from __future__ import annotations

import pytest

from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.extract import extract_shard
from ctxvar.extraction.settings import ExtractionSettings

OPTIONS = GeometryOptions(covariance=True, sample_size=8)  # moments and sample beside the sums


@pytest.mark.parametrize(
    "files",
    [
        {"moments": "m.parquet"},  # the sample left out
        {"moments": "m.parquet", "sample": "s.parquet", "words": "w.parquet"},  # a kind the geometry does not keep
        {"moments": "m.parquet", "sample": None},  # None is no file
        {"moments_path": "m.parquet", "sample_path": "s.parquet"},  # the keywords extract_shard had before
    ],
)
def test_files_other_than_the_geometry_keeps_are_refused_before_the_model_loads(tmp_path, files):
    settings = ExtractionSettings(model={"id": "m"}, source=str(tmp_path / "no model"), geometry=OPTIONS)
    with pytest.raises(ValueError, match=r"the geometry keeps the files \['moments', 'sample'\], not"):
        extract_shard(tmp_path / "no shard.parquet", tmp_path / "sums.parquet", settings, files)
    assert list(tmp_path.iterdir()) == []
