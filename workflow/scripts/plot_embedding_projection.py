from ctxvar.figures.draw import embedding_projection_figure
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    plot = embedding_projection_figure(
        "emb01_projection", snakemake.wildcards.model, snakemake.input.projection, snakemake.input.matrices
    )
    save_plot(plot, snakemake.output.png, snakemake.output.pdf, snakemake.output.data)
