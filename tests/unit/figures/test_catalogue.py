"""Unit tier: the catalogue of figures (ctxvar.figures.catalogue). Every figure has a unique name, a draw function
of a module of ctxvar.figures, and needs only what its scope reads (one table of each model, but for the checkpoint
figure); each scope's path carries the wildcards it is drawn by; every figure's function takes what its scope's call
passes it, read from the files the rules give it; a switched-off geometry metric asks for no figure of it.
Importing the catalogue, as the workflow does at start-up, imports no matplotlib."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
from html import unescape

import pandas as pd
import pyarrow as pa
import pytest

from ctxvar.figures import scopes
from ctxvar.figures.catalogue import FIGURES, SCOPES, figure_named, figures_of
from ctxvar.files.atomic import write_csv
from ctxvar.files.parquet import write_table

from support.figure_scopes import RUN, problems
from support.quick_start_figures import token_stats


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


def test_every_other_figure_draws_one_table_per_model():
    """Why no other figure checks: a model figure reads one of its tables; a summary figure the summary tables
    (stacked layers, stacked geometry, models.csv: written by one job, which checks each model's tables and
    run.json against each other), or one tokens.parquet per model; a figure across checkpoints one table of each."""
    for figure in figures_of(scopes.MODEL) + figures_of(scopes.ACROSS_CHECKPOINTS):
        assert len(figure.needs) == 1, figure
    for figure in figures_of(scopes.SUMMARY):
        assert len(figure.needs) == 1 or set(figure.needs) <= {"layers", "geometry", "models"}, figure


def test_a_switched_off_geometry_metric_asks_for_no_figure_of_it():
    every = {"covariance": True, "cosine": True, "twonn": True}

    def left_out(geometry):
        return [figure.name for figure in FIGURES if not figure.drawn_with(geometry)]

    assert left_out(every) == []
    assert left_out({**every, "twonn": False}) == ["geo03_intrinsic_dimension", "twonn_by_step"]
    assert left_out({**every, "cosine": False}) == ["geo02_cosine"]
    assert left_out({**every, "covariance": False}) == [
        "geo04_spectrum",
        "geo01_isotropy",
        "geo06_anisotropy_encoders_decoders",
    ]


def test_every_caption_reads_in_the_report_as_it_is_written():
    """Snakemake's report renders a caption file with Jinja, then as reStructuredText; caption_file
    (workflow/rules/functions/figures.smk) writes each inside Jinja's raw, so that only reStructuredText could change
    it: no caption may hold its markup."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    for figure in FIGURES:
        text = Environment().from_string(f"{{% raw %}}{figure.caption}{{% endraw %}}\n").render()
        shown = unescape(re.sub(r"<[^>]+>", " ", publish_parts(text, writer="html")["body"]))
        assert " ".join(shown.split()) == " ".join(figure.caption.split()), figure.name


def test_importing_the_catalogue_imports_no_matplotlib():
    """The workflow imports it at start-up; the drawing modules it holds functions of import matplotlib as they
    draw."""
    code = "import sys, ctxvar.figures.catalogue; print('matplotlib' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


# --- each figure's function takes what its scope passes ---------------------------------------------------------------


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
