from ctxvar.figures.draw import summary_figure
from ctxvar.figures.plotting import save_plot
from ctxvar.run.job_log import job_log

with job_log(snakemake.log[0]):
    plot = summary_figure(
        snakemake.wildcards.figure,
        snakemake.params.models,
        snakemake.params.analysis,
        layers_path=snakemake.input.get("layers"),
        tokens_paths=snakemake.input.get("tokens", ()),
        sentences_path=snakemake.input.get("sentences"),
        geometry_path=snakemake.input.get("geometry"),
        models_path=snakemake.input.get("models"),
    )
    save_plot(plot, snakemake.output.png, snakemake.output.pdf, snakemake.output.data)
