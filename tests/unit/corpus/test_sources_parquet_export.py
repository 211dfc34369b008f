"""A Hub dataset read without its loading script (ctxvar.corpus.sources): the Hub's Parquet export of a dataset
(``corpus.revision: refs/convert/parquet``) holds each configuration's split as ``{config}/{split}/0000.parquet``,
``0001.parquet``, … numbered in the order the rows were written, and with ``corpus.data_dir`` the configuration's
folder the rows come back in that order, across files and row groups, so that the paper's sampling indexes the
dataset's own rows. The stand-in is a folder laid out as the export is, read through the same ``load_dataset`` call
with ``HF_HUB_OFFLINE=1``. A dataset whose loading script ``datasets`` refuses is one line naming the dataset, the
reason and the export; a config without ``revision`` and ``data_dir`` calls ``load_dataset`` as before."""

from __future__ import annotations

import os

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from packaging.version import Version

from ctxvar.corpus import sources
from ctxvar.corpus.sentences import sample_sentences
from ctxvar.corpus.sources import load_source
from ctxvar.errors import CorpusError

CORPUS = {
    "source": "hf",
    "revision": "refs/convert/parquet",
    "data_dir": "plain_text",
    "config_name": None,
    "split": "train",
    "path": None,
    "text_column": "text",
    "fraction": 1.0,
    "max_words": 63,
    "seed": 0,
    "sampling": "paper",
}
FILES = 12  # past 0009.parquet, so that 0010 and 0011 must come after it


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """HF_HUB_OFFLINE=1 as a job sets it before the libraries are imported, and a datasets cache of the test's own."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("datasets.config.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("datasets.config.HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))


def parquet_export(folder) -> list[str]:
    """A dataset laid out as the Hub's Parquet export is: ``.gitattributes``, then per configuration
    ``{config}/train/NNNN.parquet``; ``plain_text``'s rows over :data:`FILES` files of uneven sizes and row groups,
    written last file first (so neither the order of writing nor modification times can stand for the rows' order),
    and another configuration beside it. Returns ``plain_text``'s rows in their order."""
    rows = [f"sentence {index} of the book ." for index in range(sum(3 + shard % 5 for shard in range(FILES)))]
    split = folder / "plain_text" / "train"
    split.mkdir(parents=True)
    ends = np.cumsum([3 + shard % 5 for shard in range(FILES)])
    for shard in reversed(range(FILES)):
        texts = rows[ends[shard] - (3 + shard % 5) : ends[shard]]
        pq.write_table(pa.table({"text": texts}), split / f"{shard:04d}.parquet", row_group_size=2)
    (folder / "other" / "train").mkdir(parents=True)
    pq.write_table(
        pa.table({"text": ["a row of another configuration ."]}), folder / "other" / "train" / "0000.parquet"
    )
    (folder / ".gitattributes").write_text("*.parquet filter=lfs diff=lfs merge=lfs -text\n")
    return rows


def test_the_export_of_a_configuration_is_read_in_the_order_of_its_files(tmp_path, offline):
    rows = parquet_export(tmp_path / "bookcorpus")
    with load_source({**CORPUS, "name": str(tmp_path / "bookcorpus")}) as dataset:
        assert len(dataset) == len(rows) and dataset["text"] == rows


def test_the_papers_sampling_indexes_the_exports_rows_in_their_order(tmp_path, offline):
    rows = parquet_export(tmp_path / "bookcorpus")
    corpus = {**CORPUS, "name": str(tmp_path / "bookcorpus"), "fraction": 0.5}
    table, counts = sample_sentences(corpus)
    np.random.seed(0)
    drawn = np.random.choice(len(rows), int(0.5 * len(rows)), replace=False)
    assert counts["rows_in_source"] == len(rows) and table.column("sentence_id").to_pylist() == drawn.tolist()
    assert table.column("text").to_pylist() == [rows[index] for index in drawn]


def test_without_revision_and_data_dir_the_dataset_is_loaded_as_before(monkeypatch):
    calls = []
    monkeypatch.setattr(sources.hub, "offline", lambda: True)
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **options: calls.append((args, options)))
    old = {**CORPUS, "name": "bookcorpus", "revision": None, "data_dir": None}
    sources.load_hub_dataset({key: value for key, value in old.items() if value is not None or key == "config_name"})
    sources.load_hub_dataset(old)
    assert calls == 2 * [(("bookcorpus",), {"revision": None, "name": None, "split": "train"})]


