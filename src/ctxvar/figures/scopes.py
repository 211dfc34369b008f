"""The scopes a figure is drawn in, each declared once as a :class:`Scope`: where its files go, the inputs its
figures can need, for which models or checkpoint families it is drawn, and how its draw function is called.

Every scope but Fig. 1's is one rule of workflow/rules/figures.smk, made there in a loop over :data:`SCOPES` when the
run draws any of its figures, with one job per model or family the scope draws for (one for the run), which draws all
the scope's figures in one process (workflow/scripts/plot_figure.py; a figure's imports cost more than its drawing):
:func:`ctxvar.figures.draw.draw_job` draws each as :func:`ctxvar.figures.draw.draw` does, reading what the figure needs
and passing it as the scope's ``call`` says. :data:`PCA`'s figures are drawn by pca.smk's ``plot_pca``, with Table 2.
The inputs (:data:`NEEDS`) are read by the models that run over the corpus (``layers``, ``geometry``, ``tokens``,
``sentences``), by those with weight matrices (``projection``, ``embedding_matrices``) or by every model (``models``): a
figure is drawn for (or across) the models, or the checkpoint families, that have all it needs.

Nothing here draws, and the modules it imports import matplotlib only when they draw: the workflow reads the
scopes and the catalogue at start-up.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from ctxvar.errors import InsufficientData
from ctxvar.figures import embedding_plots, geometry_plots
from ctxvar.figures.plotting import Plot
from ctxvar.files.atomic import read_csv
from ctxvar.files.parquet import read_table
from ctxvar.stats.provenance import check_same_sums, table_sums
from ctxvar.stats.token_table import TokenStats

FORWARD, WEIGHTED, EVERY = "forward", "weighted", "every"  # the models that have an input: see FigureRun.models


@dataclass(frozen=True)
class Need:
    """An input a figure can need: which models have it (:data:`FORWARD`: those that run over the corpus,
    :data:`WEIGHTED`: those with weight matrices, :data:`EVERY`) and what a draw function gets of its file."""

    models: str
    read: Callable


NEEDS = {
    "layers": Need(FORWARD, read_csv),  # layers.csv, one model's or summary/layers.csv, as a DataFrame
    "geometry": Need(FORWARD, read_csv),  # geometry.csv, likewise
    "tokens": Need(FORWARD, TokenStats),  # tokens.parquet, read a layer at a time
    "sentences": Need(FORWARD, lambda path: path),  # the sampled corpus: read by the draw function
    "models": Need(EVERY, read_csv),  # summary/models.csv, written with the summary tables
    "projection": Need(WEIGHTED, lambda path: read_table(path).to_pandas()),  # embedding_projection.parquet
    "embedding_matrices": Need(WEIGHTED, read_csv),  # embedding_matrices.csv
}

DRAWN = {  # how a scope is drawn: its wildcards, the params its rule passes for each of its figures
    "model": "one set per model that has the figure's inputs: {model}",
    "run": "one across all the models that have them: params models",
    "corpus": "one of the run's sampled corpus, not drawn again when the models change: no params",
    "family": "one per checkpoint family whose checkpoints have them: {family}, params steps",
    "families": "one across all those families: params families",
    "pca model": "Fig. 1's model (figures.pca.model) alone, by its own rule",
}


@dataclass(frozen=True, eq=False)
class Scope:
    """Where a figure is drawn and how. ``path``: its files in results/{run}/ without the extension, with the
    wildcards ``drawn`` gives it ({model} or {family}) and {figure}, the figure's name, unless the scope holds one
    figure; ``inputs``: need (of :data:`NEEDS`) → its file in results/{run}/, where {model} is the model drawn or
    each model drawn across (a list of files, in the order of the models or checkpoints passed); ``call(figure,
    inputs, params)``: the figure drawn from its inputs' paths and its rule's params and wildcards (None: drawn by
    a rule of its own)."""

    rule: str  # the rule that draws its figures
    path: str
    drawn: str  # a key of DRAWN
    inputs: dict[str, str] = field(default_factory=dict)
    call: Callable[..., Plot] | None = None

    @property
    def category(self) -> str:
        """The report's category: the model, or "All models" for a figure across them."""
        return "{model}" if "{model}" in self.path else "All models"

    @property
    def params(self) -> tuple[str, ...]:
        """What its rule passes for each of its figures, for ``call`` to read: the frequency filter
        (``analysis``) where it reads tokens.parquet ({} for a figure that does not), and as ``drawn`` says the
        model ids in order (``models``), a family's {id: step} (``steps``) or every family's (``families``)."""
        drawn = {"run": ("models",), "family": ("steps",), "families": ("families",)}.get(self.drawn, ())
        return (("analysis",) if "tokens" in self.inputs else ()) + drawn

    def figure_path(self, name: str) -> str:
        """The files of figure ``name`` without their extension, the scope's {model} or {family} left in: the
        outputs of the scope's rule."""
        return self.path.replace("{figure}", name)

    @property
    def job_path(self) -> str:
        """The log and benchmark of a job of the scope's rule without their extension: its path with the rule's
        name for {figure}, since one job draws all its figures of a model, a family or the run."""
        return self.path.replace("{figure}", self.rule)

    def stem(self, name: str, wildcards: dict) -> str:
        """The file name of figure ``name`` without its extension: what a placeholder for it is called."""
        return self.path.rsplit("/", 1)[-1].format_map({**wildcards, "figure": name})


