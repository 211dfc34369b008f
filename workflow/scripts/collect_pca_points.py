from ctxvar.extraction.pca_points import collect_points
from ctxvar.extraction.settings import job_settings
from ctxvar.jobs import job_log

with job_log(snakemake.log[0]):
    collect_points(
        snakemake.input.shard,
        snakemake.output.points,
        job_settings(snakemake),
        snakemake.input.selection,
        snakemake.input.components,
    )
