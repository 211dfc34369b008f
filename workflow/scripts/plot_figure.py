from ctxvar.figures.draw import draw
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    inputs = dict(snakemake.input.items())  # {need: its file, or its files, one per model drawn}
    wildcards = dict(snakemake.wildcards.items())
    outputs = zip(snakemake.output.png, snakemake.output.pdf, snakemake.output.data, strict=True)
    for (name, params), (png, pdf, data) in zip(snakemake.params.figures.items(), outputs, strict=True):
        save_plot(draw(name, inputs, {**wildcards, **params}), png, pdf, data)
