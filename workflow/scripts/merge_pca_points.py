from ctxvar.extraction.pca_points import merge_points
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    merge_points(snakemake.input.points, snakemake.output.points)
