"""``load_results`` (ctxvar.results) refuses every mixture of the files it reads, with one line naming them and the
command that makes them agree: a model's tokens.parquet, run.json, its rows of the summary's models.csv,
layers.csv and geometry.csv from different sums, and corpus/counts.json of another corpus sample than the sums (a
corpus re-sampled by a run stopped before extraction, which left every model's files agreeing among themselves);
a run finished by a ctxvar that did not record the corpus sample says why the sample reads None.
``load_results(...).embedding_matrices`` is each model's embedding_matrices.csv as the job wrote it (I(W) and the
mean cosine of its input and output matrices), with a ``model`` column first, read through the verified reader; a
model without weight matrices (the Gaussian null) has no rows."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ctxvar.config.hashes import CORPUS_HASH, corpus_hash
from ctxvar.corpus.sentences import write_sentences
from ctxvar.errors import IntegrityError, StatisticsError
from ctxvar.files.atomic import read_json, write_csv, write_json
from ctxvar.files.parquet import write_table
from ctxvar.models.files import file_fingerprint
from ctxvar.results import Results, load_results
from ctxvar.stats.embedding_matrices import MATRIX_COLUMNS, matrix_table
from ctxvar.stats.provenance import FINISH
from ctxvar.stats.summary import stack_layers, summary_tables

from support.workflow_runs import REPO

MODELS = ("a", "b")


def finished_run(folder, sums: str = "h", sample: str = "c"):
    """A run folder as the workflow leaves it: two models' tables, run.json, the summary, counts.json."""
    for model in MODELS:
        (folder / model).mkdir(parents=True, exist_ok=True)
        write_csv(pd.DataFrame({"layer": [0, 1], "Q": [0.5, 0.6], "config_hash": sums}), folder / model / "layers.csv")
        geometry = pd.DataFrame({"layer": [0, 1], "explained_1": [0.1, 0.2], "config_hash": sums})
        write_csv(geometry, folder / model / "geometry.csv")
        write_json({"model_name": model, "config_hash": sums, CORPUS_HASH: sample}, folder / model / "run.json")
        tokens = pa.table({"layer": pa.array([0], pa.int16()), "token": ["x"], "n": [3], "Q": [0.5]})
        write_table(tokens, folder / model / "tokens.parquet", metadata={"config_hash": sums})
    (folder / "summary").mkdir(exist_ok=True)
    layers, geometry, models = summary_tables(
        {m: str(folder / m / "layers.csv") for m in MODELS},
        {m: str(folder / m / "geometry.csv") for m in MODELS},
        {m: str(folder / m / "run.json") for m in MODELS},
    )
    for name, table in (("layers.csv", layers), ("geometry.csv", geometry), ("models.csv", models)):
        write_csv(table, folder / "summary" / name)
    (folder / "corpus").mkdir(exist_ok=True)
    write_json({"sentences": 10, CORPUS_HASH: sample}, folder / "corpus" / "counts.json")


def test_files_of_one_run_load(tmp_path):
    finished_run(tmp_path / "study")
    assert load_results(tmp_path / "study").corpus[CORPUS_HASH] == "c"


def test_counts_of_a_corpus_re_sampled_after_the_sums_are_refused(tmp_path):
    """The corpus edited, then ``snakemake --until sample_corpus``: counts.json is the new sample's, every model's
    tables the old one's, and they agree among themselves."""
    folder = tmp_path / "study"
    finished_run(folder)
    write_json({"sentences": 7, CORPUS_HASH: "new"}, folder / "corpus" / "counts.json")
    with pytest.raises(StatisticsError) as error:
        load_results(folder)
    message = str(error.value)
    assert "\n" not in message and message.endswith(FINISH)
    assert f"{folder / 'corpus' / 'counts.json'} (corpus sample new)" in message
    assert f"{folder / 'a' / 'run.json'}, {folder / 'b' / 'run.json'} (sample c)" in message


def test_a_model_merged_from_another_sample_is_refused(tmp_path):
    folder = tmp_path / "study"
    finished_run(folder)
    run = read_json(folder / "b" / "run.json")
    write_json({**run, CORPUS_HASH: "old"}, folder / "b" / "run.json")
    with pytest.raises(StatisticsError, match=r"counts.json \(corpus sample c\) and .*b/run.json \(sample old\)"):
        load_results(folder)


