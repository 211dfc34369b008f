from ctxvar.figures.draw import model_figure
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    plot = model_figure(
        snakemake.wildcards.figure,
        snakemake.wildcards.model,
        snakemake.params.analysis,
        layers_path=snakemake.input.get("layers"),
        tokens_path=snakemake.input.get("tokens"),
        geometry_path=snakemake.input.get("geometry"),
    )
    save_plot(plot, snakemake.output.png, snakemake.output.pdf, snakemake.output.data)
