# Every figure but Figs. 1 and 8 (pca.smk): one rule per scope of ctxvar.figures.scopes, its name the scope's rule,
# its jobs one per figure and model or family the scope draws it for, each running plot_figure.py.


for scope in DRAWN_SCOPES:

    rule:
        name:
            scope.rule
        input:
            unpack(scope_inputs(scope)),
        output:
            png=report(
                results(f"{scope.path}.png"),
                caption="../report/figure.rst",
                category=scope.category,
                subcategory=scope_group(scope),
            ),
            pdf=results(f"{scope.path}.pdf"),
            data=results(f"{scope.path}.csv"),
        log:
            logs(f"{scope.path}.log"),
        benchmark:
            benchmarks(f"{scope.path}.tsv")
        wildcard_constraints:
            **scope_constraints(scope),
        localrule: True
        conda:
            "../../envs/analysis.yaml"
        params:
            **scope_params(scope),
        script:
            "../scripts/plot_figure.py"
