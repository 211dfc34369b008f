"""A finished run's tables in a notebook in one call: :func:`load_results`.

It reads what the workflow wrote, through the same verified readers the jobs use (a damaged
file is an :class:`~ctxvar.errors.IntegrityError`), and never recomputes a statistic.
Column meanings are in docs/outputs.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctxvar.config.hashes import CORPUS_HASH
from ctxvar.errors import CtxvarError, StatisticsError
from ctxvar.files.atomic import read_csv, read_json
from ctxvar.files.parquet import read_metadata, read_table
from ctxvar.stats.embedding_matrices import MATRIX_COLUMNS
from ctxvar.stats.provenance import FINISH, SUMS_COLUMN, check_same_sums, table_sums
from ctxvar.stats.summary import is_stack_of

SUMMARY = "summary"  # results/{run}/summary/: the per-layer, geometry, model and embedding-matrix tables
EMBEDDING_MATRICES = "embedding_matrices.csv"  # results/{run}/{model}/: I(W) of the model's embedding matrices


@dataclass(frozen=True)
class Results:
    """One run's results, as written.

    - ``tokens``: one row per (model, layer, type): ``model``, then ``{model}/tokens.parquet`` as it is
      (layer, token, n, Q, M, V, self_similarity when geometry.cosine is on), models in config order;
    - ``layers``: ``summary/layers.csv``, one row per (model, layer): Q, M, V, V_W, V_B over the filtered
      types, cv_Q, the V-on-M and log-frequency regressions;
    - ``geometry``: ``summary/geometry.csv``, one row per (model, layer): anisotropy, spectrum, cosine,
      TwoNN;
    - ``models``: ``summary/models.csv``, one row per model: name, revision, shape, token counts, hashes;
    - ``embedding_matrices``: one row per (model, matrix, centred): ``summary/embedding_matrices.csv``, every
      ``{model}/embedding_matrices.csv`` as it is (matrix, tied, rows, dim, centred, I(W), mean cosine, ...) after
      a ``model`` column, for the models that have one (every model but ``init: gaussian``, those with
      ``forward: false`` too), models in config order;
    - ``provenance``: model → its ``run.json`` (versions, weights and tokenizer SHA-256, config hash);
    - ``metadata``: model → the ctxvar metadata in its ``tokens.parquet`` footer;
    - ``corpus``: ``corpus/counts.json``, what the sampling and filters kept (and the text's provenance), with
      ``corpus_hash``, the sample every model's ``run.json`` must name too.
    """

    folder: Path
    tokens: pd.DataFrame
    layers: pd.DataFrame
    geometry: pd.DataFrame
    models: pd.DataFrame
    embedding_matrices: pd.DataFrame
    provenance: dict[str, dict]
    metadata: dict[str, dict]
    corpus: dict

    @property
    def run(self) -> str:
        return self.folder.name


def load_results(folder="results", run: str | None = None) -> Results:
    """The tables of the finished run in ``folder``: a run's folder (``results/demo``), or ``results`` with
    ``run`` naming the run (optional when ``results`` holds a single run).

    A run whose models all have ``forward: false`` has its embedding matrices alone: its other tables are empty,
    whatever an earlier configuration's forward pass left in the folder (the run writes ``summary/models.csv`` of no
    model then).

    Raises :class:`~ctxvar.errors.CtxvarError` (one line) when the folder holds no finished run, or a mixture of
    runs: tables of one model from different sums, ``counts.json`` of another corpus sample than the sums, or a
    summary table that is not the models' tables as they are now.
    """
    folder = run_folder(Path(folder), run)
    models = (
        read_csv(folder / SUMMARY / "models.csv")
        if (folder / SUMMARY / "models.csv").is_file()  # a run written before it was made for forward: false
        else pd.DataFrame(columns=["model", SUMS_COLUMN])
    )
    names = models["model"].astype(str).tolist()
    forward = bool(names)  # else every model has forward: false, as the summary the run made last says
    tokens = [read_table(folder / name / "tokens.parquet").to_pandas().assign(model=name) for name in names]
    results = Results(
        folder=folder,
        tokens=model_first(pd.concat(tokens, ignore_index=True) if tokens else pd.DataFrame(columns=["model"])),
        layers=read_csv(folder / SUMMARY / "layers.csv") if forward else pd.DataFrame(columns=["model"]),
        geometry=read_csv(folder / SUMMARY / "geometry.csv") if forward else pd.DataFrame(columns=["model"]),
        models=models,
        embedding_matrices=embedding_matrices(folder, names),
        provenance={name: read_json(folder / name / "run.json") for name in names},
        metadata={name: read_metadata(folder / name / "tokens.parquet") for name in names},
        corpus=read_json(folder / "corpus" / "counts.json") if forward else {},
    )
    check_one_origin(results)
    check_one_sample(results)
    check_summary_current(results.folder, names)
    return results


def embedding_matrices(folder: Path, names: list[str]) -> pd.DataFrame:
    """``summary/embedding_matrices.csv``; for a run written before it, every model of ``names`` that has its
    ``embedding_matrices.csv`` stacked here."""
    if (folder / SUMMARY / EMBEDDING_MATRICES).is_file():
        return read_csv(folder / SUMMARY / EMBEDDING_MATRICES)
    matrices = [
        read_csv(folder / name / EMBEDDING_MATRICES).assign(model=name)
        for name in names
        if (folder / name / EMBEDDING_MATRICES).is_file()  # the Gaussian null has no weight matrices
    ]
    return model_first(
        pd.concat(matrices, ignore_index=True) if matrices else pd.DataFrame(columns=["model", *MATRIX_COLUMNS])
    )


def model_first(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its ``model`` column first."""
    return table[["model", *table.columns.drop("model")]]


