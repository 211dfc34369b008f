from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.figures.pca_selection import select_pca_types
from ctxvar.files.atomic import write_csv
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    tokens = snakemake.params.tokens
    job = ExtractionSettings(
        model=snakemake.params.model,
        source=snakemake.params.source,
        merge_markers=tokens["merge_markers"],
        long_sentences=tokens["long_sentences"],
    )
    types = select_pca_types(list(snakemake.input.shards), job, snakemake.params.pca, snakemake.params.analysis)
    write_csv(types, snakemake.output.types)
