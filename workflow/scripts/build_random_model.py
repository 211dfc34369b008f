from ctxvar.files.parquet import read_table
from ctxvar.models.build import build_model
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    texts = read_table(snakemake.input.sentences, columns=["text"]).column("text").to_pylist()
    keying = snakemake.params.type_keying or {}
    build_model(snakemake.params.entry, snakemake.output.model, texts, keying.get("merge_markers") is not False)
