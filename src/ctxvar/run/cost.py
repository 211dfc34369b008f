"""The cost plan of a run, before its first job: which models it runs and what each costs (the tokens of its
forward pass, its downloads, its time on a GPU and on a CPU at the committed benchmarks' rates, the disk its sums
take), and the corpus it downloads; the Snakefile prints it as one short block at the start and at the end of a
dry run and before a large run, and ``python -m ctxvar.run.cost CONFIG…`` prints it with one row per model.

Every number is an estimate, made from what is known before anything runs:

- **Tokens**: the sampled corpus's words × 1.4 plus [bos]/[eos] per sentence once the corpus is sampled
  (:func:`ctxvar.run.resources.shard_tokens`); before, from the corpus settings and the source's size where they
  are known (synthetic: ``n_sentences`` × ``mean_words``; enwik8: pieces of 512 characters, 6 characters a word;
  the Python documentation: its sentences' words; a Hub dataset of ``hub_datasets.csv``: its rows and text bytes
  from its dataset card, 6 characters a word), else unknown.
- **Shapes**: a model's entry (built in the run), its config.json (a local folder or the HF cache), an archive's
  config.json or its GGUF file's header (a model to unpack or convert), else ``hub_shapes.csv`` beside this module
  (the published shapes of the studies' Hub models); else unknown, each such model named with the reason. A
  config.json that gives a mixture of experts (:func:`ctxvar.run.resources.moe_block`) gives its blocks' work
  and parameters.
- **Downloads**: nothing for a local, built or cached model (a weights file in the revision's snapshot); else
  the checkpoint: the total its cached shard index states (``metadata.total_size``), else parameters × bytes per
  stored parameter. A model with ``forward: false`` downloads the files holding its embedding matrices: the
  matrices alone where they are in files of their own (``V · d`` each, at most two) and the whole checkpoint where
  it is one file (``model.safetensors``, ``pytorch_model.bin``): both ends are given. The corpus: nothing for a
  local, generated or cached one (its files in the HF cache, where ``datasets`` keeps them); a Hub dataset of
  ``hub_datasets.csv`` at most its text's bytes (the Parquet export compresses them), enwik8 from the Hub at most
  its 10⁸ bytes. Their time at :data:`DOWNLOAD_BYTES_PER_S`, an assumed bandwidth.
- **Time**: tokens at the rate the committed benchmark measured for the same dtype (float16 at bfloat16's) and
  job (the paper's sums, or with geometry), plus the seconds that job took to read its model's files once per
  shard, both scaled from the measured model nearest in size by the blocks' multiply-adds (12 · (L − 1) · d² a
  token for a dense model): on each GPU kind of ``gpu_rates.csv`` (``bench/gpu.py``, made by
  ``bench/gpu_rates.py``), and on the CPU of ``cpu_rates.csv`` (``bench/extraction_and_merge.py``, made by
  ``bench/cpu_rates.py``), which the block gives when the run extracts on a CPU (``device: cpu``, or ``auto`` on a
  machine without an NVIDIA driver: :func:`ctxvar.run.resources.extraction_device`). The downloads are not in it.
  Where a model runs no forward pass, the block also gives the CPU time of the embedding-matrix statistics of
  every model with weights: one matrix's seconds measured at the nearest width (``cpu_matrix_seconds.csv``,
  ``bench/cpu_rates.py --matrices``) scaled by V · d², for one matrix a model (tied, or saved without a head) to
  two.
- **Disk**: the sums of :mod:`ctxvar.run.disk` (merged files and one model's partials at a time): an estimate,
  the types by Heaps' law (:class:`ctxvar.run.disk.TypeGrowth`: the sampled corpus's own words once it is
  sampled, else the fit to real tokenizers), beside the upper bound that takes every token for a type of its own;
  the HF cache holds every download, or with ``hf_cache.remove_after_use`` the largest one for each model whose
  jobs run at once (parallel jobs, shards of several models in flight: not a bound on the whole run).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from ctxvar.config.entries import (
    built_in_run,
    corpus_paths,
    is_local_path,
    load_revision,
    local_corpus,
    model_source,
    models_by_id,
    runs_forward,
)
from ctxvar.config.kinds import kind_of
from ctxvar.corpus import enwik8
from ctxvar.corpus.enwik8 import PIECE_CHARACTERS, pieces_at_most
from ctxvar.corpus.sources import PARQUET_EXPORT, source_rows_at_most
from ctxvar.errors import ConfigError, CtxvarError, size_text
from ctxvar.models import hub
from ctxvar.models.completeness import SHARD_INDEX
from ctxvar.run.disk import TOKEN_TYPES, TypeGrowth, model_disk_bytes, packaged_model, sample_type_growth
from ctxvar.run.end import made_from
from ctxvar.run.inputs import run_inputs, sums_hashes
from ctxvar.run.resources import (
    DOWNLOAD_BYTES_PER_S,
    TOKENS_PER_WORD,
    ModelShape,
    extraction_device,
    known_model_shape,
    shard_tokens,
)

CHARACTERS_PER_WORD = 6  # English prose and Wikipedia markup, spaces included
ENWIK8_BYTES = 10**8  # the Hutter Prize's file, as the Hub's LTCB/enwik8 holds it
STORED_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}  # config.json's torch_dtype → bytes per parameter
RATE_DTYPE = {"float16": "bfloat16"}  # a dtype measured at another's rate (the same tensor cores)
NAMES_SHOWN = 6  # models (or checkpoint families) the block names before "and N more"
WEIGHT_INDEXES = (SHARD_INDEX, "pytorch_model.bin.index.json")  # a sharded checkpoint's map


@dataclass
class ModelCost:
    """One model's share of the plan; None where it cannot be known before the run (``unknown`` says why)."""

    model: str
    family: str  # the models entry it comes from: its id, or with revisions the family's
    forward: bool
    shape: ModelShape | None
    parameters: int | None
    tokens: int | None  # of its forward pass (0 for forward: false)
    download: tuple[int, int] | None  # (least, most) bytes; (0, 0) when nothing is downloaded
    gpu_seconds: dict[str, float]  # by GPU kind; empty when unknown or without a forward pass
    sums: tuple[int, int] | None  # (merged files, all its partials) bytes: upper bounds
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # by the CPU measured, as gpu_seconds
    sums_estimate: tuple[int, int] | None = None  # the same with the types estimated (module docstring)
    name: str = ""  # as the config names it: a Hub id or path, else its id
    weighted: bool = True  # whether it has weight matrices (every model but init: gaussian)
    unknown: str | None = None  # why its shape or size is not known before the run