def check_one_sample(results: Results) -> None:
    """Refuse ``corpus/counts.json`` of another corpus sample than the models' sums (the corpus re-sampled by a run
    stopped before extraction: ``--until``, a kill, a failed job), naming the files: each model's ``run.json``
    records the sample its sums were extracted from (``corpus_hash``), as counts.json does."""
    counts = results.folder / "corpus" / "counts.json"
    sample = results.corpus.get(CORPUS_HASH)
    others = [name for name, run in results.provenance.items() if run.get(CORPUS_HASH) != sample or sample is None]
    if others:
        runs = ", ".join(str(results.folder / name / "run.json") for name in others)
        theirs = sorted({str(results.provenance[name].get(CORPUS_HASH)) for name in others})
        unnamed = (
            " (None: a file written before ctxvar recorded the sample)" if "None" in [str(sample), *theirs] else ""
        )
        raise StatisticsError(
            f"{counts} (corpus sample {sample}) and {runs} (sample {', '.join(theirs)}) come from different corpus "
            f"samples{unnamed}; {FINISH}"
        )


def check_summary_current(folder: Path, models: list[str]) -> None:
    """Refuse summary tables that are not the models' tables as they are now (a per-model table re-made by a run
    with a target or ``--until`` that left the summary out), naming the first: ``layers.csv`` and ``geometry.csv``
    of ``models``, ``embedding_matrices.csv`` of the models it lists."""
    tables = {name: models for name in ("layers.csv", "geometry.csv") if models}
    if (folder / SUMMARY / EMBEDDING_MATRICES).is_file():
        listed = read_csv(folder / SUMMARY / EMBEDDING_MATRICES)["model"].astype(str).drop_duplicates().tolist()
        tables[EMBEDDING_MATRICES] = listed
    for name, listed in tables.items():
        if not is_stack_of(folder / SUMMARY / name, {model: folder / model / name for model in listed}):
            raise StatisticsError(
                f"{folder / SUMMARY / name} is not the models' {name} as they are now (one was re-made or removed "
                f"since); {FINISH}"
            )


def check_one_origin(results: Results) -> None:
    """Refuse a run whose tables of one model come from different sums (a run stopped half-way), naming them."""
    summary = results.folder / SUMMARY
    for name, listed in zip(results.models["model"].astype(str), results.models[SUMS_COLUMN].fillna("")):
        check_same_sums(
            name,
            {
                results.folder / name / "tokens.parquet": {results.metadata[name].get(SUMS_COLUMN) or ""},
                results.folder / name / "run.json": {results.provenance[name].get(SUMS_COLUMN) or ""},
                summary / "models.csv": {str(listed)},
                summary / "layers.csv": table_sums(results.layers, summary / "layers.csv", name),
                summary / "geometry.csv": table_sums(results.geometry, summary / "geometry.csv", name),
            },
        )


def run_folder(folder: Path, run: str | None) -> Path:
    """``folder/run``, or ``folder`` itself when it is a finished run's folder, or its single finished run."""
    if run is not None:
        folder = folder / run
    if is_finished_run(folder):
        return folder
    runs = sorted(child.name for child in folder.iterdir() if is_finished_run(child)) if folder.is_dir() else []
    if run is None and len(runs) == 1:
        return folder / runs[0]
    if runs:
        raise CtxvarError(f"{folder} holds the runs {', '.join(runs)}; name one: load_results({str(folder)!r}, run=…)")
    raise CtxvarError(
        f"{folder} holds no finished run (no {SUMMARY}/models.csv or {SUMMARY}/{EMBEDDING_MATRICES}); run "
        "snakemake for it first, or pass the folder the run wrote (results/<run>)"
    )


def is_finished_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run's summary: its models' tables, or for a run whose every model has
    ``forward: false`` its embedding matrices' alone."""
    return (folder / SUMMARY / "models.csv").is_file() or (folder / SUMMARY / EMBEDDING_MATRICES).is_file()
