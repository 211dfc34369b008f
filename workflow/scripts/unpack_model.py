from ctxvar.models.build import build_model
from ctxvar.run.inputs import record_archive_inputs
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    build_model(snakemake.params.entry, snakemake.output.model)
    record_archive_inputs(snakemake.params.entry, snakemake.output.model)
