from ctxvar.corpus.shards import split_corpus
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    assert len(snakemake.output.shards) == snakemake.params.n_shards
    split_corpus(
        snakemake.input.sentences, list(snakemake.output.shards), snakemake.params.model, snakemake.params.source
    )
