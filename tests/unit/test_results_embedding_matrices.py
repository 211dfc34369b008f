"""``load_results(...).embedding_matrices``: each model's embedding_matrices.csv as the job wrote it (I(W) and the
mean cosine of its input and output matrices), with a ``model`` column first, read through the verified reader;
a model without weight matrices (the Gaussian null) has no rows."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from ctxvar.errors import IntegrityError
from ctxvar.files.atomic import write_csv
from ctxvar.results import Results, load_results
from ctxvar.stats.embedding_matrices import MATRIX_COLUMNS, matrix_table

from .test_results import finished_run
from support.workflow_runs import REPO


def matrices(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.normal(size=(12, 4)), "output": rng.normal(size=(12, 4)) + 1.0}


def test_the_embedding_matrix_tables_are_returned_as_written(tmp_path):
    folder = tmp_path / "study"
    finished_run(folder)  # models a and b
    written = matrix_table(matrices(0))
    write_csv(written, folder / "a" / "embedding_matrices.csv")  # b: no weight matrices, as the Gaussian null
    table = load_results(folder).embedding_matrices
    assert list(table.columns) == ["model", *MATRIX_COLUMNS]
    assert list(table["model"]) == ["a"] * 4  # input and output, uncentred and centred
    pd.testing.assert_frame_equal(table.drop(columns="model"), written, check_exact=False, rtol=1e-15)


def test_every_model_with_matrices_is_stacked_in_the_runs_order(tmp_path):
    folder = tmp_path / "study"
    finished_run(folder)
    for seed, model in enumerate(("b", "a")):
        write_csv(matrix_table(matrices(seed)), folder / model / "embedding_matrices.csv")
    table = load_results(folder).embedding_matrices
    assert list(table["model"]) == ["a"] * 4 + ["b"] * 4
    assert table.groupby("model")["isotropy"].nunique().tolist() == [4, 4]


def test_a_run_without_weight_matrices_has_an_empty_table_with_the_columns(tmp_path):
    finished_run(tmp_path / "study")
    table = load_results(tmp_path / "study").embedding_matrices
    assert table.empty and list(table.columns) == ["model", *MATRIX_COLUMNS]


def test_an_edited_embedding_matrix_table_is_refused(tmp_path):
    folder = tmp_path / "study"
    finished_run(folder)
    path = folder / "a" / "embedding_matrices.csv"
    write_csv(matrix_table(matrices(0)), path)
    path.write_text(path.read_text().replace("input", "inptu", 1))
    with pytest.raises(IntegrityError, match="embedding_matrices.csv: checksum mismatch"):
        load_results(folder)


@pytest.mark.parametrize(
    "document, section",
    [("docs/outputs.md", r"\*\*In a notebook\.\*\*(.*?)\n\n"), ("README.md", r"## Results in a notebook\n(.*?)\n## ")],
)
def test_the_manual_names_every_table_load_results_returns(document, section):
    text = re.search(section, (REPO / document).read_text(), flags=re.S).group(1)
    returned = [field.name for field in dataclasses.fields(Results) if field.name != "folder"]
    assert [name for name in returned if f"`{name}`" not in text] == []
