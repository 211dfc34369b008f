from ctxvar.io import write_json
from ctxvar.jobs import job_log
from ctxvar.stats.merge import merge_moments, merge_partials, merge_sample_partials

# Both merge rules: a step of the running merge writes sums only; the model's last merge also tokens and run.
with job_log(snakemake.log[0]):
    outputs = snakemake.output.keys()
    run = merge_partials(
        snakemake.input.partials,
        snakemake.output.stats,
        snakemake.output.tokens if "tokens" in outputs else None,
        snakemake.params.config_hash,
    )
    if "moments" in outputs:
        merge_moments(snakemake.input.moments, snakemake.output.moments, run)
    if "sample" in outputs:
        merge_sample_partials(snakemake.input.sample, snakemake.output.sample, run)
    if "run" in outputs:
        write_json(run, snakemake.output.run)
