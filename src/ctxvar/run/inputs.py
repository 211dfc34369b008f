"""The inputs a run reads from outside its config, identified at start-up so that results follow them.

Each model entry gets ``inputs``: the fingerprint of its local directory (path expanded and resolved) or of
its whole archive, or the commit its Hub revision names now. The corpus gets the fingerprints of its local
files, the Python whose documentation it is, or its Hub dataset's commit. A Hub revision is asked of the Hub when
it can be reached, else taken from the run's ledger (the commit its latest real start found,
:func:`ctxvar.run.hf_cache.recorded_commit`), else from the HF cache's ``refs/``; nothing is written into the
cache. Both enter the parameters of the jobs that read them and the hash the sums carry
(:func:`ctxvar.config.hashes.extraction_config_hash`), so a change re-runs exactly the jobs downstream of it;
extraction loads the Hub commit resolved here, so every shard of a local run reads the same files even when the
Hub's branch moves meanwhile (a cluster job starts Snakemake anew and resolves it again; partials of two commits
do not merge).
"""

from __future__ import annotations

import os
import sys

from ctxvar.config.entries import (
    built_in_run,
    corpus_paths,
    local_corpus,
    models_by_id,
    revision_of,
    runs_forward,
)
from ctxvar.config.hashes import corpus_settings, extraction_config_hash
from ctxvar.config.kinds import kind_of
from ctxvar.corpus import enwik8
from ctxvar.errors import CtxvarError
from ctxvar.files.atomic import read_json, write_json
from ctxvar.models import hub
from ctxvar.models.archive import archive_path
from ctxvar.models.files import directory_fingerprint, file_fingerprint
from ctxvar.run.hf_cache import recorded_commit
from ctxvar.stats.declarations import hashed_sums


def local_model_directory(name: str) -> str:
    """A local model ``name`` as the absolute path it names (``~`` expanded, links resolved)."""
    return os.path.realpath(os.path.expanduser(name))


def archive_record(model_folder) -> str:
    """The file beside an unpacked ``init: archive`` model's folder that keeps its archive's fingerprint."""
    return f"{os.fspath(model_folder).rstrip(os.sep)}.archive.json"


def record_archive_inputs(entry: dict, model_folder) -> None:
    """Keep the fingerprint the entry's archive had when ``model_folder`` was unpacked from it
    (:func:`archive_record`), for starts after the archive is gone."""
    write_json({"archive": (entry.get("inputs") or {}).get("archive")}, archive_record(model_folder))


def recorded_archive(model_folder) -> str | None:
    """The archive fingerprint :func:`record_archive_inputs` kept for ``model_folder``; None without one."""
    try:
        return read_json(archive_record(model_folder)).get("archive")
    except (CtxvarError, OSError, ValueError, AttributeError):
        return None


def model_inputs(entry: dict, run_folder=None) -> dict:
    """What identifies the files the entry's model is read from: ``{"files": …}`` for a local directory,
    ``{"archive": …}`` for an ``init: archive`` zip (the whole file, not only the members ``sha256`` lists),
    ``{"commit": …}`` for a Hub id whose revision resolves; ``{}`` for models built from the config alone.

    An archive gone since it was unpacked into ``run_folder/models/{id}`` keeps the fingerprint it had then
    (:func:`recorded_archive`): the unpacked folder's own checksums still hold, and nothing re-runs."""
    if kind_of(entry).packaged:
        try:
            return {"archive": file_fingerprint(str(archive_path(entry)))}
        except CtxvarError:
            folder = os.path.join(run_folder, "models", entry["id"]) if run_folder is not None else None
            return {"archive": recorded_archive(folder) if folder and os.path.isdir(folder) else None}
    if built_in_run(entry):
        return {}
    fingerprint = directory_fingerprint(local_model_directory(entry["name"]))
    if fingerprint is not None:
        return {"files": fingerprint}
    name, revision = entry["name"], revision_of(entry)
    return {
        "commit": hub.resolved_commit(name, revision, recorded=recorded_commit(run_folder, "model", name, revision))
    }


def hub_ids(models: dict[str, dict]) -> list[str]:
    """The entries of ``models`` whose revision :func:`model_inputs` asks of the Hub: neither built in the run,
    unpacked from an archive, nor a local directory."""
    return [
        mid
        for mid, entry in models.items()
        if not built_in_run(entry) and not os.path.isdir(local_model_directory(entry["name"]))
    ]


