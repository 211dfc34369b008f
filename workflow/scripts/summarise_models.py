from ctxvar.io import write_csv
from ctxvar.jobs import job_log
from ctxvar.stats.summary import models_table, stack_layers

with job_log(snakemake.log[0]):
    models = snakemake.params.models
    write_csv(stack_layers(dict(zip(models, snakemake.input.layers))), snakemake.output.layers)
    write_csv(stack_layers(dict(zip(models, snakemake.input.geometry))), snakemake.output.geometry)
    write_csv(models_table(dict(zip(models, snakemake.input.runs)), snakemake.params.families), snakemake.output.models)
