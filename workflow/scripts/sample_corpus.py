from ctxvar.corpus.sentences import write_sentences
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    write_sentences(snakemake.params.corpus, snakemake.output.sentences, snakemake.output.counts)
