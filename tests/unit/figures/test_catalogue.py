"""Unit tier: the catalogue of figures and their scopes. Every figure has a unique name, a draw function of a module
of ctxvar.figures, and needs only what its scope reads; each scope's path carries the wildcards it is drawn by;
every figure's function takes what its scope's call passes it, read from the files the rules give it. A figure in a
new scope (docs/architecture.md, "Add a figure"), declared and nothing else, has its files, inputs, params and
wildcard constraints for the rule figures.smk makes of it, and is drawn through the one draw entry. Importing the
catalogue, as the workflow does at start-up, imports no matplotlib."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ctxvar.errors import InsufficientData
from ctxvar.figures import catalogue, scopes
from ctxvar.figures.catalogue import FIGURES, SCOPES, Figure, FigureRun, Scope, figure_named, figures_of
from ctxvar.figures.draw import draw
from ctxvar.figures.plotting import Plot, panels
from ctxvar.figures.scopes import DRAWN, NEEDS, read_each
from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import write_table

from support.quick_start_figures import token_stats

# A run as the scopes see it: two encoders, a null model without weights, and a family of two checkpoints.
RUN = FigureRun(
    forward=["enc", "null", "dec@s0", "dec@s10"],
    weighted=["enc", "dec@s0", "dec@s10"],
    every=["enc", "null", "dec@s0", "dec@s10"],
    families={"dec": {"dec@s0": 0, "dec@s10": 10}},
    pca_model="enc",
    geometry={"covariance": True, "cosine": True, "twonn": True},
    analysis={"min_log10_n": 0, "max_log10_n": 5},
)


def problems(figures) -> list[str]:
    """What breaks the catalogue's rules in ``figures`` (the catalogue's, or one with a figure added)."""
    found = []
    names = [figure.name for figure in figures]
    found += [f"{name}: named twice" for name in sorted({n for n in names if names.count(n) > 1})]
    for figure in figures:
        scope, draw_function = figure.scope, figure.draw
        if not set(figure.needs) <= set(scope.inputs):
            found.append(f"{figure.name}: needs {figure.needs}, its scope reads {sorted(scope.inputs)}")
        if not callable(draw_function) or not draw_function.__module__.startswith("ctxvar.figures."):
            found.append(f"{figure.name}: its draw function is not one of a module of ctxvar.figures")
        elif (
            getattr(importlib.import_module(draw_function.__module__), draw_function.__name__, None)
            is not draw_function
        ):
            found.append(f"{figure.name}: {draw_function.__module__}.{draw_function.__name__} does not import as it")
    rules = [scope.rule for scope in {figure.scope: None for figure in figures}]
    found += [f"rule {rule}: two scopes" for rule in sorted({r for r in rules if rules.count(r) > 1})]
    for scope in {figure.scope: None for figure in figures}:
        wildcards = {"model": "{model}" in scope.path, "family": "{family}" in scope.path}
        expected = {"model": scope.drawn in ("model", "pca model"), "family": scope.drawn == "family"}
        if scope.drawn not in DRAWN or wildcards != expected or not set(scope.inputs) <= set(NEEDS):
            found.append(f"scope {scope.rule}: drawn {scope.drawn!r} with path {scope.path}, inputs {scope.inputs}")
        if "{figure}" not in scope.path and len([f for f in figures if f.scope is scope]) != 1:
            found.append(f"scope {scope.rule}: a path without {{figure}} names one figure's files")
    return found


def test_the_catalogue_keeps_its_rules():
    assert problems(FIGURES) == []
    assert {figure.scope for figure in FIGURES} == set(SCOPES)  # every scope declared draws a figure
    assert [figure.name for figure in figures_of(scopes.PCA)] == ["fig01_pca", "fig08_selected_tokens"]


def test_the_rules_see_a_figure_named_twice_a_need_its_scope_cannot_read_and_a_function_of_another_module():
    fig05 = figure_named("fig05_decomposition")
    assert problems([fig05, fig05]) == ["fig05_decomposition: named twice"]
    assert problems([dataclasses.replace(fig05, needs=("sentences",))]) == [
        "fig05_decomposition: needs ('sentences',), its scope reads ['geometry', 'layers', 'tokens']"
    ]
    assert problems([dataclasses.replace(fig05, draw=len)]) == [
        "fig05_decomposition: its draw function is not one of a module of ctxvar.figures"
    ]


def drawn(run: FigureRun) -> dict[str, list[str]]:
    """{scope's rule: the files of its figures (no extension)} that ``run`` draws."""
    return {scope.rule: [stem for figure in figures_of(scope) for stem in run.stems(figure)] for scope in SCOPES}


def test_each_scope_draws_its_figures_for_the_models_and_families_that_have_what_they_need():
    files = drawn(RUN)
    assert files["plot_model_figure"][:4] == [f"{model}/figures/fig05_decomposition" for model in RUN.forward]
    assert len(files["plot_model_figure"]) == 4 * len(figures_of(scopes.MODEL))
    assert files["plot_summary_figure"] == [f"figures/{figure.name}" for figure in figures_of(scopes.SUMMARY)]
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
    assert RUN.params(figure_named("fig09_sentence_lengths"), {}) == {"analysis": {}, "models": []}
    assert RUN.params(figure_named("fig02_variance_on_mean"), {}) == {"analysis": RUN.analysis, "models": RUN.forward}
    assert RUN.params(figure_named("geo06_anisotropy_encoders_decoders"), {}) == {"analysis": {}, "models": RUN.forward}
    assert RUN.params(figure_named("fig05_decomposition"), {"model": "enc"}) == {"analysis": {}}
    assert RUN.params(figure_named("emb01_projection"), {"model": "enc"}) == {}
    assert RUN.params(figure_named("isotropy_by_step"), {}) == {"families": RUN.families}


def test_importing_the_catalogue_imports_no_matplotlib():
    """The workflow imports it at start-up; the drawing modules it holds functions of import matplotlib as they
    draw."""
    code = "import sys, ctxvar.figures.catalogue; print('matplotlib' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


# --- each figure's function takes what its scope passes -------------------------------------------------------------


def write_input(path, need: str) -> None:
    """A small file of ``need`` at ``path``: what the scopes read before they call a draw function."""
    path.parent.mkdir(parents=True, exist_ok=True)
    layers = pd.DataFrame({"layer": [0, 1], "final_norm": False, "cv_Q": 0.5, "M": 1.0, "Q": 2.0, "config_hash": "h"})
    tables = {
        "layers": layers,
        "geometry": pd.DataFrame({"layer": [0, 1], "anisotropy": 0.3, "twonn": 7.0, "config_hash": "h"}),
        "models": pd.DataFrame({"model": RUN.every, "attention": "causal"}),
        "embedding_matrices": pd.DataFrame({"matrix": "input", "centred": [False, True], "isotropy": 0.5}),
    }
    if need in tables:
        write_csv(tables[need], path)
    elif need == "tokens":
        token_stats(path, [pd.DataFrame({"token": ["a", "b"], "n": [10, 20], "Q": 2.0, "M": 1.0, "V": 1.0})] * 2)
    elif need == "projection":
        points = pd.DataFrame({"matrix": "input", "centred": False, "row": [0, 1], "x": [0.1, 0.2], "y": [0.3, 0.4]})
        write_table(pa.Table.from_pandas(points, preserve_index=False), path)
    # the sentences are read by the draw function itself: its path alone


def job_wildcards(figure) -> list[dict]:
    """The wildcards of each job of ``figure`` in :data:`RUN`, read back from its files' names."""
    keys = [key for key in ("model", "family") if f"{{{key}}}" in figure.scope.path]
    pattern = figure.scope.path.format_map({"figure": figure.name, **{key: f"(?P<{key}>.+)" for key in keys}})
    return [re.fullmatch(pattern, stem).groupdict() for stem in RUN.stems(figure)]


def job_inputs(figure, wildcards: dict, folder) -> dict:
    """The job's inputs as :meth:`FigureRun.inputs` names them, in ``folder``, each written once."""
    inputs = {}
    for need, files in RUN.inputs(figure, wildcards).items():
        for name in files if isinstance(files, list) else [files]:
            if not (folder / name).exists():
                write_input(folder / name, need)
        inputs[need] = [str(folder / name) for name in files] if isinstance(files, list) else str(folder / files)
    return inputs


@pytest.mark.parametrize("name", [figure.name for figure in FIGURES if figure.scope.call is not None])
def test_each_figure_s_function_takes_what_its_scope_reads_from_its_rule_s_inputs(name, tmp_path):
    """The scope's call with a stand-in for the draw function: what it passes binds to the function's parameters,
    read from the files :meth:`FigureRun.inputs` names, with :meth:`FigureRun.params` and the job's wildcards."""
    figure = figure_named(name)
    jobs = job_wildcards(figure)
    assert jobs, f"{name} is drawn for nothing in {RUN}"
    for wildcards in jobs:
        passed = []
        stand_in = dataclasses.replace(figure, draw=lambda *args: passed.append(args))
        figure.scope.call(
            stand_in, job_inputs(figure, wildcards, tmp_path), {**wildcards, **RUN.params(figure, wildcards)}
        )
        (args,) = passed
        inspect.signature(figure.draw).bind(*args)


# --- a figure in a new scope ----------------------------------------------------------------------------------------


def q_by_step(tables: dict[str, pd.DataFrame], family: str) -> Plot:
    """A figure of a new scope: Q(X) per layer, one line per checkpoint of ``family``."""
    if not tables:
        raise InsufficientData("no checkpoint")
    figure, axes = panels(1, 1)
    data = pd.concat([table.assign(model=model) for model, table in tables.items()], ignore_index=True)
    for model, part in data.groupby("model", sort=False):
        axes[0, 0].plot(part["layer"], part["Q"], label=model)
    axes[0, 0].set_title(family)
    return Plot(figure, data[["model", "layer", "Q"]])


def layers_by_step(figure, inputs: dict, params: dict) -> Plot:
    """The new scope's call: {id: layers.csv} of the family's checkpoints, and the family."""
    return figure.draw(read_each("layers", inputs["layers"], params["steps"]), params["family"])


NEW_SCOPE = Scope(
    "plot_layers_by_step",
    "figures/checkpoints/layers/{family}",
    "family",
    {"layers": "{model}/layers.csv"},
    layers_by_step,
)
NEW_FIGURE = Figure("layers_by_step", NEW_SCOPE, "Training checkpoints", "Q(X) per layer.", ("layers",), q_by_step)


@pytest.fixture
def new_scope(monkeypatch):
    """The catalogue with :data:`NEW_FIGURE` in :data:`NEW_SCOPE`, as the workflow and the draw entry read it."""
    monkeypatch.setattr(catalogue, "FIGURES", (*FIGURES, NEW_FIGURE))
    monkeypatch.setattr(catalogue, "SCOPES", (*SCOPES, NEW_SCOPE))
    monkeypatch.setattr(scopes, "SCOPES", (*SCOPES, NEW_SCOPE))
    return NEW_FIGURE


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


def test_a_figure_in_a_new_scope_is_drawn_by_the_draw_entry(new_scope, tmp_path):
    inputs = RUN.inputs(NEW_FIGURE, {"family": "dec"})
    for index, path in enumerate(inputs["layers"]):
        write_csv(pd.DataFrame({"layer": [0, 1], "Q": [1.0 + index, 2.0 + index]}), tmp_path / path)
    params = {"family": "dec", **RUN.params(NEW_FIGURE, {"family": "dec"})}
    plot = draw("layers_by_step", {"layers": [str(tmp_path / path) for path in inputs["layers"]]}, params)
    assert list(plot.data["model"]) == ["dec@s0", "dec@s0", "dec@s10", "dec@s10"]
    np.testing.assert_array_equal(plot.data["Q"], [1.0, 2.0, 2.0, 3.0])
    empty = draw("layers_by_step", {"layers": []}, {"family": "dec", "steps": {}})
    assert empty.data.to_dict("list") == {"figure": ["dec"], "not_drawn": ["no checkpoint"]}  # named as its file
