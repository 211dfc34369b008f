from pathlib import Path

from ctxvar.extraction.extract import extract_shard
from ctxvar.extraction.settings import job_settings
from ctxvar.run.disk import check_free_space
from ctxvar.run.job_log import job_log
from ctxvar.stats.declarations import sums_files

with job_log(snakemake.log[0]):
    check_free_space(
        snakemake.config, Path(snakemake.output.partial).parents[2]
    )  # results/{run}/partials/{model}/{shard}
    settings = job_settings(snakemake, config_hash=snakemake.params.config_hash)
    extract_shard(
        snakemake.input.shard,
        snakemake.output.partial,
        settings,
        {kind: snakemake.output[kind] for kind in sums_files("", settings.geometry)},
        (snakemake.input.get("pca_types"), snakemake.output.pca_points),
        snakemake.input.get("weight_digest"),  # None: the job hashes the weights
    )
