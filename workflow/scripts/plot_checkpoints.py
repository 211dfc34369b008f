from ctxvar.figures.draw import checkpoint_figure
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    plot = checkpoint_figure(
        snakemake.wildcards.family, snakemake.params.steps, snakemake.input.layers, snakemake.input.geometry
    )
    save_plot(plot, snakemake.output.png, snakemake.output.pdf, snakemake.output.data)