@dataclass
class CorpusCost:
    """The corpus's share of the plan: what it is, its tokens a model, and its download."""

    what: str  # the source, as the block names it
    tokens: int | None  # a model's forward pass over it; None before it is sampled where its size is not known
    download: int | None  # bytes at most; 0 for nothing to download; None when not known
    download_note: str  # where the download figure comes from, or why it is not known
    sampled: bool  # whether the run's sample exists (its tokens and types are then the sample's)


@dataclass
class Plan:
    """The plan of a run: its models still to run, its corpus, and where extraction runs (``cuda`` or ``cpu``)."""

    models: list[ModelCost]
    corpus: CorpusCost | None
    device: str
    types_from: str  # where the disk estimate's types come from
    device_setting: str = "auto"  # the config's device, which gave ``device``


def csv_rows(name: str) -> list[dict]:
    """The rows of the CSV file ``name`` beside this module."""
    with resources.files(__package__).joinpath(name).open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@cache
def hub_shapes() -> dict[str, tuple[ModelShape, int, int]]:
    """``{Hub id: (shape, parameters, bytes per stored parameter)}`` of ``hub_shapes.csv``."""
    return {
        row["name"]: (
            ModelShape(int(row["hidden_states"]), int(row["d"]), int(row["vocab_size"])),
            int(row["parameters"]),
            int(row["bytes_per_parameter"]),
        )
        for row in csv_rows("hub_shapes.csv")
    }


@cache
def hub_datasets() -> dict[str, dict]:
    """``{Hub id: row}`` of ``hub_datasets.csv``: a dataset's rows and text bytes (``rows``, ``text_bytes``) in
    the configuration and split named, as its dataset card's ``dataset_info`` gives them."""
    return {
        row["name"]: {**row, "rows": int(row["rows"]), "text_bytes": int(row["text_bytes"])}
        for row in csv_rows("hub_datasets.csv")
    }


def measured_rates(name: str, kind: str) -> list[dict]:
    """The rows of a rates file (``gpu_rates.csv``, ``cpu_rates.csv``), each with its ``kind`` (the GPU kind, or
    the CPU as the benchmark's report names it: column ``kind``) and the blocks' work of its model."""
    return [
        {
            **row,
            "kind": row[kind],
            "geometry": row["geometry"] == "True",
            "blocks": ModelShape(int(row["hidden_states"]), int(row["d"]), vocab_size=0).block_work,
        }
        for row in csv_rows(name)
    ]


@cache
def gpu_rates() -> list[dict]:
    """The rows of ``gpu_rates.csv`` (``bench/gpu_rates.py``)."""
    return measured_rates("gpu_rates.csv", "gpu")


@cache
def cpu_rates() -> list[dict]:
    """The rows of ``cpu_rates.csv`` (``bench/cpu_rates.py``)."""
    return measured_rates("cpu_rates.csv", "machine")


@cache
def cpu_matrix_seconds() -> list[dict]:
    """The rows of ``cpu_matrix_seconds.csv`` (``bench/cpu_rates.py --matrices``): seconds of one matrix's
    embedding-matrix statistics measured at ``rows`` × ``d`` on ``machine``."""
    return [
        {"machine": row["machine"], "rows": int(row["rows"]), "d": int(row["d"]), "seconds": float(row["seconds"])}
        for row in csv_rows("cpu_matrix_seconds.csv")
    ]


def matrix_seconds(shape: ModelShape) -> dict[str, float]:
    """Seconds of one embedding matrix's statistics (V × d: its rows of embedding_matrices.csv and of
    embedding_projection.parquet) on each CPU of :func:`cpu_matrix_seconds`: the measurement nearest in d, scaled by
    V · d² (the product WᵀW and the SVD, uncentred and centred)."""
    seconds = {}
    for machine in sorted({row["machine"] for row in cpu_matrix_seconds()}):
        rows = [row for row in cpu_matrix_seconds() if row["machine"] == machine]
        nearest = min(rows, key=lambda row: abs(math.log(row["d"] / shape.d)))
        seconds[machine] = nearest["seconds"] * shape.vocab_size * shape.d**2 / (nearest["rows"] * nearest["d"] ** 2)
    return seconds


