from ctxvar.run.job_log import job_log
from ctxvar.stats.embedding_matrices import embedding_matrix_statistics

with job_log(snakemake.log[0]):
    embedding_matrix_statistics(
        snakemake.params.model,
        snakemake.params.source,
        snakemake.params.dtype,
        snakemake.output.matrices,
        snakemake.output.projection,
    )
