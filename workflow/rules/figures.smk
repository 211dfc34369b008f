rule plot_model_figure:
    input:
        unpack(model_figure_inputs),
    output:
        png=report("results/{model}/figures/{figure}.png", caption="../report/figure.rst", category="{model}",
                   subcategory=figure_group),
        pdf="results/{model}/figures/{figure}.pdf",
        data="results/{model}/figures/{figure}.csv",
    wildcard_constraints:
        figure="|".join(MODEL_FIGURES),
    params:
        caption=figure_caption,
        analysis=figure_analysis,
    log:
        "logs/{model}/figures/{figure}.log",
    benchmark:
        "benchmarks/{model}/figures/{figure}.tsv"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/plot_model_figure.py"


rule plot_summary_figure:
    input:
        unpack(summary_figure_inputs),
    output:
        png=report("results/figures/{figure}.png", caption="../report/figure.rst", category="All models",
                   subcategory=figure_group),
        pdf="results/figures/{figure}.pdf",
        data="results/figures/{figure}.csv",
    wildcard_constraints:
        figure="|".join(SUMMARY_FIGURES),
    params:
        caption=figure_caption,
        models=figure_models,
        analysis=figure_analysis,
    log:
        "logs/figures/{figure}.log",
    benchmark:
        "benchmarks/figures/{figure}.tsv"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/plot_summary_figure.py"
