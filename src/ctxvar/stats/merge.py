"""Merge partial sums across shards, one layer at a time, and finalize per-token statistics.

A merge adds sums files that each cover one shard (a partial) or a run of shards
(an earlier merge), in the order of their shards. Adding the partials of shards
0..n-1 at once and adding them one at a time to a running merge (0+1, then +2,
…) add the same float64 values in the same order, so they give the same sums.

Memory: one layer of the merged sums (U · (d + 2) · 8 bytes, U = distinct types
over all shards, twice the d term with Σ x/‖x‖) plus one shard's layer at a
time; it does not grow with the number of shards or layers. Moments add d × d
per layer; samples hold shards × B · k points of one layer (B = geometry.batches); words (geometry.ethayarajh)
hold one layer of every shard's W_shard · d at once, plus the merged W · d.

I/O: a merge reads each input file once (its footer, then every row group) and
writes each output once. :func:`merge_job` first checks that its outputs fit in the
free space and returns the record of what it read (:mod:`ctxvar.stats.merge_io`).
"""

from __future__ import annotations

import contextlib
import logging
import os

import numpy as np
import pyarrow as pa

from ctxvar.errors import StatisticsError
from ctxvar.files.parquet import PARQUET_READS, tagged_schema
from ctxvar.files.space import removed_on_failure, require_free_space
from ctxvar.stats.declarations import declared, finalize_columns, token_columns
from ctxvar.stats.finalize import combine_into
from ctxvar.stats.merge_io import io_record, merge_output_bytes
from ctxvar.stats.sample_file import SampleFile
from ctxvar.stats.sums import LayerSums, LayerWriter, MomentsFile, SumsFile, sums_schema
from ctxvar.stats.word_files import SentencesFile, WordsFile
from ctxvar.versions import TORCH_DEFAULT_ATTENTION

log = logging.getLogger(__name__)

# Partials that differ in any of these cannot be added together.
MUST_MATCH = (
    "model_id",
    "model_name",
    "revision",
    "commit",
    "dtype",
    "n_layers",
    "d",
    "tokenizer_sha256",
    "weights_sha256",
    "model_config_sha256",
    "merge_markers",
    "type_marker",
    "config_hash",
    "geometry",
    "last_width",
)
RECORDED_WHERE_SET = ("last_width",)  # only where the last hidden state has another width than d (sums.layer_width)
ADDITIVE = ("n_sentences", "n_skipped_too_long", "n_split_too_long", "n_sequences", "n_tokens")


def shards_of(metadata: dict, path) -> list[int]:
    """The shards a sums file covers: a partial's ``shard``, or a merge's ``shards``."""
    if "shards" in metadata:
        return list(metadata["shards"])
    if "shard" in metadata:
        return [metadata["shard"]]
    raise StatisticsError(f"merge: {path} names no shard in its metadata: it is not a partial or merged sums file")


def open_partials(paths, config_hash: str | None = None) -> list[SumsFile]:
    """Open and check partials (or earlier merges); return them in shard order (the order sums are added in).

    With ``config_hash`` (this run's, for this model), every file must carry it: a
    partial of another run or of an older config is refused even if all partials agree.
    """
    files = sorted((SumsFile(p) for p in paths), key=lambda f: shards_of(f.metadata, f.path))
    if not files:
        raise StatisticsError("merge: no partial files given")
    for part in files:
        if config_hash is not None and part.metadata.get("config_hash") != config_hash:
            raise StatisticsError(
                f"merge: {part.path} was made under another configuration (config_hash "
                f"{part.metadata.get('config_hash')!r}, this run's is {config_hash!r}): it belongs to another run "
                "or an "
                "older config; delete it and re-run"
            )
    reference = files[0]
    for other in files[1:]:
        check_same_run(other.path, other.metadata, reference.path, reference.metadata)
        if other.sum_names != reference.sum_names:
            stale, stale_metadata = older((other.path, other.metadata), (reference.path, reference.metadata))
            raise StatisticsError(
                f"merge: {other.path} holds the sums {list(other.sum_names)}, {reference.path} "
                f"{list(reference.sum_names)}: they were made by different ctxvar versions or settings; delete the "
                f"older, {stale}, and re-run: Snakemake {how_rebuilt(stale_metadata)}"
            )
    shards = [shard for f in files for shard in shards_of(f.metadata, f.path)]
    if len(set(shards)) != len(shards):
        raise StatisticsError(f"merge: shard numbers repeat among the partials ({shards})")
    return files


def check_same_run(path, metadata: dict, reference_name: str, reference: dict) -> None:
    """Raise unless ``metadata`` (of ``path``) equals ``reference`` in every key of :data:`MUST_MATCH`.

    ``reference_name``: the file ``reference`` was read from, or a description of it (e.g. "the sums"). The
    message names the file to delete: the older of the two files (the one made before the model's files or
    settings changed), or ``path`` when the reference is no file.
    """
    for key in MUST_MATCH:
        if metadata.get(key) != reference.get(key):
            stale, stale_metadata = older((path, metadata), (reference_name, reference))
            raise StatisticsError(
                f"merge: {path} differs from {reference_name} in {key} "
                f"({metadata.get(key)!r} vs {reference.get(key)!r}): they were made from different model files or "
                f"settings; delete the older, {stale}, and re-run: Snakemake {how_rebuilt(stale_metadata)}"
            )


