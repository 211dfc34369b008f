from ctxvar.extract import extract_shard, job_settings
from ctxvar.jobs import job_log

with job_log(snakemake.log[0]):
    settings = job_settings(snakemake, config_hash=snakemake.params.config_hash)
    extract_shard(snakemake.input.shard, snakemake.output.partial, settings,
                  snakemake.output.get("moments"), snakemake.output.get("sample"))
