from pathlib import Path

from ctxvar.run.hf_cache import release_snapshot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    record = Path(snakemake.output.record)  # results/{run}/{model}/hf_cache_release.json
    release_snapshot(snakemake.wildcards.model, snakemake.params.snapshot, record.parents[1], record)
