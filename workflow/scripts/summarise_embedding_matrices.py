from ctxvar.files.atomic import write_csv
from ctxvar.run.job_log import job_log
from ctxvar.stats.summary import stack_layers

with job_log(snakemake.log[0]):
    tables = dict(zip(snakemake.params.models, snakemake.input.matrices))
    write_csv(stack_layers(tables), snakemake.output.matrices)
