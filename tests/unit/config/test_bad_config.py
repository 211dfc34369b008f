"""Bad config values stop the run at start-up with one readable line: the checks Snakemake's start-up runs
(workflow/rules/common.smk), in process. tests/workflow/test_workflow.py runs two of these through Snakemake."""

from __future__ import annotations

import pytest

from ctxvar.config.checks import check_config
from ctxvar.config.entries import models_by_id
from ctxvar.config.schema import check_schema
from ctxvar.errors import CtxvarError
from ctxvar.models.archive import check_archives

from support.workflow_runs import DEMO

NO_SUCH_ARCHIVE = {"archive": "m.zip", "sha256": {"model.safetensors": "0" * 64}}


def start_up_checks(config: dict, run_folder) -> None:
    """What the workflow checks before any job, in its order: schema, ctxvar's own checks, the model entries."""
    check_schema(config)
    check_config(config)
    check_archives(models_by_id(config), run_folder)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"corpus": {**DEMO["corpus"], "fraction": 0}}, "corpus.fraction: 0 is less than or equal to the minimum of 0"),
        ({"shards": 0}, "shards: 0 is less than the minimum of 1"),
        ({"dtype": "fp8"}, "dtype: 'fp8' is not allowed; use one of float32, bfloat16, float16"),
        ({"shards": "eight"}, "ctxvar error: shards: 'eight' is not a whole number"),
        ({"shards": 2.0}, "ctxvar error: shards: 2.0 is not a whole number"),
        (
            {"shards": 2**63},
            "ctxvar error: shards: 9223372036854775808 is greater than the maximum of 10000",
        ),
        (
            {"analysis": {"min_log10_n": 4, "max_log10_n": 2}},
            "ctxvar error: analysis: min_log10_n (4) is above max_log10_n (2)",
        ),
        (
            {"corpus": {**DEMO["corpus"], "source": "csv"}},
            "corpus.source: 'csv' is not allowed; use one of hf, text, parquet, jsonl",
        ),
        (
            {"corpus": {**DEMO["corpus"], "source": "text", "path": "missing.txt"}},
            "corpus.path: file not found: missing.txt",
        ),
        ({"modles": []}, "Additional properties are not allowed ('modles' was unexpected)"),
        (
            {"models": [{"name": "/data/checkpoints/my-bert"}]},  # the README's example path
            "ctxvar error: models[]: entry 'my-bert': /data/checkpoints/my-bert does not exist",
        ),
        (
            {"models": [{"id": "m", "init": "archive", "package": "ctxvar-no-such-package", **NO_SUCH_ARCHIVE}]},
            "ctxvar error: models[]: entry 'm': package 'ctxvar-no-such-package' is not installed",
        ),
        ({"models": DEMO["models"] + DEMO["models"][:1]}, "duplicate model id 'tiny-bert'"),
    ],
)
def test_bad_config_stops_before_any_job_with_a_readable_line(tmp_path, monkeypatch, change, message):
    monkeypatch.chdir(tmp_path)  # relative corpus paths resolve where Snakemake runs
    with pytest.raises(CtxvarError) as error:
        start_up_checks({**DEMO, **change}, tmp_path / "results" / "demo")
    assert message.removeprefix("ctxvar error: ") in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "results").exists()