def paths(value) -> list:
    """A need's files as a list: Snakemake gives a single file as a string."""
    return [value] if isinstance(value, (str, os.PathLike)) else list(value)


def read_each(need: str, files, models) -> dict:
    """{model: what a draw function gets of its file}, ``files`` in the order of ``models``."""
    return {model: NEEDS[need].read(path) for model, path in zip(models, paths(files), strict=True)}


def per_model(figure, inputs: dict, params: dict) -> Plot:
    """What the figure needs, each as :data:`NEEDS` reads it, then the model id, then, for a figure of
    tokens.parquet, the frequency filter (params ``analysis``)."""
    read = [NEEDS[need].read(inputs[need]) for need in figure.needs]
    return figure.draw(*read, params["model"], *([params["analysis"]] if "tokens" in figure.needs else []))


def across_models(figure, inputs: dict, params: dict) -> Plot:
    """``{model: TokenStats}`` of each model's tokens.parquet and the frequency filter; or the summary tables the
    figure needs (stacked layers, stacked geometry, models.csv: DataFrames, all written by one job that checks they
    come from the same sums) and the model ids in order (params ``models``)."""
    if figure.needs == ("tokens",):
        return figure.draw(read_each("tokens", inputs["tokens"], params["models"]), params["analysis"])
    return figure.draw(*(NEEDS[need].read(inputs[need]) for need in figure.needs), params["models"])


def of_corpus(figure, inputs: dict, params: dict) -> Plot:
    """The sampled corpus's file (read by the draw function)."""
    return figure.draw(inputs["sentences"])


def checkpoint_family(figure, inputs: dict, params: dict) -> Plot:
    """One family's checkpoints (params ``steps``, {id: step}, aligned with the files): each one's layers.csv and
    geometry.csv, which must come from the same sums (:func:`~ctxvar.stats.provenance.check_same_sums`), joined by
    layer (:func:`~ctxvar.figures.geometry_plots.checkpoint_table`), and the family."""
    steps = params["steps"]
    files = {need: dict(zip(steps, paths(inputs[need]), strict=True)) for need in ("layers", "geometry")}
    tables = {need: {model: read_csv(path) for model, path in each.items()} for need, each in files.items()}
    for model in steps:
        check_same_sums(
            model, {files[need][model]: table_sums(tables[need][model], files[need][model]) for need in files}
        )
    return figure.draw(geometry_plots.checkpoint_table(steps, tables["layers"], tables["geometry"]), params["family"])


def embedding_projection(figure, inputs: dict, params: dict) -> Plot:
    """The model's embedding_projection.parquet as a DataFrame, the model id, and the I(W) of each matrix from its
    embedding_matrices.csv (the same job writes both)."""
    read = {need: NEEDS[need].read(inputs[need]) for need in ("projection", "embedding_matrices")}
    return figure.draw(read["projection"], params["model"], read["embedding_matrices"])


def embedding_family(figure, inputs: dict, params: dict) -> Plot:
    """One family's checkpoints' embedding_matrices.csv stacked with their ids and steps (params ``steps``)
    (:func:`~ctxvar.figures.embedding_plots.checkpoint_table`), and the family."""
    tables = read_each("embedding_matrices", inputs["embedding_matrices"], params["steps"])
    return figure.draw(embedding_plots.checkpoint_table(params["steps"], tables), params["family"])


