from ctxvar.extract import ExtractionSettings, extract_shard
from ctxvar.jobs import job_log

with job_log(snakemake.log[0]):
    settings = ExtractionSettings(
        model=snakemake.params.model,
        source=snakemake.params.source,
        dtype=snakemake.params.dtype,
        device=snakemake.config["device"],  # not a param: moving to another device must not re-run
        merge_markers=snakemake.params.tokens["merge_markers"],
        long_sentences=snakemake.params.tokens["long_sentences"],
        batch_tokens=snakemake.resources.batch_tokens,
        threads=snakemake.threads,
        config_hash=snakemake.params.config_hash,
        shard=int(snakemake.wildcards.shard),
    )
    extract_shard(snakemake.input.shard, snakemake.output.partial, settings)
