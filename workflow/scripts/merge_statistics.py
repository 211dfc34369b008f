from ctxvar.io import write_json
from ctxvar.jobs import job_log
from ctxvar.merge import merge_partials

with job_log(snakemake.log[0]):
    run = merge_partials(snakemake.input.partials, snakemake.output.stats, snakemake.output.tokens)
    write_json(run, snakemake.output.run)
