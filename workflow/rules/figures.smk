# Every figure but Figs. 1 and 8 (pca.smk): one rule per scope of ctxvar.figures.scopes that the run draws figures of,
# its name the scope's rule, one job per model or family the scope draws for (one for the run) that draws all the
# scope's figures in one process (plot_figure.py): a figure's imports cost more than its drawing.


for scope, figures in DRAWN_SCOPES.items():

    rule:
        name:
            scope.rule
        input:
            unpack(scope_inputs(figures)),
        output:
            png=scope_outputs(scope, figures, "png"),
            pdf=scope_outputs(scope, figures, "pdf"),
            data=scope_outputs(scope, figures, "csv"),
        log:
            logs(f"{scope.job_path}.log"),
        benchmark:
            benchmarks(f"{scope.job_path}.tsv")
        wildcard_constraints:
            **FIGURE_RUN.constraints(figures),
        localrule: True
        conda:
            "../../envs/analysis.yaml"
        params:
            figures=scope_params(figures),
        script:
            "../scripts/plot_figure.py"
