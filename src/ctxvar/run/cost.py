"""The cost plan of a run, before its first job: per model the tokens of its forward pass, its downloads, its
GPU-hours at the committed benchmark's rates and the disk its sums take; the Snakefile prints it as one short
block in a dry run and before a large run, and ``python -m ctxvar.run.cost CONFIG…`` prints it with one row per
model.

Every number is an estimate, made from what is known before anything runs:

- **Tokens**: the sampled corpus's words × 1.4 plus [bos]/[eos] per sentence once the corpus is sampled
  (:func:`ctxvar.run.resources.shard_tokens`); before, from the corpus settings where they fix its size (synthetic:
  ``n_sentences`` × ``mean_words``; enwik8: pieces of 512 characters, 6 characters a word), else unknown.
- **Shapes**: a model's entry (built in the run), its config.json (a local folder or the HF cache), else
  ``hub_shapes.csv`` beside this module (the published shapes of the studies' Hub models); else unknown, and left
  out of the sums, saying how many were.
- **Downloads**: nothing for a local, built or cached model (a weights file in the revision's snapshot); else
  the checkpoint, parameters × bytes per stored parameter. A model with ``forward: false`` downloads the files
  holding its embedding matrices: the matrices alone where they are in files of their own (``V · d`` each, at most
  two) and the whole checkpoint where it is one file (``model.safetensors``, ``pytorch_model.bin``): both ends are
  given.
- **GPU time**: tokens at the rate ``bench/gpu.py`` measured (``gpu_rates.csv``, made by ``bench/gpu_rates.py``)
  for the same dtype (float16 at bfloat16's) and job (the paper's sums, or with geometry), plus the seconds that
  job took to read its model's files once per shard, both scaled from the measured model nearest in size by the
  blocks' multiply-adds, 12 · (L − 1) · d² a token (which the weights' size follows); per GPU kind measured. The
  downloads are not counted in it.
- **Disk**: the sums of :mod:`ctxvar.run.disk` (merged files and one model's partials at a time), an upper bound
  that takes every token for a type of its own (a real corpus repeats its types: less); the HF cache
  holds every download, or with ``hf_cache.remove_after_use`` the largest one for each model whose jobs run at
  once (parallel jobs, shards of several models in flight: not a bound on the whole run).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ctxvar.config.entries import (
    built_in_run,
    corpus_paths,
    is_local_path,
    load_revision,
    model_source,
    models_by_id,
    runs_forward,
)
from ctxvar.corpus.enwik8 import PIECE_CHARACTERS, pieces_at_most
from ctxvar.errors import CtxvarError, size_text
from ctxvar.models import hub
from ctxvar.models.completeness import SHARD_INDEX
from ctxvar.run.disk import model_disk_bytes
from ctxvar.run.end import made_from
from ctxvar.run.resources import TOKENS_PER_WORD, ModelShape, known_model_shape, shard_tokens

CHARACTERS_PER_WORD = 6  # English prose and Wikipedia markup, spaces included
ENWIK8_BYTES = 10**8  # the Hutter Prize's file, as the Hub's LTCB/enwik8 holds it
STORED_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}  # config.json's torch_dtype → bytes per parameter
RATE_DTYPE = {"float16": "bfloat16"}  # a dtype measured at another's rate (the same tensor cores)


@dataclass
class ModelCost:
    """One model's share of the plan; None where it cannot be known before the run."""

    model: str
    family: str  # the models entry it comes from: its id, or with revisions the family's
    forward: bool
    shape: ModelShape | None
    parameters: int | None
    tokens: int | None  # of its forward pass (0 for forward: false)
    download: tuple[int, int] | None  # (least, most) bytes; (0, 0) when nothing is downloaded
    gpu_seconds: dict[str, float]  # by GPU kind; empty when unknown or without a forward pass
    sums: tuple[int, int] | None  # (merged files, all its partials) bytes


@cache
def hub_shapes() -> dict[str, tuple[ModelShape, int, int]]:
    """``{Hub id: (shape, parameters, bytes per stored parameter)}`` of ``hub_shapes.csv``."""
    with resources.files(__package__).joinpath("hub_shapes.csv").open(encoding="utf-8") as handle:
        return {
            row["name"]: (
                ModelShape(int(row["hidden_states"]), int(row["d"]), int(row["vocab_size"])),
                int(row["parameters"]),
                int(row["bytes_per_parameter"]),
            )
            for row in csv.DictReader(handle)
        }


