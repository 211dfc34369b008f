"""``ctxvar.load_results`` on the demo's outputs: it returns what the files hold and recomputes nothing."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import matplotlib
import pandas as pd
import pyarrow.parquet as pq
import pytest

import ctxvar
from ctxvar.errors import CtxvarError, IntegrityError
from ctxvar.files.atomic import read_csv, write_csv

REPO = Path(__file__).resolve().parents[2]


def test_load_results_returns_what_the_files_hold(demo):
    folder = demo / "results" / "demo"
    results = ctxvar.load_results(demo / "results")  # the only run there
    assert results.run == "demo" and results.folder == folder
    models = pd.read_csv(folder / "summary" / "models.csv")
    pd.testing.assert_frame_equal(results.models, models)
    pd.testing.assert_frame_equal(results.layers, pd.read_csv(folder / "summary" / "layers.csv"))
    pd.testing.assert_frame_equal(results.geometry, pd.read_csv(folder / "summary" / "geometry.csv"))
    assert results.tokens["model"].unique().tolist() == models["model"].tolist()
    for name in models["model"]:
        tokens = results.tokens[results.tokens["model"] == name].drop(columns="model").reset_index(drop=True)
        pd.testing.assert_frame_equal(tokens, pd.read_parquet(folder / name / "tokens.parquet"))
        assert results.provenance[name] == json.loads((folder / name / "run.json").read_text())
        footer = pq.read_schema(folder / name / "tokens.parquet").metadata[b"ctxvar"]
        assert results.metadata[name] == json.loads(footer)
    assert results.corpus == json.loads((folder / "corpus" / "counts.json").read_text())
    assert ctxvar.load_results(folder).layers.equals(results.layers)
    assert ctxvar.load_results(demo / "results", run="demo").layers.equals(results.layers)


def test_load_results_reads_rather_than_recomputes(demo, tmp_path):
    """A value changed in layers.csv (with a valid checksum; in the model's table and the summary that stacks it)
    comes back as changed: nothing is derived again."""
    copy = tmp_path / "results" / "demo"
    shutil.copytree(demo / "results" / "demo", copy, ignore=shutil.ignore_patterns("figures", "pca", "*.sample*"))
    layers = read_csv(copy / "summary" / "layers.csv")
    layers.loc[0, "slope_VM"] = 12345.0
    write_csv(layers, copy / "summary" / "layers.csv")
    model = layers.loc[0, "model"]
    own = read_csv(copy / model / "layers.csv")
    own.loc[0, "slope_VM"] = 12345.0
    write_csv(own, copy / model / "layers.csv")
    assert ctxvar.load_results(copy).layers.loc[0, "slope_VM"] == 12345.0


def test_load_results_verifies_and_names_what_is_missing(demo, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(demo / "results" / "demo", copy / "demo", ignore=shutil.ignore_patterns("figures", "pca"))
    shutil.copytree(copy / "demo" / "summary", copy / "other" / "summary")
    with pytest.raises(CtxvarError, match=r"holds the runs demo, other; name one"):
        ctxvar.load_results(copy)
    with pytest.raises(
        CtxvarError, match=r"holds no finished run \(no summary/models.csv or summary/embedding_matrices.csv\)"
    ):
        ctxvar.load_results(tmp_path / "nothing-here")
    layers = copy / "demo" / "summary" / "layers.csv"
    layers.write_text(layers.read_text().replace("tiny-bert", "tiny-BERT", 1))
    with pytest.raises(IntegrityError, match="layers.csv: checksum mismatch"):
        ctxvar.load_results(copy, run="demo")


def test_the_readme_notebook_example_runs(demo, monkeypatch):
    """The README's five lines, pointed at the demo's folder and first model."""
    matplotlib.use("Agg")
    section = re.search(r"^## Results in a notebook\n(.*?)(?=^## )", (REPO / "README.md").read_text(), re.M | re.S)
    code = re.search(r"```python\n(.*?)```", section.group(1), re.S).group(1)
    assert len([line for line in code.splitlines() if line.strip()]) <= 5
    monkeypatch.chdir(demo)
    namespace: dict = {}
    exec(code.replace("results/minilm", "results/demo").replace("all-MiniLM-L6-v2", "tiny-bert"), namespace)
    figure = matplotlib.pyplot.gcf()
    assert figure.axes and len(figure.axes[0].collections[0].get_offsets()) > 100