def test_the_export_is_loaded_at_the_commit_resolved_at_start_up(monkeypatch):
    calls = []
    monkeypatch.setattr(sources.hub, "offline", lambda: True)
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **options: calls.append((args, options)))
    corpus = {**CORPUS, "name": "bookcorpus/bookcorpus"}
    sources.load_hub_dataset({**corpus, "inputs": {"commit": "c" * 40}})
    sources.load_hub_dataset(corpus)  # outside a run: the revision as written
    assert [options["revision"] for _, options in calls] == ["c" * 40, "refs/convert/parquet"]
    assert all(options["data_files"] == {"train": "plain_text/train/*.parquet"} for _, options in calls)
    assert all(options["split"] == "train" and "data_dir" not in options for _, options in calls)


def test_a_partial_export_is_never_read_as_the_split(tmp_path, offline):
    """The export of a dataset over 5 GB stops short in a ``partial-train`` folder: beside ``train`` it is not
    added to the rows, and alone it is no ``train`` (one line), since the paper's sampling indexes every row."""
    rows = parquet_export(tmp_path / "bookcorpus")
    partial = tmp_path / "bookcorpus" / "plain_text" / "partial-train"
    partial.mkdir()
    pq.write_table(pa.table({"text": ["a row of a cut export ."]}), partial / "0000.parquet")
    with load_source({**CORPUS, "name": str(tmp_path / "bookcorpus")}) as dataset:
        assert dataset["text"] == rows
    for path in (tmp_path / "bookcorpus" / "plain_text" / "train").iterdir():
        path.unlink()
    with pytest.raises(CorpusError) as error:
        with load_source({**CORPUS, "name": str(tmp_path / "bookcorpus")}):
            pass
    assert "\n" not in str(error.value) and "bookcorpus" in str(error.value)


def script_dataset(folder):
    """A dataset folder holding a loading script, ``bookcorpus.py``, and no data file."""
    folder.mkdir()
    (folder / "bookcorpus.py").write_text("import datasets\n")
    return str(folder)


@pytest.mark.skipif(Version(datasets.__version__) < Version("4"), reason="datasets < 4 runs loading scripts")
@pytest.mark.parametrize(
    "config_name, folder", [(None, "the folder of its configuration"), ("plain_text", "plain_text")]
)
def test_a_loading_script_datasets_refuses_is_one_line_naming_the_dataset_the_reason_and_the_export(
    tmp_path, offline, config_name, folder
):
    name = script_dataset(tmp_path / "bookcorpus")
    corpus = {**CORPUS, "name": name, "revision": None, "data_dir": None, "config_name": config_name}
    with pytest.raises(CorpusError) as error:
        sample_sentences(corpus)
    line = str(error.value)
    assert "\n" not in line and line.startswith(f"corpus: dataset {name!r} is read by a loading script")
    assert f"which datasets {datasets.__version__} refuses to run (RuntimeError: " in line
    assert "Dataset scripts are no longer supported, but found bookcorpus.py" in line
    assert f"corpus.revision: refs/convert/parquet, corpus.data_dir: {folder}" in line
    assert "HF_DATASETS_TRUST_REMOTE_CODE" not in line  # no datasets >= 4 runs a script, trusted or not


def test_a_script_datasets_runs_only_when_trusted_offers_the_export_and_the_trust(tmp_path, offline, monkeypatch):
    message = (  # datasets 3.x, for a script dataset without trust_remote_code=True
        "The repository for bookcorpus contains custom code which must be executed to correctly load the dataset. "
        "You can inspect the repository content at https://hf.co/datasets/bookcorpus.\n"
        "Please pass the argument `trust_remote_code=True` to allow custom code to be run."
    )

    def refuse(*args, **options):
        raise ValueError(message)

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    corpus = {**CORPUS, "name": "bookcorpus", "revision": None, "data_dir": None}
    with pytest.raises(CorpusError) as error:
        sample_sentences(corpus)
    line = str(error.value)
    assert "\n" not in line and "dataset 'bookcorpus' is read by a loading script" in line
    assert "corpus.revision: refs/convert/parquet" in line and "HF_DATASETS_TRUST_REMOTE_CODE=1" in line


def test_other_load_errors_keep_their_own_line(tmp_path, offline):
    os.makedirs(tmp_path / "empty")
    with pytest.raises(CorpusError, match=r"^corpus: cannot load .*config/demo.yaml$"):
        sample_sentences({**CORPUS, "name": str(tmp_path / "empty"), "revision": None, "data_dir": None})
