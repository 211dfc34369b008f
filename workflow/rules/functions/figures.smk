# figures.smk's rules, one per scope of ctxvar.figures.scopes: their targets, inputs, params and wildcard constraints,
# all asked of FIGURE_RUN (the run's models as the scopes draw them); FIGURE_FILES, the files every figure writes.


FIGURE_FILES = ("png", "pdf", "csv")  # the picture, for papers, and the numbers drawn
FIGURE_RUN = FigureRun(
    forward=FORWARD_MODELS,
    weighted=WEIGHTED_MODELS,
    every=list(MODELS),
    families={family: {model: MODELS[model]["step"] for model in ids} for family, ids in FAMILIES.items()},
    pca_model=PCA_MODEL,
    geometry=GEOMETRY,
    analysis=canonical(config["analysis"]),
)
DRAWN_SCOPES = [scope for scope in SCOPES if scope.call is not None]  # PCA's plot_pca draws its own (pca.smk)


def figure_files():
    """Every file of every figure the run draws (rule all)."""
    stems = [stem for figure in FIGURES for stem in FIGURE_RUN.stems(figure)]
    return [results(f"{stem}.{ext}") for stem in stems for ext in FIGURE_FILES]


def scope_figure(scope):
    """{wildcards} → the figure of a job of ``scope``'s rule: its {figure}, or the scope's one figure."""
    if "{figure}" in scope.path:
        return lambda wildcards: figure_named(wildcards.figure)
    (figure,) = figures_of(scope)
    return lambda wildcards: figure


def scope_value(scope, value):
    """``value(figure)`` for a rule's report entry or params: as a string for a scope of one figure (the rules'
    outputs as they were written by hand), else a function of the job's wildcards."""
    figure = scope_figure(scope)
    if "{figure}" not in scope.path:
        return value(figure(None))
    return lambda wildcards: value(figure(wildcards))


def scope_inputs(scope):
    """Only what the figure draws, so that a change elsewhere does not draw it again."""
    figure = scope_figure(scope)
    return lambda wildcards: {
        need: results(path) if isinstance(path, str) else [results(one) for one in path]
        for need, path in FIGURE_RUN.inputs(figure(wildcards), dict(wildcards.items())).items()
    }


def scope_params(scope):
    """The figure's name and caption (the report's, workflow/report/figure.rst), then what its scope's call reads
    (ctxvar.figures.scopes.Scope.params)."""
    figure = scope_figure(scope)
    return {
        "figure": scope_value(scope, lambda figure: figure.name),
        "caption": scope_value(scope, lambda figure: figure.caption),
        **{
            name: (lambda wildcards, name=name: FIGURE_RUN.params(figure(wildcards), dict(wildcards.items()))[name])
            for name in scope.params
        },
    }


def scope_constraints(scope):
    return FIGURE_RUN.constraints(figures_of(scope))


def scope_group(scope):
    """The report's subcategory: the figure type."""
    return scope_value(scope, lambda figure: figure.group)