def test_counts_that_name_no_sample_are_refused(tmp_path):
    folder = tmp_path / "study"
    finished_run(folder)
    write_json({"sentences": 10}, folder / "corpus" / "counts.json")
    with pytest.raises(StatisticsError, match=r"counts.json \(corpus sample None\) .* different corpus samples"):
        load_results(folder)


@pytest.mark.parametrize("stale", ["tokens.parquet", "run.json", "layers.csv", "geometry.csv"])
def test_a_model_file_of_other_sums_is_refused(tmp_path, stale):
    """What load_results refused already: the model's own files from other sums than the summary's."""
    folder = tmp_path / "study"
    finished_run(folder)
    other = tmp_path / "other"
    finished_run(other, sums="h2")
    (folder / "b" / stale).unlink()
    (folder / "b" / stale).hardlink_to(other / "b" / stale)
    (folder / "b" / f"{stale}.sha256").unlink(missing_ok=True)
    if (other / "b" / f"{stale}.sha256").exists():
        (folder / "b" / f"{stale}.sha256").hardlink_to(other / "b" / f"{stale}.sha256")
    with pytest.raises(StatisticsError) as error:
        load_results(folder)
    message = str(error.value)
    assert "\n" not in message and message.endswith(FINISH)
    assert f"{folder / 'b' / stale}" in message or "is not the models'" in message


def test_the_sampling_records_the_identity_the_final_merge_records(tmp_path):
    """counts.json's corpus_hash is corpus_hash of the sampling's params.corpus; the final merge computes it from
    the same canonical(CORPUS) (workflow/rules/merge.smk)."""
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"sentence {i} here\n" for i in range(20)))
    corpus = {
        "source": "text",
        "path": str(text),
        "fraction": 1.0,
        "seed": 0,
        "sampling": "paper",
        "max_words": 50,
        "text_column": "text",
        "inputs": {"files": [file_fingerprint(str(text))]},  # what start-up records; the job checks it
    }
    counts = write_sentences(corpus, tmp_path / "sentences.parquet", tmp_path / "counts.json")
    assert counts[CORPUS_HASH] == read_json(tmp_path / "counts.json")[CORPUS_HASH] == corpus_hash(dict(corpus))
    assert corpus_hash({**corpus, "seed": 1}) != counts[CORPUS_HASH]


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


def test_a_run_turned_to_forward_false_returns_no_forward_tables(tmp_path):
    """Every model set to forward: false after a forward run: the run writes the summary of no model beside the
    earlier tokens.parquet, run.json and counts.json, and load_results returns the embedding matrices alone."""
    folder = tmp_path / "study"
    finished_run(folder)
    for model in MODELS:
        write_csv(matrix_table(matrices(0)), folder / model / "embedding_matrices.csv")
    stacked = stack_layers({model: folder / model / "embedding_matrices.csv" for model in MODELS})
    write_csv(stacked, folder / "summary" / "embedding_matrices.csv")
    for name, table in zip(("layers.csv", "geometry.csv", "models.csv"), summary_tables({}, {}, {})):
        write_csv(table, folder / "summary" / name)
    results = load_results(folder)
    assert results.tokens.empty and results.layers.empty and results.geometry.empty and results.models.empty
    assert results.provenance == results.metadata == results.corpus == {}
    assert list(results.embedding_matrices["model"]) == ["a"] * 4 + ["b"] * 4


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


def test_a_run_of_a_ctxvar_before_the_sample_was_recorded_says_so(tmp_path):
    folder = tmp_path / "study"
    finished_run(folder)
    for path in (folder / "corpus" / "counts.json", folder / "a" / "run.json", folder / "b" / "run.json"):
        record = read_json(path)
        record.pop(CORPUS_HASH)
        write_json(record, path)
    with pytest.raises(StatisticsError) as error:
        load_results(folder)
    message = str(error.value)
    assert "\n" not in message and message.endswith(FINISH)
    assert "(None: a file written before ctxvar recorded the sample)" in message