def across_checkpoint_table(families: dict[str, dict[str, int]], tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Each checkpoint's table stacked, with ``family``, ``model`` and ``step`` first; ``families`` is
    {family: {id: step}}, ``tables`` {id: its geometry.csv or embedding_matrices.csv}."""
    frames = [
        tables[model].assign(family=family, model=model, step=step)
        for family, steps in families.items()
        for model, step in steps.items()
    ]
    if not frames:
        raise InsufficientData("the run has no training checkpoints (no models[] entry with revisions)")
    table = pd.concat(frames, ignore_index=True)
    first = ["family", "model", "step"]
    return table[[*first, *(column for column in table if column not in first)]]


def across_families(figure, inputs: dict, params: dict) -> Plot:
    """Every family's checkpoints at once (params ``families``, {family: {id: step}}, whose ids align with the
    files): the one table the figure needs of each, stacked by :func:`across_checkpoint_table`."""
    (need,) = figure.needs
    models = [model for steps in params["families"].values() for model in steps]
    return figure.draw(across_checkpoint_table(params["families"], read_each(need, inputs[need], models)))


MODEL = Scope(
    "plot_model_figure",
    "{model}/figures/{figure}",
    "model",
    {"layers": "{model}/layers.csv", "tokens": "{model}/tokens.parquet", "geometry": "{model}/geometry.csv"},
    per_model,
)
SUMMARY = Scope(
    "plot_summary_figure",
    "figures/{figure}",
    "run",
    {
        "layers": "summary/layers.csv",
        "geometry": "summary/geometry.csv",
        "tokens": "{model}/tokens.parquet",
        "models": "summary/models.csv",
    },
    across_models,
)
CORPUS = Scope("plot_corpus_figure", "figures/{figure}", "corpus", {"sentences": "corpus/sentences.parquet"}, of_corpus)
PCA = Scope("plot_pca", "{model}/figures/{figure}", "pca model")  # pca.smk: from the selected types' points
CHECKPOINTS = Scope(
    "plot_checkpoints",
    "figures/checkpoints/{family}",
    "family",
    {"layers": "{model}/layers.csv", "geometry": "{model}/geometry.csv"},
    checkpoint_family,
)
EMBEDDING_PROJECTION = Scope(
    "plot_embedding_projection",
    "{model}/figures/emb01_projection",
    "model",
    {"projection": "{model}/embedding_projection.parquet", "embedding_matrices": "{model}/embedding_matrices.csv"},
    embedding_projection,
)
EMBEDDING_CHECKPOINTS = Scope(
    "plot_embedding_checkpoints",
    "figures/checkpoints/embedding_matrices/{family}",
    "family",
    {"embedding_matrices": "{model}/embedding_matrices.csv"},
    embedding_family,
)
ACROSS_CHECKPOINTS = Scope(
    "plot_across_checkpoints",
    "figures/across_checkpoints/{figure}",
    "families",
    {"geometry": "{model}/geometry.csv", "embedding_matrices": "{model}/embedding_matrices.csv"},
    across_families,
)
SCOPES = (MODEL, SUMMARY, CORPUS, PCA, CHECKPOINTS, EMBEDDING_PROJECTION, EMBEDDING_CHECKPOINTS, ACROSS_CHECKPOINTS)


@dataclass(frozen=True)
class FigureRun:
    """A run's models as the scopes draw them: ``forward`` (those that run over the corpus), ``weighted`` (those
    with weight matrices) and ``every`` model, in config order; ``families`` {family: {id: step}}, ids by step;
    ``pca_model`` (figures.pca's, or None); the ``geometry`` switches and the ``analysis`` settings of the config.
    The workflow's rules ask it which files each figure has (:meth:`stems`), and a job's inputs and params."""

    forward: list[str]
    weighted: list[str]
    every: list[str]
    families: dict[str, dict[str, int]]
    pca_model: str | None = None
    geometry: dict = field(default_factory=dict)
    analysis: dict = field(default_factory=dict)

    def models(self, needs) -> list[str]:
        """The models that have every input of ``needs``, in config order."""
        have = {FORWARD: set(self.forward), WEIGHTED: set(self.weighted), EVERY: set(self.every)}
        return [model for model in self.every if all(model in have[NEEDS[need].models] for need in needs)]

    def families_with(self, needs) -> dict[str, dict[str, int]]:
        """The checkpoint families whose checkpoints have every input of ``needs``."""
        models = set(self.models(needs))
        return {family: steps for family, steps in self.families.items() if set(steps) <= models}

    def instances(self, figure) -> list[dict]:
        """The wildcards of each job that draws the figure ({model} or {family}; {} for a job across them): none
        when no model or family has what it needs, or when config ``geometry`` switches its metric off."""
        if not figure.drawn_with(self.geometry):
            return []

        def across() -> list[dict]:
            return [{}] if self.models(figure.needs) else []

        drawn = {
            "model": lambda: [{"model": model} for model in self.models(figure.needs)],
            "run": across,
            "corpus": across,
            "family": lambda: [{"family": family} for family in self.families_with(figure.needs)],
            "families": lambda: [{}] if self.families_with(figure.needs) else [],
            "pca model": lambda: [{"model": self.pca_model}] if self.pca_model is not None else [],
        }
        return drawn[figure.scope.drawn]()

    def stems(self, figure) -> list[str]:
        """The figure's files in results/{run}/ without their extension, one per job that draws it."""
        return [figure.scope.figure_path(figure.name).format_map(wildcards) for wildcards in self.instances(figure)]

    def drawn(self, figures) -> list:
        """Those of one scope's ``figures`` that the run draws, in their order: the outputs of each job of the
        scope's rule, which must therefore be drawn for the same models or families (a figure whose inputs other
        models have belongs in a scope of its own)."""
        instances = {figure: self.instances(figure) for figure in figures}
        drawn = [figure for figure in figures if instances[figure]]
        if len({repr(instances[figure]) for figure in drawn}) > 1:
            raise ValueError(
                f"the figures of rule {drawn[0].scope.rule} are drawn for different models or families: "
                f"{', '.join(f'{figure.name} for {instances[figure]}' for figure in drawn)}; declare those "
                "drawn for other ones in a scope of their own"
            )
        return drawn

    def drawn_models(self, figure, wildcards: dict) -> list[str]:
        """The models a job of ``figure`` draws: the one of its wildcards, or those it is drawn across, in the
        order the draw function is given them."""
        if "model" in wildcards:
            return [wildcards["model"]]
        if figure.scope.drawn == "family":
            return list(self.families_with(figure.needs)[wildcards["family"]])
        if figure.scope.drawn == "families":
            return [model for steps in self.families_with(figure.needs).values() for model in steps]
        return self.models(figure.needs)

    def inputs(self, figure, wildcards: dict) -> dict:
        """{need: its file in results/{run}/, or a list of files, one per model drawn}: only what the figure needs,
        so that a change elsewhere does not draw it again (Fig. 9, of the corpus alone, when the models change)."""
        models = self.drawn_models(figure, wildcards)
        inputs = {}
        for need in figure.needs:
            pattern = figure.scope.inputs[need]
            many = "{model}" in pattern and "model" not in wildcards
            inputs[need] = [pattern.format(model=model) for model in models] if many else pattern.format_map(wildcards)
        return inputs

    def params(self, figure, wildcards: dict) -> dict:
        """The values of its scope's :attr:`Scope.params` for a job of ``figure``."""
        values = {
            "analysis": lambda: self.analysis if "tokens" in figure.needs else {},
            "models": lambda: self.models(figure.needs),
            "steps": lambda: self.families_with(figure.needs)[wildcards["family"]],
            "families": lambda: self.families_with(figure.needs),
        }
        return {name: values[name]() for name in figure.scope.params}

    def job_inputs(self, figures, wildcards: dict) -> dict:
        """{need: its file or files} of a job that draws ``figures`` (:meth:`inputs` of each, together): a need
        the figures share must name the same files for each."""
        inputs = {}
        for figure in figures:
            for need, files in self.inputs(figure, wildcards).items():
                if inputs.setdefault(need, files) != files:
                    raise ValueError(f"{figure.name} reads other {need} files than the figures before it: {files}")
        return inputs

    def constraints(self, figures) -> dict[str, str]:
        """The wildcard constraints of the rule of one scope's ``figures``: {family} one of the families any of
        them is drawn for ("$^", nothing, when none is)."""
        (scope,) = {figure.scope for figure in figures}
        if "{family}" not in scope.path:
            return {}
        families = {family: None for figure in figures for family in self.families_with(figure.needs)}
        return {"family": "|".join(re.escape(family) for family in families) or "$^"}