@cache
def gpu_rates() -> list[dict]:
    """The rows of ``gpu_rates.csv`` (``bench/gpu_rates.py``)."""
    with resources.files(__package__).joinpath("gpu_rates.csv").open(encoding="utf-8") as handle:
        return [
            {
                **row,
                "geometry": row["geometry"] == "True",
                "blocks": block_work(int(row["hidden_states"]), int(row["d"])),
            }
            for row in csv.DictReader(handle)
        ]


def block_work(hidden_states: int, d: int) -> int:
    """Multiply-adds a token through the blocks, 12 · (L − 1) · d² (attention's 4d² and the MLP's 8d² a block)."""
    return 12 * (hidden_states - 1) * d**2


def gpu_seconds(tokens: int, shape: ModelShape, dtype: str, geometry: bool, jobs: int = 0) -> dict[str, float]:
    """Seconds of an extraction of ``tokens`` tokens in ``jobs`` jobs (each reads the model's files) on each GPU
    kind of :func:`gpu_rates` (module docstring)."""
    seconds = {}
    for gpu in sorted({row["gpu"] for row in gpu_rates()}):
        rows = [row for row in gpu_rates() if row["gpu"] == gpu and row["geometry"] == geometry]
        wanted = RATE_DTYPE.get(dtype, dtype)
        rows = [row for row in rows if row["dtype"] == wanted] or rows
        work = block_work(shape.n_layers, shape.d)  # 0 without blocks (the Gaussian null without its LayerNorm)
        nearest = min(rows, key=lambda row: abs(math.log(row["blocks"] / max(work, 1))))
        measured = tokens / float(nearest["tokens_per_s"]) + jobs * float(nearest["read_seconds"])
        seconds[gpu] = measured * work / nearest["blocks"]
    return seconds


def corpus_tokens(config: dict, run_folder) -> int | None:
    """The corpus's tokens (module docstring); None when its size is not known before it is sampled."""
    sentences = os.path.join(run_folder, "corpus", "sentences.parquet")
    if os.path.exists(sentences):
        return shard_tokens(sentences)
    corpus = config.get("corpus") or {}
    if corpus.get("source") == "synthetic":
        generated = corpus["synthetic"]
        rows = drawn(corpus, generated["n_sentences"])
        return int(TOKENS_PER_WORD * rows * generated["mean_words"]) + 2 * rows
    if corpus.get("source") == "enwik8":
        path = next(iter(corpus_paths(corpus)), "")  # one file, or a list of one
        try:  # a zip's text, not its compressed bytes
            pieces = pieces_at_most(path) if os.path.isfile(path) else ENWIK8_BYTES // PIECE_CHARACTERS
        except CtxvarError:  # a zip without enwik8: the start says so
            return None
        rows = drawn(corpus, pieces)
        return int(TOKENS_PER_WORD * rows * PIECE_CHARACTERS / CHARACTERS_PER_WORD) + 2 * rows
    return None


def drawn(corpus: dict, rows_in_source: int) -> int:
    """Rows the sampling keeps of ``rows_in_source``: ``corpus.rows`` if set, else ``fraction`` of them."""
    rows = corpus.get("rows")
    return min(rows, rows_in_source) if rows else int(corpus.get("fraction", 1.0) * rows_in_source)


WEIGHT_INDEXES = (SHARD_INDEX, "pytorch_model.bin.index.json")  # a sharded checkpoint's map


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


