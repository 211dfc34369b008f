from pathlib import Path

from ctxvar.extraction.extract import extract_shard
from ctxvar.extraction.settings import job_settings
from ctxvar.run.disk import check_free_space
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    check_free_space(
        snakemake.config, Path(snakemake.output.partial).parents[2]
    )  # results/{run}/partials/{model}/{shard}
    settings = job_settings(snakemake, config_hash=snakemake.params.config_hash)
    extract_shard(
        snakemake.input.shard,
        snakemake.output.partial,
        settings,
        snakemake.output.get("moments"),
        snakemake.output.get("sample"),
        (snakemake.output.words, snakemake.output.sentences) if "words" in snakemake.output.keys() else None,
        (snakemake.input.get("pca_types"), snakemake.output.pca_points),
    )
