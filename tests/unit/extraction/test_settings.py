"""What an extraction job needs besides its shard and outputs (ctxvar.extraction.settings): the caps in megabytes as
bytes, none where 0, and a Snakemake job's params, config, resources, threads and shard read into them, the device and
the order from the config (not params, so that moving a run to another device re-runs nothing)."""

from __future__ import annotations

from types import SimpleNamespace

from ctxvar.extraction.accumulator import NO_GEOMETRY, GeometryOptions
from ctxvar.extraction.settings import ExtractionSettings, job_settings


class Named(dict):
    """A Snakemake job's ``params`` or ``resources``: names as attributes and ``get``."""

    __getattr__ = dict.__getitem__


def test_the_device_budget_resource_reaches_the_extraction_settings():
    """``max_device_mb`` of ``extract_statistics`` (a profile's set-resources) is the job's device budget."""
    from types import SimpleNamespace

    from ctxvar.extraction.settings import job_settings

    job = SimpleNamespace(
        params=Named(
            model={"id": "m"}, source="m", dtype="float32", tokens={"merge_markers": True, "long_sentences": "skip"}
        ),
        config={"device": "cpu", "extraction_order": "auto"},
        resources=Named(batch_tokens=256, max_state_mb=0, max_device_mb=300),
        threads=1,
        wildcards=SimpleNamespace(shard="0"),
    )
    assert job_settings(job).max_device_mb == 300
    del job.resources["max_device_mb"]
    assert job_settings(job).max_device_mb == 0


def snakemake_job(geometry: dict | None = None, **resources):
    """A Snakemake job of rule extract_statistics, as its script's ``snakemake`` object gives it."""
    tokens = {"merge_markers": False, "long_sentences": "split"}
    params = Named(model={"id": "m"}, source="org/m", dtype="bfloat16", tokens=tokens)
    if geometry is not None:
        params["geometry"] = geometry
    return SimpleNamespace(
        params=params,
        config={"device": "cuda", "extraction_order": "whole_model"},
        resources=Named(batch_tokens=1024, **resources),
        threads=3,
        wildcards=SimpleNamespace(shard="7"),
    )


def test_a_snakemake_job_gives_every_setting_its_rule_passes():
    settings = job_settings(snakemake_job(max_state_mb=50), config_hash="abc")
    assert (settings.model, settings.source, settings.dtype) == ({"id": "m"}, "org/m", "bfloat16")
    assert (settings.device, settings.extraction_order) == ("cuda", "whole_model")
    assert (settings.merge_markers, settings.long_sentences) == (False, "split")
    assert (settings.batch_tokens, settings.threads, settings.shard) == (1024, 3, 7)
    assert (settings.max_state_mb, settings.max_device_mb, settings.config_hash) == (50, 0, "abc")
    assert settings.geometry == NO_GEOMETRY and settings.sample_seed == 0


def test_a_jobs_geometry_becomes_its_options_and_the_samples_seed():
    geometry = {"covariance": True, "cosine": False, "ethayarajh": False, "twonn": True, "sample_size": 100}
    settings = job_settings(snakemake_job({**geometry, "batches": 3, "seed": 11}))
    assert settings.geometry == GeometryOptions(covariance=True, cosine=False, sample_size=300)
    assert settings.sample_seed == 11


def test_the_caps_are_bytes_and_none_where_unset():
    settings = ExtractionSettings(model={"id": "m"}, source="m")
    assert settings.max_state_bytes is None and settings.max_device_bytes is None
    settings = ExtractionSettings(model={"id": "m"}, source="m", max_state_mb=1.5, max_device_mb=2000)
    assert settings.max_state_bytes == 1_500_000 and settings.max_device_bytes == 2_000_000_000
