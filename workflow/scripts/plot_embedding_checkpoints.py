from ctxvar.figures.draw import embedding_checkpoint_figure
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    plot = embedding_checkpoint_figure(
        "embedding_matrices", snakemake.wildcards.family, snakemake.params.steps, snakemake.input.matrices
    )
    save_plot(plot, snakemake.output.png, snakemake.output.pdf, snakemake.output.data)
