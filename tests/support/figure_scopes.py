"""The figures' scopes as the tests see them: a run (:data:`RUN`: two encoders, a null model without weights and a
family of two checkpoints, as a :class:`~ctxvar.figures.scopes.FigureRun`), the rules a catalogue keeps
(:func:`problems`), and a figure in a new scope, declared and nothing else (:data:`NEW_SCOPE`, :data:`NEW_FIGURE`),
which :func:`add_new_scope` puts in the catalogue as the workflow and the draw entry read it (docs/architecture.md,
"Add a figure")."""

from __future__ import annotations

import importlib

import pandas as pd
import pytest

from ctxvar.errors import InsufficientData
from ctxvar.figures import catalogue, scopes
from ctxvar.figures.catalogue import FIGURES, SCOPES, Figure, FigureRun, Scope
from ctxvar.figures.plotting import Plot, panels
from ctxvar.figures.scopes import DRAWN, NEEDS, read_each

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


def add_new_scope(monkeypatch) -> Figure:
    """The catalogue with :data:`NEW_FIGURE` in :data:`NEW_SCOPE`, as the workflow and the draw entry read it, until
    ``monkeypatch`` undoes it; returns the figure. Skips where the catalogue has either already: the recipe's
    example was adopted, and nothing is left to follow until the tests show another."""
    adopted = {figure.name for figure in FIGURES} & {NEW_FIGURE.name} or {s.rule for s in SCOPES} & {NEW_SCOPE.rule}
    if adopted:
        pytest.skip(f"{sorted(adopted)} declared already: give the new-scope tests a figure not declared yet")
    monkeypatch.setattr(catalogue, "FIGURES", (*FIGURES, NEW_FIGURE))
    monkeypatch.setattr(catalogue, "SCOPES", (*SCOPES, NEW_SCOPE))
    monkeypatch.setattr(scopes, "SCOPES", (*SCOPES, NEW_SCOPE))
    return NEW_FIGURE
