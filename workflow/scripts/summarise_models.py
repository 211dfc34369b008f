from ctxvar.files.atomic import write_csv
from ctxvar.run.job_log import job_log
from ctxvar.stats.summary import summary_tables

with job_log(snakemake.log[0]):
    models = snakemake.params.models
    layers, geometry, table = summary_tables(
        dict(zip(models, snakemake.input.layers)),
        dict(zip(models, snakemake.input.geometry)),
        dict(zip(models, snakemake.input.runs)),
        snakemake.params.families,
    )
    write_csv(layers, snakemake.output.layers)
    write_csv(geometry, snakemake.output.geometry)
    write_csv(table, snakemake.output.models)
