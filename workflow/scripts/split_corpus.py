from ctxvar.sharding import write_shards
from ctxvar.jobs import job_log

with job_log(snakemake.log[0]):
    write_shards(snakemake.input.sentences, list(snakemake.output.shards), snakemake.params.chunk_sentences)
