# figures.smk's inputs, captions and report groups, and FIGURE_FILES, the files every figure writes.


FIGURE_FILES = ("png", "pdf", "csv")  # the picture, for papers, and the numbers drawn


def figure_spec(wildcards):
    return {**MODEL_FIGURES, **SUMMARY_FIGURES, **GEOMETRY_MODEL_FIGURES, **GEOMETRY_SUMMARY_FIGURES}[wildcards.figure]


def figure_group(wildcards):
    """The report's subcategory: the figure type."""
    return figure_spec(wildcards).group


def figure_caption(wildcards):
    return figure_spec(wildcards).caption


def figure_needs(wildcards):
    return figure_spec(wildcards).needs


def model_figure_inputs(wildcards):
    """Only what the figure draws, so that a change elsewhere does not re-plot it."""
    inputs = {
        name: results(f"{wildcards.model}/{file}")
        for name, file in (("layers", "layers.csv"), ("tokens", "tokens.parquet"), ("geometry", "geometry.csv"))
    }
    return {name: path for name, path in inputs.items() if name in figure_needs(wildcards)}


def summary_figure_inputs(wildcards):
    """Only what the figure draws, so that e.g. Fig. 9 (corpus only) does not re-run when models change."""
    inputs = {
        "layers": results("summary/layers.csv"),
        "geometry": results("summary/geometry.csv"),
        "tokens": expand(results("{model}/tokens.parquet"), model=FORWARD_MODELS),
        "sentences": results("corpus/sentences.parquet"),
        "models": results("summary/models.csv"),
    }
    return {name: path for name, path in inputs.items() if name in figure_needs(wildcards)}


def figure_models(wildcards):
    """The model ids, for figures drawn from per-model files (their order sets legends and panels)."""
    return FORWARD_MODELS if {"layers", "geometry", "tokens"} & set(figure_needs(wildcards)) else []


def figure_analysis(wildcards):
    """The frequency filter, for figures that apply it themselves (those drawn from tokens.parquet)."""
    return canonical(config["analysis"]) if "tokens" in figure_needs(wildcards) else {}


def checkpoint_inputs(wildcards):
    members = FORWARD_FAMILIES[wildcards.family]
    return {
        "layers": expand(results("{model}/layers.csv"), model=members),
        "geometry": expand(results("{model}/geometry.csv"), model=members),
    }


def embedding_checkpoint_inputs(wildcards):
    return {"matrices": expand(results("{model}/embedding_matrices.csv"), model=FAMILIES[wildcards.family])}


def across_checkpoint_figures():
    """The entries of ACROSS_CHECKPOINT_FIGURES the run draws: each where a checkpoint family has its tables
    (geometry: a family that runs over the corpus), and of a geometry metric only with its geometry switch on. (A
    family has weights: the config refuses revisions of the Gaussian null, so every checkpoint has its
    embedding_matrices.csv.)"""
    drawn = accumulated(ACROSS_CHECKPOINT_FIGURES, GEOMETRY)
    return [figure for figure in drawn if across_checkpoint_families(figure)]


def across_checkpoint_families(figure):
    """{family: [ids]} the figure draws: the families with the tables it needs."""
    (need,) = ACROSS_CHECKPOINT_FIGURES[figure].needs
    return FORWARD_FAMILIES if need == "geometry" else FAMILIES


def across_checkpoint_steps(wildcards):
    """{family: {id: step}}, the ids in step order, as the draw function reads the inputs' order."""
    families = across_checkpoint_families(wildcards.figure)
    return {family: {model: MODELS[model]["step"] for model in ids} for family, ids in families.items()}


def across_checkpoint_inputs(wildcards):
    """Each checkpoint's table the figure draws, in the order of across_checkpoint_steps."""
    file = {"geometry": "geometry.csv", "embedding_matrices": "embedding_matrices.csv"}
    (need,) = ACROSS_CHECKPOINT_FIGURES[wildcards.figure].needs
    families = across_checkpoint_families(wildcards.figure)
    return {"tables": [results(f"{model}/{file[need]}") for ids in families.values() for model in ids]}
