from ctxvar.corpus.shards import write_shards
from ctxvar.jobs import job_log

with job_log(snakemake.log[0]):
    assert len(snakemake.output.shards) == snakemake.params.n_shards
    write_shards(snakemake.input.sentences, list(snakemake.output.shards), snakemake.params.chunk_sentences)
