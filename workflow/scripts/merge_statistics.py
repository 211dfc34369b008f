from ctxvar.io import write_json
from ctxvar.jobs import job_log
from ctxvar.stats.merge import merge_moments, merge_partials, merge_sample_partials

with job_log(snakemake.log[0]):
    run = merge_partials(
        snakemake.input.partials, snakemake.output.stats, snakemake.output.tokens, snakemake.params.config_hash
    )
    if "moments" in snakemake.output.keys():
        merge_moments(snakemake.input.moments, snakemake.output.moments, run)
    if "sample" in snakemake.output.keys():
        merge_sample_partials(snakemake.input.sample, snakemake.output.sample, run)
    write_json(run, snakemake.output.run)
