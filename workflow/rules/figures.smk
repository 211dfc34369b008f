rule plot_model_figure:
    input:
        unpack(model_figure_inputs),
    output:
        png=report(
            results("{model}/figures/{figure}.png"),
            caption="../report/figure.rst",
            category="{model}",
            subcategory=figure_group,
        ),
        pdf=results("{model}/figures/{figure}.pdf"),
        data=results("{model}/figures/{figure}.csv"),
    log:
        logs("{model}/figures/{figure}.log"),
    benchmark:
        benchmarks("{model}/figures/{figure}.tsv")
    wildcard_constraints:
        figure="|".join([*MODEL_FIGURES, *GEOMETRY_MODEL_FIGURES]),
    conda:
        "../../envs/analysis.yaml"
    params:
        caption=figure_caption,
        analysis=figure_analysis,
    script:
        "../scripts/plot_model_figure.py"


rule plot_summary_figure:
    input:
        unpack(summary_figure_inputs),
    output:
        png=report(
            results("figures/{figure}.png"),
            caption="../report/figure.rst",
            category="All models",
            subcategory=figure_group,
        ),
        pdf=results("figures/{figure}.pdf"),
        data=results("figures/{figure}.csv"),
    log:
        logs("figures/{figure}.log"),
    benchmark:
        benchmarks("figures/{figure}.tsv")
    wildcard_constraints:
        figure="|".join([*SUMMARY_FIGURES, *GEOMETRY_SUMMARY_FIGURES]),
    conda:
        "../../envs/analysis.yaml"
    params:
        caption=figure_caption,
        models=figure_models,
        analysis=figure_analysis,
    script:
        "../scripts/plot_summary_figure.py"


rule plot_checkpoints:
    input:
        unpack(checkpoint_inputs),
    output:
        png=report(
            results("figures/checkpoints/{family}.png"),
            caption="../report/figure.rst",
            category="All models",
            subcategory=CHECKPOINT_FIGURE.group,
        ),
        pdf=results("figures/checkpoints/{family}.pdf"),
        data=results("figures/checkpoints/{family}.csv"),
    log:
        logs("figures/checkpoints/{family}.log"),
    benchmark:
        benchmarks("figures/checkpoints/{family}.tsv")
    wildcard_constraints:
        family="|".join(re.escape(f) for f in FORWARD_FAMILIES) or "$^",
    conda:
        "../../envs/analysis.yaml"
    params:
        caption=CHECKPOINT_FIGURE.caption,
        steps=lambda wildcards: {model: MODELS[model]["step"] for model in FAMILIES[wildcards.family]},
    script:
        "../scripts/plot_checkpoints.py"


rule plot_embedding_projection:
    input:
        projection=results("{model}/embedding_projection.parquet"),
        matrices=results("{model}/embedding_matrices.csv"),
    output:
        png=report(
            results("{model}/figures/emb01_projection.png"),
            caption="../report/figure.rst",
            category="{model}",
            subcategory=EMBEDDING_PROJECTION_FIGURE.group,
        ),
        pdf=results("{model}/figures/emb01_projection.pdf"),
        data=results("{model}/figures/emb01_projection.csv"),
    log:
        logs("{model}/figures/emb01_projection.log"),
    benchmark:
        benchmarks("{model}/figures/emb01_projection.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        caption=EMBEDDING_PROJECTION_FIGURE.caption,
    script:
        "../scripts/plot_embedding_projection.py"


rule plot_embedding_checkpoints:
    input:
        unpack(embedding_checkpoint_inputs),
    output:
        png=report(
            results("figures/checkpoints/embedding_matrices/{family}.png"),
            caption="../report/figure.rst",
            category="All models",
            subcategory=EMBEDDING_CHECKPOINT_FIGURE.group,
        ),
        pdf=results("figures/checkpoints/embedding_matrices/{family}.pdf"),
        data=results("figures/checkpoints/embedding_matrices/{family}.csv"),
    log:
        logs("figures/checkpoints/embedding_matrices/{family}.log"),
    benchmark:
        benchmarks("figures/checkpoints/embedding_matrices/{family}.tsv")
    wildcard_constraints:
        family="|".join(re.escape(f) for f in FAMILIES) or "$^",
    conda:
        "../../envs/analysis.yaml"
    params:
        caption=EMBEDDING_CHECKPOINT_FIGURE.caption,
        steps=lambda wildcards: {model: MODELS[model]["step"] for model in FAMILIES[wildcards.family]},
    script:
        "../scripts/plot_embedding_checkpoints.py"


rule plot_across_checkpoints:
    input:
        unpack(across_checkpoint_inputs),
    output:
        png=report(
            results("figures/across_checkpoints/{figure}.png"),
            caption="../report/figure.rst",
            category="All models",
            subcategory=lambda wildcards: ACROSS_CHECKPOINT_FIGURES[wildcards.figure].group,
        ),
        pdf=results("figures/across_checkpoints/{figure}.pdf"),
        data=results("figures/across_checkpoints/{figure}.csv"),
    log:
        logs("figures/across_checkpoints/{figure}.log"),
    benchmark:
        benchmarks("figures/across_checkpoints/{figure}.tsv")
    wildcard_constraints:
        figure="|".join(ACROSS_CHECKPOINT_FIGURES),
    conda:
        "../../envs/analysis.yaml"
    params:
        caption=lambda wildcards: ACROSS_CHECKPOINT_FIGURES[wildcards.figure].caption,
        families=across_checkpoint_steps,
    script:
        "../scripts/plot_across_checkpoints.py"
