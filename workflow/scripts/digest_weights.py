from ctxvar.models.weight_digest import digest_weights
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    digest_weights(
        snakemake.params.model,
        snakemake.params.source,
        snakemake.output.digest,
        snakemake.threads,
    )
