from ctxvar.figures.draw import draw
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    inputs = dict(snakemake.input.items())  # {need: its file, or its files, one per model drawn}
    params = {**dict(snakemake.wildcards.items()), **dict(snakemake.params.items())}
    plot = draw(snakemake.params.figure, inputs, params)
    save_plot(plot, snakemake.output.png, snakemake.output.pdf, snakemake.output.data)
