from ctxvar.files.atomic import write_csv
from ctxvar.run.job_log import job_log
from ctxvar.stats.layers import layers_table

with job_log(snakemake.log[0]):
    analysis = snakemake.params.analysis
    table = layers_table(snakemake.input.sums, analysis["min_log10_n"], analysis["max_log10_n"])
    write_csv(table, snakemake.output.layers)
