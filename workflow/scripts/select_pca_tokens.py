from ctxvar.figures.pca_selection import select_pca_tokens
from ctxvar.files.atomic import write_csv
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    selection, components = select_pca_tokens(
        snakemake.input.sums,
        snakemake.input.tokens,
        snakemake.params.pca,
        snakemake.params.analysis,
        snakemake.input.types,
    )
    write_csv(selection, snakemake.output.selection)
    write_csv(components, snakemake.output.components)