def resolution_notice(models: dict[str, dict]) -> str | None:
    """The line a start prints before it resolves its Hub models' revisions (:func:`with_inputs`), which takes a
    request each: what it waits for, or that the Hub cannot be reached and the HF cache answers; None with
    ``HF_HUB_OFFLINE`` set or no Hub model."""
    count = len(hub_ids(models))
    if not count or hub.offline():
        return None
    models_text = f"{count} Hub model{'s' if count > 1 else ''}"
    if hub.unavailable_reason() is not None:
        return (
            f"ctxvar: the Hugging Face Hub cannot be reached; the revisions of {models_text} are read from the HF "
            "cache (HF_HUB_OFFLINE=1 skips this check)"
        )
    return f"ctxvar: asking the Hub which commit the revisions of {models_text} name (HF_HUB_OFFLINE=1: the HF cache)"


def with_inputs(models: dict[str, dict], run_folder=None) -> dict[str, dict]:
    """``models`` (id → entry), each entry with its :func:`model_inputs` under ``inputs`` where it has any
    (``run_folder``: where archives are unpacked, for those gone since)."""
    resolved = {mid: (entry, model_inputs(entry, run_folder)) for mid, entry in models.items()}
    return {mid: {**entry, "inputs": inputs} if inputs else entry for mid, (entry, inputs) in resolved.items()}


def corpus_dataset(corpus: dict) -> tuple[str, str] | None:
    """The Hub dataset and revision the corpus reads: ``name`` and ``revision`` (``main`` when null) for
    ``source: hf``, the Parquet export of enwik8 without a path; None for the other corpora."""
    if corpus["source"] == "hf":
        return corpus["name"], corpus.get("revision") or "main"
    if corpus["source"] == "enwik8" and not local_corpus(corpus):
        return enwik8.HUB_ID, enwik8.HUB_REVISION
    return None


def hub_datasets(corpus: dict | None) -> list[dict]:
    """The corpus's Hub dataset as ``{"repo", "revision", "commit"}`` (the commit its ``inputs`` hold), for the
    run's ledger (:func:`ctxvar.run.hf_cache.record_cache_ledger`); empty for a corpus read from elsewhere."""
    dataset = corpus_dataset(corpus) if corpus else None
    if dataset is None:
        return []
    return [{"repo": dataset[0], "revision": dataset[1], "commit": (corpus.get("inputs") or {}).get("commit")}]


def corpus_inputs(corpus: dict, run_folder=None) -> dict:
    """What identifies the corpus's text beyond its config: local files' fingerprints, the documentation's
    Python, or the Hub dataset's commit (:func:`corpus_dataset`; None where unknown; ``run_folder``: the run whose
    ledger an offline start reads it from); ``{}`` for the generated corpus."""
    source = corpus["source"]
    if source == "python-docs":
        import pydoc_data.topics

        return {"python": sys.version, "topics": file_fingerprint(pydoc_data.topics.__file__)}
    if (dataset := corpus_dataset(corpus)) is not None:
        recorded = recorded_commit(run_folder, "dataset", *dataset)
        return {"commit": hub.resolved_commit(*dataset, "dataset", recorded=recorded)}
    if source == "synthetic":
        return {}
    return {"files": [file_fingerprint(path) for path in corpus_paths(corpus)]}


def run_inputs(config: dict, run_folder) -> tuple[dict[str, dict], dict | None]:
    """``(models, corpus)`` as the workflow reads them at start-up and the cost plan plans them: each models entry
    with what identifies its files (:func:`with_inputs`, the Hub's commits), the corpus settings with its inputs
    (:func:`corpus_inputs`) and without ``rows: null`` (:func:`ctxvar.config.hashes.corpus_settings`); None without
    a corpus. ``run_folder``: the run whose ledger an offline start reads the commits from."""
    models = with_inputs(models_by_id(config), run_folder)
    corpus = config.get("corpus")
    return models, corpus_settings({**corpus, "inputs": corpus_inputs(corpus, run_folder)}) if corpus else None


def sums_hash_of(config: dict, entry: dict, corpus: dict | None) -> str:
    """The hash a model's sums carry (what its extraction jobs write, and its merge's run.json): the config's
    extraction settings, the corpus's and the model's inputs (``entry`` and ``corpus`` from :func:`run_inputs`)."""
    return extraction_config_hash({**config, "corpus": corpus}, entry, hashed_sums(config["geometry"]))


def sums_hashes(config: dict, models: dict[str, dict], corpus: dict | None) -> dict[str, str]:
    """``{model: :func:`sums_hash_of`}`` for the models of ``models`` that run over the corpus."""
    return {mid: sums_hash_of(config, entry, corpus) for mid, entry in models.items() if runs_forward(entry)}
