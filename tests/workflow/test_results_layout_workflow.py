"""The workflow refuses, before any job, a results folder whose merged sums carry the older names."""

from __future__ import annotations

from support.workflow_runs import DEMO, snakemake


def test_merged_sums_under_the_older_names_stop_the_start_with_one_line(tmp_path):
    workdir = tmp_path / "work"
    old = workdir / "results" / DEMO["run"] / "tiny-bert" / "stats.parquet"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"")
    run = snakemake(workdir, DEMO, "-n")
    assert run.returncode == 1
    errors = [line for line in run.stderr.splitlines() if line.startswith("ctxvar error:")]
    assert errors == [
        f"ctxvar error: results/{DEMO['run']}/tiny-bert/stats.parquet: merged sums are named sums*.parquet now, not "
        "stats*.parquet, and these come from an older ctxvar that did not record their corpus sample (renamed, "
        f"load_results still refuses them); move results/{DEMO['run']} aside or delete it, and the run makes every "
        "file again"
    ], run.stderr[-2000:]