def older(file: tuple[str, dict], reference: tuple[str, dict]) -> tuple[str, dict]:
    """Of two ``(path, metadata)``, the one written first: ``reference`` if it is a file older than ``file``."""
    if os.path.isfile(reference[0]) and os.path.getmtime(reference[0]) < os.path.getmtime(file[0]):
        return reference
    return file


def how_rebuilt(metadata: dict) -> str:
    """How Snakemake remakes a deleted sums file: a partial by its extraction job, a running total from the
    partials of its shards."""
    if "shards" in metadata:
        return (
            f"rebuilds this sum of shards {metadata['shards']} from their partials "
            "(re-extracting those already deleted)"
        )
    return f"re-extracts shard {metadata.get('shard')}"


def merged_metadata(files: list[SumsFile]) -> dict:
    first = files[0].metadata
    kept = ("commit", "attn_implementation", "final_norm", "attention", "max_positions", "versions")
    merged = {key: first.get(key) for key in (*MUST_MATCH, *kept) if key in first or key not in RECORDED_WHERE_SET}
    for key in ADDITIVE:
        merged[key] = int(sum(f.metadata.get(key, 0) for f in files))
    merged["shards"] = sorted(shard for f in files for shard in shards_of(f.metadata, f.path))
    merged["devices"] = union_of(files, "device_name", "devices")
    merged["attention_kernels"] = union_of(files, "attention_kernels", "attention_kernels", TORCH_DEFAULT_ATTENTION)
    return merged


def union_of(files: list[SumsFile], own: str, merged: str, unrecorded: str | None = None) -> list[str]:
    """The distinct values, sorted, of ``own`` in the partials among ``files`` and of the lists ``merged`` in the
    running totals: the devices that computed the shards (``device_name``, ``devices``), the attention kernels
    they allowed (``attention_kernels``). A file written before the key was recorded adds ``unrecorded`` (what
    every such file had: torch's own choice of kernels), or nothing when None (its device is not known)."""
    values = set()
    for file in files:
        listed = file.metadata.get(merged)
        if isinstance(listed, list):
            values.update(listed)
        elif file.metadata.get(own):
            values.add(file.metadata[own])
        elif unrecorded is not None:
            values.add(unrecorded)
    return sorted(values)


def merge_layer(files: list[SumsFile], layer: int, types: np.ndarray) -> LayerSums:
    """The sum over shards of one layer, rows aligned to ``types`` (sorted)."""
    d, names = files[0].d, files[0].sum_names
    count = np.zeros(len(types), np.int64)
    sums = {name: np.zeros((len(types), d) if declared(name).vector else len(types)) for name in names}
    for part in files:
        # layer 0's token column was read to list the types; later layers' are read and checked against it
        rows = part.layer(layer, columns=None if layer else ["n", *names])
        combine_into((count, *sums.values()), rows.additive(), np.searchsorted(types, part.types()))
    return LayerSums(layer, types, count, sums)


def tokens_schema(sum_names) -> pa.Schema:
    """``tokens.parquet``: layer, token, n, then the columns the sums ``sum_names`` finalize into (float64)."""
    columns = token_columns([declared(name) for name in sum_names])
    fields = [("layer", pa.int16()), ("token", pa.string()), ("n", pa.int64())]
    return pa.schema(fields + [(column.name, pa.float64()) for column in columns])


def token_table(sums: LayerSums) -> pa.Table:
    """Per-type n and the declared sums' columns (Q, M, V, and with Σ x/‖x‖ self-similarity) of one layer."""
    finalized = finalize_columns(sums.count, sums.sums, [declared(name) for name in sums.sums])
    columns = [np.full(len(sums.types), sums.layer, np.int16), pa.array(sums.types, pa.string()), sums.count]
    return pa.table(columns + list(finalized.values()), schema=tokens_schema(sums.sums))


def merge_partials(paths, stats_path, tokens_path=None, config_hash: str | None = None) -> dict:
    """Add the partials up (stats_path) and, with ``tokens_path`` (a model's final merge, over all its shards),
    finalize n, Q, M, V per (layer, token) there; ``config_hash``: see :func:`open_partials`. Returns the merged
    metadata. Sums without any token merge like others, as a shard may be empty; a model's final merge refuses
    them (:func:`check_has_tokens`)."""
    files = open_partials(paths, config_hash)
    types = np.unique(np.concatenate([f.types() for f in files]))
    metadata = {**merged_metadata(files), "n_types": int(len(types))}
    if tokens_path is not None:
        check_has_tokens(metadata)
    stats_schema = sums_schema(files[0].d, metadata, files[0].sum_names)
    table_schema = tagged_schema(tokens_schema(files[0].sum_names), metadata)
    with contextlib.ExitStack() as stack:
        stats = stack.enter_context(LayerWriter(stats_path, stats_schema))
        tokens = stack.enter_context(LayerWriter(tokens_path, table_schema)) if tokens_path is not None else None
        for layer in range(files[0].n_layers):
            merged = merge_layer(files, layer, types)
            stats.write(merged.to_table(stats_schema))
            if tokens is not None:
                tokens.write(token_table(merged).replace_schema_metadata(table_schema.metadata))
    log.info("merged shards %s: %d types, %d layers", metadata["shards"], len(types), files[0].n_layers)
    return metadata


