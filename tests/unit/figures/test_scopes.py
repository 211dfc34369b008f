"""Unit tier: the scopes figures are drawn in (ctxvar.figures.scopes), in a run of two encoders, a null model without
weights and a family of two checkpoints: the files each scope's rule draws, for the models and families that have
what its figures need, each file the output of one rule under the rules' wildcard constraints; the params a
figure's job gets, of what it draws alone; each model's file read for it, in order; a figure in a new scope,
declared and nothing else, with its rule's files, inputs, params and wildcard constraints; the checkpoint figure's
tables of each checkpoint, which must come from the same sums."""

from __future__ import annotations

import dataclasses
import re

import pandas as pd
import pytest

from ctxvar.errors import StatisticsError
from ctxvar.figures import catalogue, scopes
from ctxvar.figures.catalogue import FIGURES, SCOPES, figure_named, figures_of
from ctxvar.figures.draw import draw
from ctxvar.figures.scopes import FigureRun, read_each
from ctxvar.files.atomic import write_csv
from ctxvar.stats.provenance import FINISH

from support.figure_scopes import NEW_FIGURE, NEW_SCOPE, RUN, add_new_scope, problems


def drawn(run: FigureRun) -> dict[str, list[str]]:
    """{scope's rule: the files of its figures (no extension)} that ``run`` draws."""
    return {scope.rule: [stem for figure in figures_of(scope) for stem in run.stems(figure)] for scope in SCOPES}


def test_each_scope_draws_its_figures_for_the_models_and_families_that_have_what_they_need():
    files = drawn(RUN)
    assert files["plot_model_figure"][:4] == [f"{model}/figures/fig05_decomposition" for model in RUN.forward]
    assert len(files["plot_model_figure"]) == 4 * len(figures_of(scopes.MODEL))
    assert files["plot_summary_figure"] == [f"figures/{figure.name}" for figure in figures_of(scopes.SUMMARY)]
    assert files["plot_corpus_figure"] == ["figures/fig09_sentence_lengths"]
    assert files["plot_pca"] == ["enc/figures/fig01_pca", "enc/figures/fig08_selected_tokens"]
    assert files["plot_checkpoints"] == ["figures/checkpoints/dec"]
    assert files["plot_embedding_projection"] == [f"{m}/figures/emb01_projection" for m in ("enc", "dec@s0", "dec@s10")]
    assert files["plot_embedding_checkpoints"] == ["figures/checkpoints/embedding_matrices/dec"]
    assert files["plot_across_checkpoints"] == [
        "figures/across_checkpoints/twonn_by_step",
        "figures/across_checkpoints/isotropy_by_step",
    ]
    # every model forward: false (embedding matrices alone), no Fig. 1, the TwoNN sample off
    weights_alone = dataclasses.replace(RUN, forward=[], pca_model=None, geometry={**RUN.geometry, "twonn": False})
    assert {rule: stems for rule, stems in drawn(weights_alone).items() if stems} == {
        "plot_embedding_projection": files["plot_embedding_projection"],
        "plot_embedding_checkpoints": files["plot_embedding_checkpoints"],
        "plot_across_checkpoints": ["figures/across_checkpoints/isotropy_by_step"],
    }


def test_a_figure_passes_the_params_of_what_it_draws():
    """Only what the figure reads changes its params: Fig. 9, of the corpus alone, has no models (adding one does
    not draw it again), nor the frequency filter."""
    assert RUN.params(figure_named("fig09_sentence_lengths"), {}) == {}
    assert RUN.params(figure_named("fig02_variance_on_mean"), {}) == {"analysis": RUN.analysis, "models": RUN.forward}
    assert RUN.params(figure_named("geo06_anisotropy_encoders_decoders"), {}) == {"analysis": {}, "models": RUN.forward}
    assert RUN.params(figure_named("fig05_decomposition"), {"model": "enc"}) == {"analysis": {}}
    assert RUN.params(figure_named("emb01_projection"), {"model": "enc"}) == {}
    assert RUN.params(figure_named("isotropy_by_step"), {}) == {"families": RUN.families}