def model_cost(entry: dict, config: dict, run_folder, tokens: int | None) -> ModelCost:
    """The plan of one models entry (module docstring)."""
    source = model_source(entry, run_folder)
    forward = runs_forward(entry)
    shape = known_model_shape(entry, source)
    catalogued = hub_shapes().get(entry.get("name", ""))
    parameters, stored = (catalogued[1], catalogued[2]) if catalogued else (None, 4)
    if shape is None and catalogued:
        shape = catalogued[0]
    if shape is not None and parameters is None:
        parameters = shape.parameters
        torch_dtype = (hub.model_json(source, "config.json", load_revision(entry)) or {}).get("torch_dtype")
        stored = STORED_BYTES.get(str(torch_dtype), 4)
    local = built_in_run(entry) or is_local_path(entry.get("name", ""))
    if local or weights_cached(entry, source):
        download = (0, 0)
    elif parameters is None:
        download = None
    else:
        whole = parameters * stored
        download = (whole, whole) if forward else (min(2 * shape.vocab_size * shape.d * stored, whole), whole)
    own_tokens = tokens if forward else 0
    seconds, sums = {}, None
    if forward and shape is not None and tokens is not None:
        geometry = any(config["geometry"][switch] for switch in ("covariance", "cosine", "twonn", "ethayarajh"))
        seconds = gpu_seconds(tokens, shape, config["dtype"], geometry, jobs=config["shards"])
        per_shard = [math.ceil(tokens / config["shards"])] * config["shards"]
        sums = model_disk_bytes(entry["id"], shape, per_shard, config, run_folder)
    family = entry.get("family") or entry["id"]
    return ModelCost(entry["id"], family, forward, shape, parameters, own_tokens, download, seconds, sums)


def plan(config: dict, run_folder, sums: dict[str, str] | None = None) -> list[ModelCost]:
    """One :class:`ModelCost` per model of ``config`` (validated, with the schema's defaults) still to run:
    a model whose merged sums (or, with ``forward: false``, embedding_matrices.csv) exist is left out; given
    ``sums`` (model → the hash its sums carry under this config, as the workflow computes it), only if its
    run.json names that hash: sums of another setting (dtype, the corpus, …) are extracted again."""
    tokens = corpus_tokens(config, run_folder) if config.get("corpus") else None
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
            costs.append(model_cost(entry, config, run_folder, tokens))
    return costs


LARGE_GPU_HOURS = 1.0
LARGE_DOWNLOAD_BYTES = 10**9


def large_run(costs: list[ModelCost]) -> bool:
    """Whether a real run prints its plan before its first job: an hour of GPU time on a measured GPU, 1 GB of
    downloads, or a model of unknown size. A corpus not sampled yet alone does not make a run large: a first
    start has not sampled its corpus, and a run of local models on it would print a plan of unknowns."""
    if any(cost.download is None for cost in costs):
        return True
    kinds = {gpu for cost in costs for gpu in cost.gpu_seconds}
    most_hours = max((sum(c.gpu_seconds.get(gpu, 0.0) for c in costs) / 3600 for gpu in kinds), default=0.0)
    return most_hours >= LARGE_GPU_HOURS or sum(cost.download[1] for cost in costs) >= LARGE_DOWNLOAD_BYTES


def hours(seconds: float) -> str:
    """Hours to 2 significant digits below 100, else whole: 0.017, 4.6, 46, 1,234; under a thousandth, "< 0.001"
    (seconds of work, not 5.1e-06)."""
    if 0 < seconds < 3.6:
        return "< 0.001"
    return f"{seconds / 3600:.2g}" if seconds < 100 * 3600 else f"{seconds / 3600:,.0f}"