def check_has_tokens(metadata: dict) -> None:
    """Raise :class:`StatisticsError` when a model's merged ``metadata`` counts no token in any shard: every
    statistic would be undefined (0/0), so its final merge stops instead of handing NaN to later steps."""
    if metadata["n_tokens"]:
        return
    model, skipped, limit = metadata["model_id"], metadata["n_skipped_too_long"], metadata.get("max_positions")
    if skipped:
        positions = f"its {limit} positions" if limit else "its positions"
        raise StatisticsError(
            f"model {model!r}: every one of the corpus's {skipped} sentences is longer than {positions} and was "
            "skipped (tokens.long_sentences: skip), so it has no token to analyse; lower corpus.max_words or set "
            "tokens.long_sentences: split"
        )
    raise StatisticsError(
        f"model {model!r}: its shards {metadata['shards']} hold no sentence, so it has no token to analyse; "
        "check the corpus (corpus: in the config)"
    )


def in_shard_order(files: list, metadata: dict) -> list:
    """``files`` (opened files of one kind of :data:`LAYER_FILES`, of partials or earlier merges, with ``path`` and
    ``metadata``) sorted by shard, each checked to match the sums' run, together covering the sums' shards once."""
    by_shards = {}
    for file in files:
        check_same_run(file.path, file.metadata, "the sums", metadata)
        shards = tuple(shards_of(file.metadata, file.path))
        if shards in by_shards:
            raise StatisticsError(f"merge: {file.path} and {by_shards[shards].path} both hold shards {list(shards)}")
        by_shards[shards] = file
    covered = sorted(shard for shards in by_shards for shard in shards)
    if covered != sorted(metadata["shards"]):
        raise StatisticsError(f"merge: files of shards {covered} given for sums of shards {metadata['shards']}")
    return [by_shards[shards] for shards in sorted(by_shards)]


# The per-layer files a merge adds beside the sums, by their key in a merge job's inputs and outputs.
LAYER_FILES = {"moments": MomentsFile, "sample": SampleFile, "words": WordsFile, "sentences": SentencesFile}


def merge_layer_files(kind: str, paths, out_path, metadata: dict) -> None:
    """Add the ``kind`` files ``paths`` (of :data:`LAYER_FILES`) layer by layer, in shard order, as the kind adds
    them (:meth:`ctxvar.stats.sums.LayerFile.merged_table`); ``metadata``: the merged sums'."""
    reader = LAYER_FILES[kind]
    files = in_shard_order([reader(path) for path in paths], metadata)
    first = files[0]
    for file in files[1:]:
        if file.held() != first.held():
            raise StatisticsError(
                f"merge: {file.path} holds the {kind} {list(file.held())}, {first.path} {list(first.held())}: they "
                "were made by different ctxvar versions or settings; delete both and re-run"
            )
    schema = reader.merged_schema(first, metadata)
    with LayerWriter(out_path, schema) as writer:
        for layer in range(metadata["n_layers"]):
            writer.write(reader.merged_table(layer, [file.part(layer) for file in files], schema, metadata))


def merge_job(inputs: dict, outputs: dict, config_hash: str | None = None, before: dict | None = None):
    """A merge job: add ``inputs['partials']`` (and ``moments``, ``sample``, ``words``, ``sentences`` if given) into
    ``outputs['stats']`` (and ``tokens`` and those, if given). Returns ``(metadata, io)``: the merged metadata and the
    record of :func:`io_record` with this job's reads added to ``before``. It first checks that the outputs fit in
    the free space (:func:`merge_output_bytes`); one that fails half-way (a full disk) leaves none of its outputs."""
    folder = os.path.dirname(os.path.abspath(outputs["stats"]))
    require_free_space(folder, merge_output_bytes(inputs, outputs), "merged sums")
    reads, opened = PARQUET_READS.bytes, PARQUET_READS.files
    with removed_on_failure([path for path in outputs.values() if path is not None]):
        run = merge_partials(inputs["partials"], outputs["stats"], outputs.get("tokens"), config_hash)
        for kind in LAYER_FILES:
            if kind in outputs:
                merge_layer_files(kind, inputs[kind], outputs[kind], run)
    read, files = PARQUET_READS.bytes - reads, PARQUET_READS.files - opened
    read_inputs = [
        *inputs["partials"],
        *(path for kind in LAYER_FILES if kind in outputs for path in inputs[kind]),
    ]
    return run, io_record(read_inputs, read, files, before)