def rule_output(scope, run: FigureRun) -> re.Pattern:
    """The files of ``scope``'s rule as Snakemake matches them: the path of each figure it draws
    (:meth:`~ctxvar.figures.scopes.Scope.figure_path`), each wildcard held to the rule's constraints
    (:meth:`FigureRun.constraints`), and {model} to workflow/rules/common.smk's (a model of the run)."""
    figures = run.drawn(figures_of(scope))
    constraints = {"model": "|".join(re.escape(model) for model in run.every), **run.constraints(figures)}
    patterns = []
    for figure in figures:
        parts = re.split(r"\{(\w+)\}", scope.figure_path(figure.name))
        wildcard = {part: f"(?:{constraints.get(part, '.+')})" for part in parts[1::2]}
        patterns.append("".join(wildcard[part] if index % 2 else re.escape(part) for index, part in enumerate(parts)))
    return re.compile("|".join(patterns) or "$^")


def test_each_file_a_run_draws_is_the_output_of_its_own_scope_s_rule_alone():
    """Scopes share the shape of their paths ({model}/figures/{figure}: a model's figures, Fig. 1's, the embedding
    projection; figures/{figure} and figures/checkpoints/{family}): each file is left to the rule of its figure's
    scope, and Figs. 1 and 8 to pca.smk's plot_pca, the rule of no scope of figures.smk."""
    rules = {scope: rule_output(scope, RUN) for scope in SCOPES if scope.call is not None}  # figures.smk's
    for figure in FIGURES:
        for file in RUN.stems(figure):
            matched = [scope.rule for scope, output in rules.items() if output.fullmatch(file)]
            assert matched == ([] if figure.scope is scopes.PCA else [figure.scope.rule]), file


def test_one_job_draws_each_scope_s_figures_of_a_model_a_family_or_the_run():
    """Its log and benchmark are named after the rule; its inputs are those of all its figures, a need they share
    being the same files; figures of one scope drawn for other models are refused, naming them."""
    assert scopes.MODEL.job_path == "{model}/figures/plot_model_figure"
    assert scopes.MODEL.figure_path("fig05_decomposition") == "{model}/figures/fig05_decomposition"
    assert scopes.EMBEDDING_PROJECTION.job_path == scopes.EMBEDDING_PROJECTION.path  # a scope of one figure
    assert RUN.job_inputs(RUN.drawn(figures_of(scopes.MODEL)), {"model": "enc"}) == {
        "layers": "enc/layers.csv",
        "tokens": "enc/tokens.parquet",
        "geometry": "enc/geometry.csv",
    }
    summary = RUN.job_inputs(RUN.drawn(figures_of(scopes.SUMMARY)), {})
    assert summary["tokens"] == [f"{model}/tokens.parquet" for model in RUN.forward] and "sentences" not in summary
    across = RUN.drawn(figures_of(scopes.ACROSS_CHECKPOINTS))
    assert [figure.name for figure in across] == ["twonn_by_step", "isotropy_by_step"]
    weighted_alone = dataclasses.replace(RUN, forward=[], geometry={**RUN.geometry, "twonn": False})
    assert [figure.name for figure in weighted_alone.drawn(across)] == ["isotropy_by_step"]
    # a figure of weight matrices among the per-model figures would be drawn for other models than the rest
    stray = dataclasses.replace(figure_named("emb01_projection"), scope=scopes.MODEL, name="stray")
    with pytest.raises(ValueError, match="stray for \\[{'model': 'enc'}, {'model': 'dec@s0'}"):
        RUN.drawn((*figures_of(scopes.MODEL), stray))
    # a figure across the models with weights beside one across those that run over the corpus read other tokens
    summary_scope = dataclasses.replace(scopes.SUMMARY, inputs={**scopes.SUMMARY.inputs, "projection": "{model}/p"})
    fig10 = dataclasses.replace(figure_named("fig10_frequency_histogram"), scope=summary_scope)
    weighted = dataclasses.replace(fig10, name="weighted", needs=("tokens", "projection"))
    assert RUN.drawn([fig10, weighted]) == [fig10, weighted]
    with pytest.raises(ValueError, match="weighted reads other tokens files"):
        RUN.job_inputs([fig10, weighted], {})


def test_a_family_s_constraint_matches_its_name_alone():
    """A family's name is matched as it is written: a dot in it is no regular expression's wildcard."""
    run = dataclasses.replace(RUN, families={"pythia-70m.deduped": RUN.families["dec"]})
    constraint = run.constraints(figures_of(scopes.CHECKPOINTS))["family"]
    assert re.fullmatch(constraint, "pythia-70m.deduped") and not re.fullmatch(constraint, "pythia-70m-deduped")