def scaled_seconds(
    rates: list[dict], tokens: int, shape: ModelShape, dtype: str, geometry: bool, jobs: int = 0
) -> dict[str, float]:
    """Seconds of an extraction of ``tokens`` tokens in ``jobs`` jobs (each reads the model's files) on each kind
    of ``rates``: the rate measured for the dtype (else any) and job (else any) of the model nearest in blocks'
    work, scaled by the work (module docstring)."""
    seconds = {}
    work = shape.block_work  # 0 without blocks (the Gaussian null without its LayerNorm)
    for kind in sorted({row["kind"] for row in rates}):
        rows = [row for row in rates if row["kind"] == kind]
        wanted = RATE_DTYPE.get(dtype, dtype)
        rows = [row for row in rows if row["dtype"] == wanted] or rows
        rows = [row for row in rows if row["geometry"] == geometry] or rows
        # the nearest in work; of rows as near, the slowest
        nearest = min(rows, key=lambda row: (abs(math.log(row["blocks"] / max(work, 1))), float(row["tokens_per_s"])))
        measured = tokens / float(nearest["tokens_per_s"]) + jobs * float(nearest["read_seconds"])
        seconds[kind] = measured * work / nearest["blocks"]
    return seconds


def gpu_seconds(tokens: int, shape: ModelShape, dtype: str, geometry: bool, jobs: int = 0) -> dict[str, float]:
    """:func:`scaled_seconds` on each GPU kind of :func:`gpu_rates`."""
    return scaled_seconds(gpu_rates(), tokens, shape, dtype, geometry, jobs)


def cpu_seconds(tokens: int, shape: ModelShape, dtype: str, geometry: bool, jobs: int = 0) -> dict[str, float]:
    """:func:`scaled_seconds` on the CPU of :func:`cpu_rates`."""
    return scaled_seconds(cpu_rates(), tokens, shape, dtype, geometry, jobs)


def corpus_tokens(config: dict, run_folder) -> int | None:
    """The corpus's tokens (module docstring); None when its size is not known before it is sampled."""
    sentences = os.path.join(run_folder, "corpus", "sentences.parquet")
    if os.path.exists(sentences):
        return shard_tokens(sentences)
    corpus = config.get("corpus") or {}
    source = corpus.get("source")
    if source == "synthetic":
        generated = corpus["synthetic"]
        rows = drawn(corpus, generated["n_sentences"])
        return int(TOKENS_PER_WORD * rows * generated["mean_words"]) + 2 * rows
    if source == "enwik8":
        try:  # a zip's text, not its compressed bytes
            pieces = enwik8_pieces(corpus)
        except CtxvarError:  # a zip without enwik8: the start says so
            return None
        rows = drawn(corpus, pieces)
        return int(TOKENS_PER_WORD * rows * PIECE_CHARACTERS / CHARACTERS_PER_WORD) + 2 * rows
    if source == "python-docs":
        from ctxvar.corpus.python_docs import python_docs_sentences

        lengths = [len(sentence.split()) for sentence in python_docs_sentences()]
        kept = [words for words in lengths if words <= corpus.get("max_words", math.inf)]
        share = drawn(corpus, len(lengths)) / max(len(lengths), 1)
        return int(share * (TOKENS_PER_WORD * sum(kept) + 2 * len(kept)))
    if source == "hf" and (known := hub_datasets().get(corpus.get("name"))):
        rows = drawn(corpus, known["rows"])
        words = known["text_bytes"] / known["rows"] / CHARACTERS_PER_WORD
        return int(rows * (TOKENS_PER_WORD * words + 2))
    return None


def enwik8_pieces(corpus: dict) -> int:
    """The pieces of 512 characters enwik8's text holds at most: a local file's (:func:`pieces_at_most`), the
    Hub's 10⁸ bytes' (a character is at least a byte)."""
    path = next(iter(corpus_paths(corpus)), "")  # one file, or a list of one
    return pieces_at_most(path) if path and os.path.isfile(path) else ENWIK8_BYTES // PIECE_CHARACTERS


def drawn(corpus: dict, rows_in_source: int) -> int:
    """Rows the sampling keeps of ``rows_in_source``: ``corpus.rows`` if set, else ``fraction`` of them."""
    rows = corpus.get("rows")
    return min(rows, rows_in_source) if rows else int(corpus.get("fraction", 1.0) * rows_in_source)


def source_rows(corpus: dict) -> tuple[int, str] | None:
    """``(R, what R is)``: rows of the corpus's source, or an upper bound on them, known before any job runs;
    None where it is not known (a local file read beyond :data:`ctxvar.corpus.sources.ROWS_READ_LIMIT`, a Hub
    dataset not in ``hub_datasets.csv``)."""
    source = corpus["source"]
    if source == "synthetic":
        return corpus["synthetic"]["n_sentences"], "synthetic.n_sentences"
    if source == "python-docs":
        from ctxvar.corpus.python_docs import python_docs_sentences

        return len(python_docs_sentences()), "the Python documentation's sentences"
    if source == "enwik8":
        try:
            return enwik8_pieces(corpus), f"at most, enwik8's pieces of {PIECE_CHARACTERS} characters"
        except CtxvarError:
            return None  # the start-up check of the file names it
    if source == "hf":
        known = hub_datasets().get(corpus.get("name"))
        return (known["rows"], f"{corpus['name']}'s dataset card") if known else None
    whole = {**corpus, "rows": None, "fraction": 1.0, "sampling": "paper"}
    counted = source_rows_at_most(whole, (corpus.get("rows") or 0) + 1)  # stops once past rows
    return (counted, "at most, the files' rows") if counted is not None else None


