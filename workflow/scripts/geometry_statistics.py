from ctxvar.files.atomic import write_csv
from ctxvar.run.job_log import job_log
from ctxvar.stats.geometry import geometry_table

with job_log(snakemake.log[0]):
    analysis = snakemake.params.analysis
    table = geometry_table(
        snakemake.input.sums,
        snakemake.input.get("moments"),
        snakemake.input.get("sample"),
        snakemake.params.spectrum_k,
        snakemake.params.seed,
        analysis["min_log10_n"],
        analysis["max_log10_n"],
        snakemake.params.sample_size,
        snakemake.params.batches,
        snakemake.input.get("words"),
        snakemake.input.get("sentences"),
    )
    write_csv(table, snakemake.output.geometry)