def test_each_model_drawn_gets_its_own_file_read_as_its_need_says(tmp_path):
    """The files come in the order of the models (Snakemake gives a single file as a string); more or fewer files
    than models are refused, not paired with the wrong model."""
    paths = []
    for index in range(2):
        paths.append(str(tmp_path / f"{index}.csv"))
        write_csv(pd.DataFrame({"layer": [0], "Q": [float(index)]}), paths[-1])
    read = read_each("layers", paths, ["a", "b"])
    assert list(read) == ["a", "b"] and [table["Q"].item() for table in read.values()] == [0.0, 1.0]
    assert read_each("layers", paths[1], ["b"])["b"]["Q"].item() == 1.0
    with pytest.raises(ValueError):
        read_each("layers", paths[:1], ["a", "b"])


# --- a figure in a new scope ------------------------------------------------------------------------------------------


@pytest.fixture
def new_scope(monkeypatch):
    """The catalogue with :data:`NEW_FIGURE` in :data:`NEW_SCOPE`, as the workflow and the draw entry read it."""
    return add_new_scope(monkeypatch)


def test_a_figure_in_a_new_scope_has_its_rule_s_files_inputs_params_and_constraints(new_scope):
    # the recipe puts the draw function in a module of ctxvar.figures; this test's own is the one rule it breaks
    assert problems(catalogue.FIGURES) == ["layers_by_step: its draw function is not one of a module of ctxvar.figures"]
    assert figures_of(NEW_SCOPE) == (NEW_FIGURE,) and figure_named("layers_by_step") is NEW_FIGURE
    assert RUN.stems(NEW_FIGURE) == ["figures/checkpoints/layers/dec"]
    assert NEW_SCOPE.category == "All models" and NEW_SCOPE.params == ("steps",)
    assert RUN.inputs(NEW_FIGURE, {"family": "dec"}) == {"layers": ["dec@s0/layers.csv", "dec@s10/layers.csv"]}
    assert RUN.params(NEW_FIGURE, {"family": "dec"}) == {"steps": {"dec@s0": 0, "dec@s10": 10}}
    assert RUN.constraints([NEW_FIGURE]) == {"family": "dec"}
    without_families = dataclasses.replace(RUN, families={})
    assert without_families.stems(NEW_FIGURE) == [] and without_families.constraints([NEW_FIGURE]) == {"family": "$^"}


# --- the checkpoint figure --------------------------------------------------------------------------------------------


STEPS = {"m@step0": 0, "m@step100": 100}


def checkpoint_tables(folder, geometry_sums: dict[str, str]) -> tuple[list[str], list[str]]:
    """Each checkpoint's layers.csv (from sums "h-{model}") and geometry.csv (from ``geometry_sums[model]``)."""
    layers_paths, geometry_paths = [], []
    for model in STEPS:
        (folder / model).mkdir(parents=True)
        layers = pd.DataFrame(
            {"layer": range(3), "final_norm": False, "cv_Q": 0.5, "M": 1.0, "Q": 2.0, "config_hash": f"h-{model}"}
        )
        geometry = pd.DataFrame(
            {"layer": range(3), "anisotropy": 0.3, "twonn": 7.0, "config_hash": geometry_sums[model]}
        )
        write_csv(layers, folder / model / "layers.csv")
        write_csv(geometry, folder / model / "geometry.csv")
        layers_paths.append(str(folder / model / "layers.csv"))
        geometry_paths.append(str(folder / model / "geometry.csv"))
    return layers_paths, geometry_paths


def test_the_checkpoint_figure_draws_tables_of_the_same_sums(tmp_path):
    layers, geometry = checkpoint_tables(tmp_path, {model: f"h-{model}" for model in STEPS})
    plot = draw("checkpoints", {"layers": layers, "geometry": geometry}, {"family": "m", "steps": STEPS})
    assert set(plot.data["model"]) == set(STEPS)


def test_the_checkpoint_figure_refuses_a_geometry_of_other_sums_naming_both_files(tmp_path):
    layers, geometry = checkpoint_tables(tmp_path, {"m@step0": "h-m@step0", "m@step100": "older"})
    with pytest.raises(StatisticsError) as error:
        draw("checkpoints", {"layers": layers, "geometry": geometry}, {"family": "m", "steps": STEPS})
    message = str(error.value)
    assert message.startswith("model 'm@step100': its files come from different sums")
    assert layers[1] in message and geometry[1] in message and message.endswith(FINISH) and "\n" not in message