def check_rows_drawable(corpus: dict) -> None:
    """Raise :class:`ConfigError` when ``corpus.rows`` asks more rows than its source holds (:func:`source_rows`):
    sampling would refuse it, after the downloads."""
    if not corpus.get("rows") or (known := source_rows(corpus)) is None:
        return
    available, what = known
    if corpus["rows"] > available:
        remedy = f"set corpus.rows to at most {available}, or use" if available else "use"
        raise ConfigError(
            f"corpus.rows: {corpus['rows']} rows asked of a source of {available} rows ({what}); {remedy} a larger "
            "corpus"
        )


def dataset_cached(name: str, revision: str, data_dir: str | None, split: str | None) -> bool:
    """Whether the HF cache holds the Hub dataset's files that :func:`ctxvar.corpus.sources.load_hub_dataset`
    reads: a file under the revision's snapshot, in the Parquet export's ``{data_dir}/{split}/`` (else under
    ``data_dir``, else anywhere). A snapshot holding some of them counts as cached: offline, nothing tells how
    many there are."""
    commit = hub.cached_commit(name, revision, "dataset")
    if commit is None:
        return False
    folder = os.path.join(hub.repo_folder(name, "dataset"), "snapshots", commit)
    if data_dir and revision == PARQUET_EXPORT and split:
        folder = os.path.join(folder, data_dir, split)
    elif data_dir:
        folder = os.path.join(folder, data_dir)
    return any(not file.startswith(".") and file != "README.md" for _, _, files in os.walk(folder) for file in files)


def corpus_plan(config: dict, run_folder) -> CorpusCost | None:
    """The corpus's :class:`CorpusCost` (module docstring); None without a corpus (no model reads one)."""
    corpus = config.get("corpus")
    if not corpus:
        return None
    tokens = corpus_tokens(config, run_folder)
    sampled = os.path.exists(os.path.join(run_folder, "corpus", "sentences.parquet"))
    source = corpus["source"]
    if source == "synthetic":
        return CorpusCost("the synthetic corpus", tokens, 0, "generated", sampled)
    if source == "python-docs":
        return CorpusCost("the Python documentation's prose", tokens, 0, "installed with Python", sampled)
    if local_corpus(corpus):
        return CorpusCost(f"{source} files, {', '.join(map(str, corpus_paths(corpus)))}", tokens, 0, "local", sampled)
    if source == "enwik8":
        what = f"enwik8 ({enwik8.HUB_ID} on the Hub)"
        if dataset_cached(enwik8.HUB_ID, enwik8.HUB_REVISION, enwik8.HUB_CONFIG, "train"):
            return CorpusCost(what, tokens, 0, "in the HF cache", sampled)
        return CorpusCost(what, tokens, ENWIK8_BYTES, "its text's bytes, which Parquet compresses", sampled)
    name, revision = corpus["name"], corpus.get("revision") or "main"
    what = f"{name} on the Hub" + (f" ({corpus['data_dir']}/{corpus['split']})" if corpus.get("data_dir") else "")
    if dataset_cached(name, revision, corpus.get("data_dir"), corpus.get("split")):
        return CorpusCost(what, tokens, 0, "in the HF cache", sampled)
    known = hub_datasets().get(name)
    if known is None:
        return CorpusCost(what, tokens, None, "size unknown: not in src/ctxvar/run/hub_datasets.csv", sampled)
    return CorpusCost(
        what, tokens, known["text_bytes"], "its text's bytes by its dataset card, which Parquet compresses", sampled
    )


