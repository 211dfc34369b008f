from ctxvar.jobs import job_log
from ctxvar.models.archive import unpack_model

with job_log(snakemake.log[0]):
    unpack_model(snakemake.params.entry, snakemake.output.model)
