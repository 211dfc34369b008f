from ctxvar.figures.pca_plots import pca_outputs
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    pca_outputs(
        snakemake.input.points,
        snakemake.input.selection,
        snakemake.input.components,
        snakemake.input.tokens,
        snakemake.wildcards.model,
        snakemake.params.analysis,
        snakemake.output,
    )
