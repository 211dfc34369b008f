from ctxvar.config.hashes import CORPUS_HASH, corpus_hash
from ctxvar.files.atomic import read_json, write_json
from ctxvar.run.job_log import job_log
from ctxvar.stats.merge import merge_job
from ctxvar.stats.merge_io import run_io

# Both merge rules: a step of the running merge writes sums and its I/O record; the model's last merge also
# tokens and run.json, with the I/O of all the model's merges and the corpus sample its partials were extracted from
# (the merge refuses partials of another config_hash, which covers the corpus).
with job_log(snakemake.log[0]):
    outputs = {name: path for name, path in snakemake.output.items() if name not in ("run", "io", "io_checksum")}
    before = read_json(snakemake.input.io[0]) if snakemake.input.get("io") else None
    run, io = merge_job(dict(snakemake.input.items()), outputs, snakemake.params.config_hash, before)
    if "io" in snakemake.output.keys():
        write_json(io, snakemake.output.io)
    if "run" in snakemake.output.keys():
        corpus = corpus_hash(snakemake.params.corpus)
        write_json({**run, "io": run_io(io, outputs.values()), CORPUS_HASH: corpus}, snakemake.output.run)