def weights_cached(entry: dict, source: str) -> bool:
    """Whether a Hub model's revision has its weights in the HF cache's snapshot: every file a sharded
    checkpoint's index names (a ``forward: false`` job fetches only those that hold the embedding matrices),
    else a weights file."""
    config_path = hub.model_file(source, "config.json", load_revision(entry))
    if config_path is None:
        return False
    snapshot = os.path.dirname(config_path)
    names = os.listdir(snapshot)
    for index in (name for name in WEIGHT_INDEXES if name in names):
        try:
            with open(os.path.join(snapshot, index), encoding="utf-8") as handle:
                files = set(json.load(handle)["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # unreadable: as if not there
            return False
        return all(os.path.isfile(os.path.join(snapshot, name)) for name in files)
    return any(
        name.endswith((".safetensors", ".bin")) and os.path.isfile(os.path.join(snapshot, name)) for name in names
    )


def indexed_bytes(entry: dict, source: str) -> int | None:
    """The bytes of a sharded checkpoint's weights as its shard index in the HF cache or folder states them
    (``metadata.total_size``); None without one."""
    for index in WEIGHT_INDEXES:
        total = ((hub.model_json(source, index, load_revision(entry)) or {}).get("metadata") or {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total
    return None


def unknown_shape(entry: dict, source: str) -> str:
    """Why a model's shape is not known before its first job (``source``: where its files are read from)."""
    if kind_of(entry).packaged:
        return "its archive's config.json or GGUF header cannot be read; its unpacking job says why"
    if is_local_path(entry.get("name", "")):
        return f"{entry['name']} has no readable config.json"
    path = hub.model_file(source, "config.json", load_revision(entry))
    if isinstance(path, str) and os.path.isfile(path):
        return "its config.json in the HF cache cannot be read (damaged, or not a JSON object); its first job says why"
    return "shape unknown: in neither the HF cache nor src/ctxvar/run/hub_shapes.csv until its first job downloads it"


def model_cost(
    entry: dict, config: dict, run_folder, tokens: int | None, growth: TypeGrowth = TOKEN_TYPES
) -> ModelCost:
    """The plan of one models entry (module docstring), its sums' types by ``growth``."""
    source = model_source(entry, run_folder)
    forward = runs_forward(entry)
    shape = known_model_shape(entry, source)
    if shape is None and kind_of(entry).packaged and not os.path.isdir(source):
        shape = packaged_model(entry)[0]  # its config.json in the zip, or its GGUF file's header
    catalogued = hub_shapes().get(entry.get("name", ""))
    parameters, stored = (catalogued[1], catalogued[2]) if catalogued else (None, 4)
    if shape is None and catalogued:
        shape = catalogued[0]
    if shape is not None and parameters is None:
        parameters = shape.parameters
        torch_dtype = (hub.model_json(source, "config.json", load_revision(entry)) or {}).get("torch_dtype")
        stored = STORED_BYTES.get(str(torch_dtype), 4)
    local = built_in_run(entry) or is_local_path(entry.get("name", ""))
    whole = None if local else indexed_bytes(entry, source)
    if whole is not None:  # the files' own total: a mixture of experts is not the dense formula's size
        parameters = whole // stored
    if local or weights_cached(entry, source):
        download = (0, 0)
    elif parameters is None:
        download = None
    else:
        whole = whole or parameters * stored
        if forward:
            download = (whole, whole)
        elif shape is None:  # the shard index's total alone (its config.json unreadable): no matrices to size
            download = (0, whole)
        else:
            download = (min(2 * shape.vocab_size * shape.d * stored, whole), whole)
    own_tokens = tokens if forward else 0
    seconds, on_cpu, sums, estimate = {}, {}, None, None
    if forward and shape is not None and tokens is not None:
        geometry = any(config["geometry"][switch] for switch in ("covariance", "cosine", "twonn", "ethayarajh"))
        seconds = gpu_seconds(tokens, shape, config["dtype"], geometry, jobs=config["shards"])
        on_cpu = cpu_seconds(tokens, shape, config["dtype"], geometry, jobs=config["shards"])
        per_shard = [math.ceil(tokens / config["shards"])] * config["shards"]
        sums = model_disk_bytes(entry["id"], shape, per_shard, config, run_folder)
        estimate = model_disk_bytes(entry["id"], shape, per_shard, config, run_folder, growth)
    return ModelCost(
        model=entry["id"],
        family=entry.get("family") or entry["id"],
        forward=forward,
        shape=shape,
        parameters=parameters,
        tokens=own_tokens,
        download=download,
        gpu_seconds=seconds,
        sums=sums,
        cpu_seconds=on_cpu,
        sums_estimate=estimate,
        name=entry.get("name") or entry["id"],
        weighted=kind_of(entry).has_weights,
        unknown=None if shape is not None and download is not None else unknown_shape(entry, source),
    )


def plan(config: dict, run_folder, sums: dict[str, str] | None = None) -> Plan:
    """The :class:`Plan` of ``config`` (validated, with the schema's defaults): one :class:`ModelCost` per model
    still to run: a model whose merged sums (or, with ``forward: false``, embedding_matrices.csv) exist is left
    out; given ``sums`` (model → the hash its sums carry under this config: :func:`sums_hashes`, as the workflow
    computes it), only if its run.json names that hash: sums of another setting (dtype, the corpus, …) are
    extracted again."""
    corpus = corpus_plan(config, run_folder)
    tokens = corpus.tokens if corpus else None
    growth = (
        sample_type_growth(os.path.join(run_folder, "corpus", "sentences.parquet"))
        if corpus and corpus.sampled
        else None
    )
    types_from = "the sample's own words" if growth else "fitted to real tokenizers"
    costs = []
    for mid, entry in models_by_id(config).items():
        folder = os.path.join(run_folder, mid)
        if runs_forward(entry):
            done = os.path.exists(os.path.join(folder, "sums.parquet")) and (
                sums is None or made_from(os.path.join(folder, "run.json")) == {sums.get(mid)}
            )
        else:
            done = os.path.exists(os.path.join(folder, "embedding_matrices.csv"))
        if not done:
            costs.append(model_cost(entry, config, run_folder, tokens, growth or TOKEN_TYPES))
    device = config.get("device", "auto")
    return Plan(costs, corpus, extraction_device(device), types_from, device)


LARGE_GPU_HOURS = 1.0
LARGE_DOWNLOAD_BYTES = 10**9


def large_run(planned: Plan) -> bool:
    """Whether a real run prints its plan before its first job: an hour of GPU time on a measured GPU (of CPU
    time where it extracts on a CPU), 1 GB of downloads, or a model or corpus of unknown size. A corpus not
    sampled yet alone does not make a run large: a first start has not sampled its corpus, and a run of local
    models on it would print a plan of unknowns."""
    costs = planned.models
    corpus = planned.corpus
    if any(cost.download is None for cost in costs) or (corpus and corpus.download is None and costs):
        return True
    field_name = "cpu_seconds" if planned.device == "cpu" else "gpu_seconds"
    kinds = {kind for cost in costs for kind in getattr(cost, field_name)}
    most_hours = max((sum(getattr(c, field_name).get(kind, 0.0) for c in costs) / 3600 for kind in kinds), default=0.0)
    downloaded = sum(cost.download[1] for cost in costs) + (corpus.download if corpus and costs else 0)
    return most_hours >= LARGE_GPU_HOURS or downloaded >= LARGE_DOWNLOAD_BYTES


def hours(seconds: float) -> str:
    """Hours to 2 significant digits below 100, else whole: 0.017, 4.6, 46, 1,234; under a thousandth, "< 0.001"
    (seconds of work, not 5.1e-06)."""
    if 0 < seconds < 3.6:
        return "< 0.001"
    return f"{seconds / 3600:.2g}" if seconds < 100 * 3600 else f"{seconds / 3600:,.0f}"


def duration(seconds: float) -> str:
    """``seconds`` as a person reads a wait: "40 s", "12 min", "3.4 h", "1,234 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{hours(seconds)} h"


def named(labels: list[str], shown: int = NAMES_SHOWN) -> str:
    """``labels`` joined: all of them, or the first ``shown`` and how many more."""
    if len(labels) <= shown:
        return ", ".join(labels)
    return ", ".join(labels[:shown]) + f" and {len(labels) - shown} more"


def by_family(costs: list[ModelCost]) -> dict[str, list[ModelCost]]:
    """``costs`` grouped by the models entry they come from (a family's checkpoints together), in config order."""
    families: dict[str, list[ModelCost]] = {}
    for cost in costs:
        families.setdefault(cost.family, []).append(cost)
    return families


def family_labels(costs: list[ModelCost]) -> list[str]:
    """One label per models entry: its name, with a checkpoint family's count of revisions (``name ×13``)."""
    return [
        members[0].name + (f" ×{len(members)}" if len(members) > 1 else "") for members in by_family(costs).values()
    ]


def not_counted(costs: list[ModelCost]) -> str:
    """``; not counted: a, b (why)`` for the models of unknown cost, grouped by why; empty when there are none."""
    reasons: dict[str, list[str]] = {}
    for cost in costs:
        if cost.unknown:
            reasons.setdefault(cost.unknown, []).append(cost.name)
    return "".join(f"; not counted: {named(models, 3)} ({why})" for why, models in reasons.items())


def block(planned: Plan, config: dict, remove_after_use: bool = False, command: str | None = None) -> str:
    """The plan as the short block the Snakefile prints: the models, the corpus, the totals and what could not
    be estimated, and the command that prints one row per model (``command``)."""
    costs = planned.models
    if not costs:
        return "cost plan: nothing left to run"
    forward = [cost for cost in costs if cost.forward]
    checkpoints = f"; {len(costs)} checkpoints" if len(family_labels(costs)) < len(costs) else ""
    lines = [
        f"cost plan: {len(forward)} models run over the corpus, {len(costs) - len(forward)} their embedding "
        "matrices alone (estimates: docs/performance.md, cost plan)",
        f"  models          {named(family_labels(costs))}{checkpoints}",
    ]
    corpus = planned.corpus if forward else None
    if corpus:
        download = (
            "nothing to download"
            if corpus.download == 0
            else "download unknown"
            if corpus.download is None
            else f"≤ {size_text(corpus.download)} to download"
        )
        lines.append(f"  corpus          {corpus.what}: {download} ({corpus.download_note})")
    if forward:
        known_tokens = [cost.tokens for cost in forward if cost.tokens is not None]
        each = (
            f"≈ {known_tokens[0]:,} a model"
            if known_tokens
            else "unknown until the corpus is sampled (snakemake --until sample_corpus)"
        )
        shards = f"{config['shards']} shard" + ("s" if config["shards"] > 1 else "")
        lines.append(f"  forward tokens  {each} (dtype {config['dtype']}, {shards} a model)")
    lines.append(download_line(costs, corpus))
    lines.extend(time_lines(planned))
    if len(forward) < len(costs):
        lines.extend(matrix_time_lines(costs))
    estimates = [cost.sums_estimate for cost in forward if cost.sums_estimate is not None]
    if forward and not estimates and corpus and corpus.tokens is not None:
        lines.append("  disk            unknown" + not_counted(forward))
    if estimates:
        bounds = [cost.sums for cost in forward if cost.sums is not None]
        peak = sum(merged for merged, _ in estimates) + max(partials for _, partials in estimates)
        bound = sum(merged for merged, _ in bounds) + max(partials for _, partials in bounds)
        lines.append(
            f"  disk            ≈ {size_text(peak)} of sums at the peak (one model's partials at a time; types by "
            f"Heaps' law, {planned.types_from}); ≤ {size_text(bound)} if every token were a type of its own"
            + not_counted(forward)
        )
    downloads = [cost.download for cost in costs if cost.download is not None]
    if any(most for _, most in downloads) and remove_after_use:
        largest = max(most for _, most in downloads)
        lines.append(
            f"  HF cache        ≈ {size_text(largest)} for each model in flight (the largest checkpoint: each "
            "removed once used; models run side by side hold theirs at once)"
        )
    elif any(most for _, most in downloads):
        least, most = sum(d[0] for d in downloads), sum(d[1] for d in downloads)
        lines.append(
            f"  HF cache        ≈ {span(least, most)} (every download kept; hf_cache.remove_after_use removes them)"
        )
    if command:
        lines.append(f"  per model       {command}")
    return "\n".join(lines)


def span(least: int, most: int) -> str:
    """A size, or a range of sizes."""
    return size_text(least) if least == most else f"{size_text(least)} to {size_text(most)}"


def download_line(costs: list[ModelCost], corpus: CorpusCost | None) -> str:
    """The downloads: the checkpoints not in the HF cache, the corpus, their time at the assumed bandwidth, and
    the models of unknown size."""
    downloads = [cost.download for cost in costs if cost.download is not None]
    least, most = sum(d[0] for d in downloads), sum(d[1] for d in downloads)
    fetched = sum(d[1] > 0 for d in downloads)
    parts = [f"≈ {span(least, most)} of checkpoints ({fetched} not in the HF cache)" if most else "no checkpoints"]
    if corpus and corpus.download:
        parts.append(f"≤ {size_text(corpus.download)} of corpus")
    extra = (corpus.download or 0) if corpus else 0
    waits = list(dict.fromkeys(duration((size + extra) / DOWNLOAD_BYTES_PER_S) for size in (least, most)))
    wait = (
        f"; ≈ {' to '.join(waits)} at {DOWNLOAD_BYTES_PER_S / 1e6:.0f} MB/s (an assumed bandwidth)"
        if most + extra
        else ""
    )
    corpus_unknown = "; the corpus's size unknown" if corpus and corpus.download is None else ""
    unknown = [cost for cost in costs if cost.download is None]
    return f"  downloads       {' + '.join(parts)}{wait}{corpus_unknown}" + not_counted(unknown)


def time_lines(planned: Plan) -> list[str]:
    """The GPU-hours on each measured GPU kind, and the CPU-hours where the run extracts on a CPU; the models
    whose time is not known named with the reason."""
    forward = [cost for cost in planned.models if cost.forward]
    if not forward:
        return []
    if planned.corpus is None or planned.corpus.tokens is None:
        return ["  GPU-hours       unknown until the corpus is sampled (snakemake --until sample_corpus)"]
    lines = []
    for gpu in sorted({row["kind"] for row in gpu_rates()}):
        total = total_hours([cost.gpu_seconds.get(gpu) for cost in forward])
        lines.append(f"  GPU-hours       {total} on one {gpu} (rates of bench/results/gpu.csv)" + not_counted(forward))
    if planned.device == "cpu":
        why = "device: cpu" if planned.device_setting == "cpu" else "device: auto, and no NVIDIA driver here"
        for machine in sorted({row["kind"] for row in cpu_rates()}):
            total = total_hours([cost.cpu_seconds.get(machine) for cost in forward])
            lines.append(
                f"  CPU-hours       {total} on {machine} (rates of bench/results/results.csv), where this run "
                f"extracts ({why})" + not_counted(forward)
            )
    return lines


def matrix_time_lines(costs: list[ModelCost]) -> list[str]:
    """The CPU-hours of the embedding-matrix statistics of ``costs``' models that have weights, one matrix a model
    (tied, or a model saved without its head) to two (:func:`matrix_seconds`); the models of unknown shape named."""
    weighted = [cost for cost in costs if cost.weighted]
    lines = []
    for machine in sorted({row["machine"] for row in cpu_matrix_seconds()}):
        one = [matrix_seconds(cost.shape)[machine] for cost in weighted if cost.shape is not None]
        if not one:
            return ["  CPU-hours       of the embedding-matrix statistics: unknown" + not_counted(weighted)]
        least, most = total_hours(one), total_hours([2 * seconds for seconds in one])
        both = least if least == most else f"{least} to {most.removeprefix('≈ ')}"
        lines.append(
            f"  CPU-hours       {both} of the embedding-matrix statistics on {machine} (rates of bench/cpu_rates.py "
            "--matrices; one or two matrices a model, no GPU)" + not_counted([c for c in weighted if c.shape is None])
        )
    return lines


def total_hours(seconds: list[float | None]) -> str:
    """The known ``seconds`` summed, in hours (:func:`hours`) after "≈ ", or "unknown" when none is known."""
    known = [value for value in seconds if value is not None]
    if not known:
        return "unknown"
    total = hours(sum(known))
    return total if total.startswith("<") else f"≈ {total}"


def table(planned: Plan) -> list[dict]:
    """One row per models entry (a family's checkpoints together): what the plan counts for it, summed over its
    checkpoints (``python -m ctxvar.run.cost``); a sum with an unknown part is left empty."""
    costs = planned.models
    gpus = sorted({gpu for cost in costs for gpu in cost.gpu_seconds})
    rows = []
    for family, members in by_family(costs).items():
        first = members[0]
        downloads = [cost.download for cost in members]
        known = None not in downloads
        row = {
            "model": family,
            "checkpoints": len(members),
            "forward": first.forward,
            "parameters": first.parameters,
            "tokens_each": first.tokens,
            "download_gb": (
                span_text(sum(d[0] for d in downloads) / 1e9, sum(d[1] for d in downloads) / 1e9) if known else None
            ),
        }
        for gpu in gpus:
            row[f"{gpu}_minutes"] = summed_minutes([cost.gpu_seconds.get(gpu) for cost in members if cost.forward])
        if planned.device == "cpu" and any(cost.cpu_seconds for cost in costs):
            row["cpu_minutes"] = summed_minutes(
                [next(iter(cost.cpu_seconds.values()), None) for cost in members if cost.forward]
            )
        for column, sums in (
            ("sums_gb", [cost.sums_estimate for cost in members if cost.forward]),
            ("sums_bound_gb", [cost.sums for cost in members if cost.forward]),
        ):
            row[column] = float(f"{sum(s[0] for s in sums) / 1e9:.3g}") if sums and None not in sums else None
        rows.append(row)
    return rows


def summed_minutes(seconds: list[float | None]) -> float | None:
    """The sum of ``seconds`` in minutes to 3 significant digits; None with an unknown part or nothing to sum."""
    return float(f"{sum(seconds) / 60:.3g}") if seconds and None not in seconds else None


def span_text(least: float, most: float) -> str:
    """``least``–``most`` to 3 significant digits, or one number when they are equal."""
    return f"{least:.3g}" if least == most else f"{least:.3g}–{most:.3g}"


def main(argv: list[str] | None = None) -> None:
    """``python -m ctxvar.run.cost CONFIG… [--config KEY=VALUE…]``: the plan of the run those config files and
    Snakemake's ``--config`` values make, as the workflow plans it (later files override earlier ones, as
    Snakemake's ``--configfile`` merges them, and ``--config`` overrides them all; the run folder the workflow
    names, :func:`ctxvar.config.run_name.run_name`; the sums' hashes it computes, :func:`sums_hashes`), as the
    block and one row per model."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("configfiles", nargs="+")
    parser.add_argument("--results", default="results", help="the results folder (default: results)")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="as Snakemake's --config")
    args = parser.parse_args(argv)
    try:
        from snakemake.cli import parse_config

        overrides = parse_config(args.config)
    except ValueError as error:
        sys.exit(f"ctxvar error: --config: {error}")
    try:
        config, run = checked_config(args.configfiles, overrides)
        run_folder = os.path.join(args.results, run)
        models, corpus = run_inputs(config, run_folder)
        planned = plan(config, run_folder, sums_hashes(config, models, corpus))
    except CtxvarError as error:  # one line, as a start of the workflow says it
        sys.exit(f"ctxvar error: {error}")
    except OSError as error:
        sys.exit(f"ctxvar error: {error.filename}: {error.strerror or error}")
    remove_after_use = (config.get("hf_cache") or {}).get("remove_after_use", False)
    print(block(planned, config, remove_after_use))
    import pandas as pd

    print(pd.DataFrame(table(planned)).to_markdown(index=False))


def checked_config(paths: list[str], overrides: dict | None = None) -> tuple[dict, str]:
    """``(config, run name)`` of the config files ``paths`` given as ``--configfile`` and the values ``overrides``
    given as ``--config`` (parsed as Snakemake parses them), checked as a start of the
    workflow checks it (the schema, with its defaults filled in, :func:`ctxvar.config.checks.check_config`, and
    a ``corpus.rows`` its source can give: :func:`check_rows_drawable`); :class:`CtxvarError` for the first
    violation."""
    from snakemake.utils import update_config, validate

    from ctxvar.config.checks import check_config
    from ctxvar.config.run_name import run_name
    from ctxvar.config.schema import SCHEMA_PATH, check_schema, load_config_file

    config: dict = {}
    files = {path: load_config_file(path) for path in paths}
    for content in files.values():
        update_config(config, content)
    update_config(config, overrides or {})
    check_schema(config)  # one line naming the key; validate's own error is a page
    validate(config, str(SCHEMA_PATH))
    check_config(config)
    if config.get("corpus"):
        check_rows_drawable(config["corpus"])
    return config, run_name(config, files, overrides or {})


def plan_command(paths: list[str], overrides: dict | None = None) -> str:
    """The command that prints the plan of the run ``paths`` (its ``--configfile`` files) and ``overrides`` (its
    ``--config`` values, as Snakemake parsed them) make, with one row per model."""
    import shlex

    def written(value) -> str:  # as --config reads it back: a scalar as itself, a mapping or list as YAML's flow
        return "" if value is None else json.dumps(value) if isinstance(value, (dict, list)) else str(value)

    values = [f"{key}={written(value)}" for key, value in (overrides or {}).items()]
    return shlex.join(["python", "-m", "ctxvar.run.cost", *paths, *(["--config", *values] if values else [])])


if __name__ == "__main__":
    main(sys.argv[1:])
