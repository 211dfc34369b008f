from ctxvar.figures.draw import across_checkpoints_figure
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    plot = across_checkpoints_figure(snakemake.wildcards.figure, snakemake.params.families, snakemake.input.tables)
    save_plot(plot, snakemake.output.png, snakemake.output.pdf, snakemake.output.data)
