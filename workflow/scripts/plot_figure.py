from ctxvar.figures.draw import draw_job
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    draw_job(
        snakemake.params.figures,  # {figure: its params}, in the order of the outputs
        dict(snakemake.input.items()),  # {need: its file, or its files, one per model drawn}
        dict(snakemake.wildcards.items()),
        zip(snakemake.output.png, snakemake.output.pdf, snakemake.output.data, strict=True),
    )