def block(costs: list[ModelCost], config: dict, remove_after_use: bool = False) -> str:
    """The plan as the short block the Snakefile prints: totals, and what could not be estimated."""
    forward = [cost for cost in costs if cost.forward]
    lines = [
        f"cost plan: {len(forward)} models run over the corpus, {len(costs) - len(forward)} their embedding "
        "matrices alone (estimates: docs/performance.md, cost plan)"
    ]
    if not costs:
        return "cost plan: nothing left to run"
    known_tokens = [cost.tokens for cost in forward if cost.tokens is not None]
    if forward:
        each = f"≈ {known_tokens[0]:,} a model" if known_tokens else "unknown until the corpus is sampled"
        shards = f"{config['shards']} shard" + ("s" if config["shards"] > 1 else "")
        lines.append(f"  forward tokens  {each} (dtype {config['dtype']}, {shards} a model)")
    downloads = [cost.download for cost in costs if cost.download is not None]
    least, most = sum(d[0] for d in downloads), sum(d[1] for d in downloads)
    unknown = len(costs) - len(downloads)
    span = size_text(least) if least == most else f"{size_text(least)} to {size_text(most)}"
    lines.append(
        f"  downloads       ≈ {span}"
        + (f" ({sum(d[1] > 0 for d in downloads)} checkpoints not in the HF cache)" if most else "")
        + (f"; {unknown} of unknown size, not counted" if unknown else "")
    )
    kinds = sorted({gpu for cost in forward for gpu in cost.gpu_seconds})
    for gpu in kinds:
        total = hours(sum(cost.gpu_seconds.get(gpu, 0.0) for cost in forward))
        text = total if total.startswith("<") else f"≈ {total}"
        lines.append(f"  GPU-hours       {text} on one {gpu} (rates of bench/results/gpu.csv)")
    if forward and not kinds:
        lines.append("  GPU-hours       unknown until the corpus is sampled (snakemake --until sample_corpus)")
    sums = [cost.sums for cost in forward if cost.sums is not None]
    if sums:
        peak = sum(merged for merged, _ in sums) + max(partials for _, partials in sums)
        lines.append(
            f"  disk            ≤ {size_text(peak)} of sums at the peak (one model's partials at a time; an upper "
            "bound, every token a type of its own)"
        )
    if most and remove_after_use:
        largest = max(d[1] for d in downloads)
        lines.append(
            f"  HF cache        ≈ {size_text(largest)} for each model in flight (the largest checkpoint: each "
            "removed once used; models run side by side hold theirs at once)"
        )
    elif most:
        lines.append(f"  HF cache        ≈ {span} (every download kept; hf_cache.remove_after_use removes them)")
    return "\n".join(lines)


def table(costs: list[ModelCost]) -> list[dict]:
    """One row per models entry (a family's checkpoints together): what the plan counts for it, summed over its
    checkpoints (``python -m ctxvar.run.cost``); a sum with an unknown part is left empty."""
    kinds = sorted({gpu for cost in costs for gpu in cost.gpu_seconds})
    families: dict[str, list[ModelCost]] = {}
    for cost in costs:
        families.setdefault(cost.family, []).append(cost)
    rows = []
    for family, members in families.items():
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
        for gpu in kinds:
            seconds = [cost.gpu_seconds.get(gpu) for cost in members if cost.forward]
            row[f"{gpu}_minutes"] = float(f"{sum(seconds) / 60:.3g}") if seconds and None not in seconds else None
        sums = [cost.sums for cost in members if cost.forward]
        row["sums_gb"] = float(f"{sum(s[0] for s in sums) / 1e9:.3g}") if sums and None not in sums else None
        rows.append(row)
    return rows


def span_text(least: float, most: float) -> str:
    """``least``–``most`` to 3 significant digits, or one number when they are equal."""
    return f"{least:.3g}" if least == most else f"{least:.3g}–{most:.3g}"


def main(argv: list[str] | None = None) -> None:
    """``python -m ctxvar.run.cost CONFIG…``: the plan of the run those config files make (later files override
    earlier ones, as Snakemake's ``--configfile`` merges them), as the block and one row per model."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("configfiles", nargs="+")
    parser.add_argument("--results", default="results", help="the results folder (default: results)")
    args = parser.parse_args(argv)
    try:
        config = checked_config(args.configfiles)
    except CtxvarError as error:  # one line, as a start of the workflow says it
        sys.exit(f"ctxvar error: {error}")
    except OSError as error:
        sys.exit(f"ctxvar error: {error.filename}: {error.strerror or error}")
    run = config.get("run") or os.path.splitext(os.path.basename(args.configfiles[-1]))[0]
    costs = plan(config, os.path.join(args.results, run))
    print(block(costs, config, (config.get("hf_cache") or {}).get("remove_after_use", False)))
    import pandas as pd

    print(pd.DataFrame(table(costs)).to_markdown(index=False))


def checked_config(paths: list[str]) -> dict:
    """The config ``paths`` make, checked as a start of the workflow checks it (the schema, with its defaults
    filled in, and :func:`ctxvar.config.checks.check_config`); :class:`CtxvarError` for the first violation."""
    from snakemake.utils import update_config, validate

    from ctxvar.config.checks import check_config
    from ctxvar.config.schema import SCHEMA_PATH, check_schema, load_config_file

    config: dict = {}
    for path in paths:
        update_config(config, load_config_file(path))
    check_schema(config)  # one line naming the key; validate's own error is a page
    validate(config, str(SCHEMA_PATH))
    check_config(config)
    return config


if __name__ == "__main__":
    main(sys.argv[1:])
