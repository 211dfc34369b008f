# figures.smk's rules, one per scope of ctxvar.figures.scopes that the run draws figures of: their outputs, inputs,
# params and wildcard constraints, all asked of FIGURE_RUN (the run's models as the scopes draw them); FIGURE_FILES,
# the files every figure writes; caption_file, a figure's caption in the report.


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
# {scope: the figures its rule draws}, for the scopes the run draws any of; PCA's plot_pca draws its own (pca.smk)
DRAWN_SCOPES = {
    scope: figures for scope in SCOPES if scope.call is not None and (figures := FIGURE_RUN.drawn(figures_of(scope)))
}
# report() takes a caption as a file (rendered with its job's params alone, not knowing which of the job's outputs it
# captions): one per figure, made anew at each start, removed when Snakemake exits
CAPTIONS = tempfile.TemporaryDirectory(prefix="ctxvar-captions-")


def figure_files():
    """Every file of every figure the run draws (rule all)."""
    stems = [stem for figure in FIGURES for stem in FIGURE_RUN.stems(figure)]
    return [results(f"{stem}.{ext}") for stem in stems for ext in FIGURE_FILES]


def caption_file(figure):
    """The report's caption of ``figure``: a file of its text, which the report's Jinja leaves as it is written
    (the text, not a param of its job: editing a caption redraws nothing)."""
    path = os.path.join(CAPTIONS.name, f"{figure.name}.rst")
    with open(path, "w", encoding="utf-8") as caption:
        caption.write(f"{{% raw %}}{figure.caption}{{% endraw %}}\n")
    return path


def scope_outputs(scope, figures, ext):
    """The ``ext`` file of each of ``figures``; the PNGs in the report."""
    paths = [results(f"{scope.figure_path(figure.name)}.{ext}") for figure in figures]
    if ext != "png":
        return paths
    return [report(path, **report_entry(scope, figure)) for path, figure in zip(paths, figures)]


def report_entry(scope, figure):
    """Where the report puts the figure: under its model (or All models) and its figure type, with its caption."""
    return {"caption": caption_file(figure), "category": scope.category, "subcategory": figure.group}


def scope_inputs(figures):
    """Only what the figures draw, so that a change elsewhere does not draw them again."""
    return lambda wildcards: {
        need: results(path) if isinstance(path, str) else [results(one) for one in path]
        for need, path in FIGURE_RUN.job_inputs(figures, dict(wildcards.items())).items()
    }


def scope_params(figures):
    """{figure: what its scope's call reads (ctxvar.figures.scopes.Scope.params)}, in the order of the outputs."""
    return lambda wildcards: {figure.name: FIGURE_RUN.params(figure, dict(wildcards.items())) for figure in figures}
