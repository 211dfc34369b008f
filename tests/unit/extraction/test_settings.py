"""What an extraction job needs besides its shard and outputs (ctxvar.extraction.settings): what it measures, from the
job's params, each read by the extraction hash, and how it runs, from its config, resources and threads, none read by
the hash (moving a run to another device re-runs nothing); the caps in megabytes as bytes, none where 0."""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace

from ctxvar.extraction.accumulator import NO_GEOMETRY, GeometryOptions
from ctxvar.extraction.settings import ExecutionSettings, ExtractionSettings, MeasuredSettings, job_settings


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


def execution_of(settings: ExtractionSettings) -> dict:
    return {item.name: getattr(settings, item.name) for item in fields(ExecutionSettings)}


def test_the_settings_are_what_the_job_measures_and_how_it_runs_and_nothing_else():
    names = [{item.name for item in fields(kind)} for kind in (MeasuredSettings, ExecutionSettings)]
    assert not names[0] & names[1]
    assert {item.name for item in fields(ExtractionSettings)} == names[0] | names[1] | {"config_hash", "shard"}


def test_the_measured_settings_come_from_the_params_and_the_others_from_outside_them():
    """Snakemake re-runs a job whose params changed: what the job measures comes from its params alone, and how it
    runs from its config, resources and threads, which change nothing it measures."""
    job = snakemake_job(
        {"covariance": True, "cosine": True, "ethayarajh": False, "twonn": False, "sample_size": 8, "seed": 2}
    )
    settings = job_settings(job)
    moved = SimpleNamespace(
        **{**vars(job), "config": {"device": "cpu", "extraction_order": "layer_major"}, "threads": 1},
    )
    moved.resources = Named(batch_tokens=64, max_state_mb=5, max_device_mb=7)
    elsewhere = job_settings(moved)
    assert elsewhere.measured() == settings.measured()
    assert all(
        execution_of(elsewhere)[name] != value for name, value in execution_of(settings).items() if name != "progress"
    )
    job.params.update(dtype="float32", tokens={"merge_markers": True, "long_sentences": "skip"})
    assert execution_of(job_settings(job)) == execution_of(settings)


HASHED_CONFIG = {
    "corpus": {"source": "synthetic"},
    "shards": 2,
    "dtype": "float32",
    "tokens": {"merge_markers": True, "long_sentences": "skip"},
    "geometry": {"covariance": True, "cosine": True, "ethayarajh": False, "twonn": True, "sample_size": 64, "seed": 0},
    "device": "auto",
    "extraction_order": "auto",
}
MODEL = {"id": "m", "name": "org/m"}
# Each measured setting and a config change that changes it (model and source: the entry's name)
MEASURED_BY = {
    "model": lambda config, model: (config, {**model, "name": "org/other"}),
    "source": lambda config, model: (config, {**model, "name": "/data/m"}),
    "dtype": lambda config, model: ({**config, "dtype": "bfloat16"}, model),
    "merge_markers": lambda config, model: ({**config, "tokens": {**config["tokens"], "merge_markers": False}}, model),
    "long_sentences": lambda config, model: (
        {**config, "tokens": {**config["tokens"], "long_sentences": "split"}},
        model,
    ),
    "geometry": lambda config, model: ({**config, "geometry": {**config["geometry"], "covariance": False}}, model),
    "sample_seed": lambda config, model: ({**config, "geometry": {**config["geometry"], "seed": 1}}, model),
}
# The execution settings the config holds (the others are a rule's resources and threads, which no hash reads)
EXECUTED_BY = {"device": "cuda", "extraction_order": "whole_model"}


def test_the_extraction_hash_reads_every_measured_setting_and_no_execution_setting():
    from ctxvar.config.hashes import extraction_config_hash

    assert set(MEASURED_BY) == {item.name for item in fields(MeasuredSettings)}
    assert set(EXECUTED_BY) <= {item.name for item in fields(ExecutionSettings)}
    base = extraction_config_hash(HASHED_CONFIG, MODEL, [])
    for name, change in MEASURED_BY.items():
        assert extraction_config_hash(*change(HASHED_CONFIG, MODEL), []) != base, name
    for name, value in EXECUTED_BY.items():
        assert extraction_config_hash({**HASHED_CONFIG, name: value}, MODEL, []) == base, name
