"""Disk: the bytes a run's sums will take, checked against the free space before extraction runs.

Sizes are upper bounds; the files are not compressed (see :mod:`ctxvar.stats.sums`). With ``keep_partials: false`` (the
default) each model's partials are deleted once merged, so the peak is the
merged files plus the partials of the models in flight: a run that cannot fit
even one model at a time fails at start; one that cannot fit every partial at
once gets a warning. With ``incremental_merge`` (the default) the partials are
merged as they land, which only lowers the peak: a running merge of shards
0..k-1 is no larger than their partials. For a shard of N tokens and a model
with L hidden states of width d and a vocabulary of V entries, the shard holds
U ≤ min(V, N) types and

    partial sums      U · L · (8 · (w + 1) + 24)     w = the kept declared sums' widths: d + 1, + d with
                                                     geometry.cosine (ctxvar.stats.declarations)
    moments           L · d · (18 + 8d + 8m)         (geometry.covariance: the 8d; m declared per-layer sums)
    sample            L · min(B · k, N) · (4d + 48)  (geometry.twonn; B = geometry.batches)
    words             W · L · (8d + 32)              (geometry.ethayarajh; W ≤ min(V, N) raw token ids)
    sentences         L · d · 34                     (geometry.ethayarajh)
    Fig. 1's points   K · (4d + 24)                  (figures.pca.model only: K ≤ min(N, 6 · figures.pca.n_bins ·
                                                     10^analysis.max_log10_n) occurrences of its types; kept
                                                     until the figures are drawn, so counted with the merged files)

An ``init: archive`` model not unpacked yet adds its folder: the zip's files, or its GGUF file's tensors
in float32. The merged files are the same with N the whole corpus, plus tokens.parquet
(U · L · (32 + 8 · c) bytes for the c columns of the kept sums: 64 with geometry.cosine).

The check of the free space takes U = min(V, N), every token a type of its own: an upper bound. A real corpus
repeats its types, and the cost plan (:mod:`ctxvar.run.cost`) gives beside that bound an estimate, U by Heaps'
law, U = min(V, N, K · N^β) (:class:`TypeGrowth`): K and β fitted to the sampled corpus's own words once it is
sampled (:func:`sample_type_growth`), before that :data:`TOKEN_TYPES`, measured on real tokenizers.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass

from ctxvar.config.entries import model_source, models_by_id, pca_model, runs_forward
from ctxvar.config.kinds import kind_of
from ctxvar.errors import CtxvarError, DiskSpaceError, ModelLoadError, size_text
from ctxvar.files.space import disk_check_skipped, free_bytes, nearest_existing
from ctxvar.models.archive import archive_path, packaged_key, packed_config, unpacked_bytes
from ctxvar.models.gguf import gguf_shape
from ctxvar.run.resources import ModelShape, config_shape, known_model_shape, shard_tokens
from ctxvar.stats.declarations import keeps_moments, kept_layer_sums, kept_sums, token_row_bytes, values_per_type

log = logging.getLogger(__name__)

ROW_OVERHEAD = 24  # token string, layer and n per row, roughly


@dataclass(frozen=True)
class TypeGrowth:
    """Heaps' law of a corpus's token types: N tokens hold about K · N^β types."""

    k: float
    beta: float

    def types(self, tokens: int, vocab_size: int) -> int:
        """Types among ``tokens`` tokens of a model with ``vocab_size`` entries: min(V, N, K · N^β), at least 1."""
        return max(1, min(vocab_size, tokens, round(self.k * max(tokens, 1) ** self.beta)))


# bench/disk_types.py's fit to two real tokenizers (WordPiece, byte-level BPE) over the Python documentation's
# prose (bench/results/disk_types.csv): the types of a corpus not sampled yet.
TOKEN_TYPES = TypeGrowth(k=18.2, beta=0.464)
SAMPLE_ROWS_READ = 100_000  # sentences of a sampled corpus that sample_type_growth fits Heaps' law to
WORD_OR_MARK = r"([^\w\s])"  # a punctuation mark: a unit of its own, as subword tokenizers split it off


def sample_type_growth(sentences_path) -> TypeGrowth | None:
    """Heaps' law of the sampled corpus's own words: its distinct words and punctuation marks (case kept, as
    cased tokenizers keep it) among the first :data:`SAMPLE_ROWS_READ` sentences and among half of them give
    K and β (each word or mark taken for a token); None where the file cannot be read or is too small to fit."""
    import pyarrow.compute as pc

    from ctxvar.files.parquet import read_table

    try:
        text = read_table(sentences_path, columns=["text"]).column("text").slice(0, SAMPLE_ROWS_READ)
    except CtxvarError:
        return None
    units = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(pc.replace_substring_regex(text, WORD_OR_MARK, r" \1 ")))
    counts = []
    for rows in (len(units) // 2, len(units)):
        flat = pc.list_flatten(units.slice(0, rows))
        counts.append((len(flat), len(pc.unique(flat))))
    (half, half_types), (whole, whole_types) = counts
    if half < 2 or whole <= half or half_types < 2:
        return None
    beta = min(1.0, max(0.0, math.log(whole_types / half_types) / math.log(whole / half)))
    return TypeGrowth(k=whole_types / whole**beta, beta=beta)


def type_count(tokens: int, shape: ModelShape, growth: TypeGrowth | None = None) -> int:
    """The types among ``tokens`` tokens: min(V, N), an upper bound, or with ``growth`` its estimate."""
    return growth.types(tokens, shape.vocab_size) if growth else min(shape.vocab_size, tokens)


def sums_bytes(tokens: int, shape: ModelShape, geometry: dict, growth: TypeGrowth | None = None) -> int:
    """One sums file set (sums, moments, sample) over ``tokens`` tokens: an upper bound, or with ``growth`` an
    estimate (:func:`type_count`)."""
    types = type_count(tokens, shape, growth)
    total = types * shape.n_layers * (8 * (values_per_type(shape.d, geometry) + 1) + ROW_OVERHEAD)
    if keeps_moments(geometry):  # d rows per layer: N, layer, Σx's entry, Σxxᵀ's row, each per-layer sum's entry
        row = 18 + (8 * shape.d if geometry["covariance"] else 0) + 8 * len(kept_layer_sums(geometry))
        total += shape.n_layers * shape.d * row
    if geometry["twonn"]:
        points = geometry["sample_size"] * geometry.get("batches", 1)
        total += shape.n_layers * min(points, tokens) * (4 * shape.d + 48)
    if geometry["ethayarajh"]:
        total += words_files_bytes(types, shape)
    return total


def pca_points_bytes(tokens: int, shape: ModelShape, config: dict) -> int:
    """Upper bound of one shard's Fig. 1 points file over ``tokens`` tokens: at most 2 + ⌊4·√1⌋ = 6 types per
    frequency interval, each with n_t ≤ 10^max_log10_n, each occurrence d float32 and its token and batch."""
    drawn = 6 * config["figures"]["pca"]["n_bins"] * 10 ** config["analysis"]["max_log10_n"]
    return int(min(tokens, drawn)) * (4 * shape.d + ROW_OVERHEAD)


def token_table_row(geometry: dict) -> int:
    """Bytes per (layer, type) row of tokens.parquet: its keys and the kept sums' float64 columns."""
    return token_row_bytes(kept_sums(geometry))


def words_files_bytes(words: int, shape: ModelShape) -> int:
    """The words file (per raw token id: Σu, n, id, token, layer) and the sentences file (d rows per layer)."""
    return words * shape.n_layers * (8 * shape.d + ROW_OVERHEAD + 8) + shape.n_layers * shape.d * 34


def planned_bytes(config: dict, run_folder) -> tuple[int, int] | None:
    """``(peak, all_at_once)``: bytes still to be written by the run's extraction and merge jobs, with one model's
    partials on disk at a time (merged as each model completes) or with every partial at once; both count the
    merged files of the models not merged yet, and the folders of ``init: archive`` models still to be unpacked or
    converted (:func:`packaged_model`), whose shapes their files give. None while the corpus is not sampled
    (nothing to estimate from).
    Each shard holds an equal part of the corpus's tokens: the plan deals batches to shards by their tokens."""
    sentences = os.path.join(run_folder, "corpus", "sentences.parquet")
    if not os.path.exists(sentences):
        return None
    tokens = [math.ceil(shard_tokens(sentences) / config["shards"])] * config["shards"]
    merged, partials = 0, []
    for mid, entry in models_by_id(config).items():
        if not runs_forward(entry) or os.path.exists(os.path.join(run_folder, mid, "sums.parquet")):
            continue
        source = model_source(entry, run_folder)
        shape = known_model_shape(entry, source)  # built: from the entry
        if shape is None and kind_of(entry).packaged and not os.path.isdir(source):
            shape, folder_bytes = packaged_model(entry)
            merged += folder_bytes
        if shape is None:  # a Hub model not downloaded yet: a bert-large-sized guess would block small runs
            log.info("disk: model %r is not downloaded or unpacked yet, so its shape is unknown; not counted", mid)
            continue
        model_merged, model_partials = model_disk_bytes(mid, shape, tokens, config, run_folder)
        merged += model_merged
        partials.append(model_partials)
    return merged + max(partials, default=0), merged + sum(partials)


def model_disk_bytes(
    mid: str, shape: ModelShape, tokens: list[int], config: dict, run_folder, growth: TypeGrowth | None = None
) -> tuple[int, int]:
    """``(merged, partials)``: the bytes of model ``mid``'s merged files (sums, Fig. 1's points when it is
    figures.pca.model, tokens.parquet) and of its partials still to be written, over shards of ``tokens`` tokens;
    upper bounds, or with ``growth`` estimates (:func:`sums_bytes`)."""
    partials = sum(
        sums_bytes(count, shape, config["geometry"], growth)
        for shard, count in enumerate(tokens)
        if not os.path.exists(os.path.join(run_folder, "partials", mid, f"{shard}.parquet"))
    )
    merged = sums_bytes(sum(tokens), shape, config["geometry"], growth)
    if mid == pca_model(config):
        merged += sum(pca_points_bytes(count, shape, config) for count in tokens)
    merged += type_count(sum(tokens), shape, growth) * shape.n_layers * token_table_row(config["geometry"])
    return merged, partials


def packaged_model(entry: dict) -> tuple[ModelShape | None, int]:
    """``(shape, bytes)`` of an ``init: archive`` model still to be unpacked or converted: its shape from the zip's
    config.json or the GGUF file's header, and the bytes of the folder it becomes (the zip's files, or the float32
    model); ``(None, 0)`` while its file is not there (the start-up check of the archives names it)."""
    try:
        path = archive_path(entry)
    except ModelLoadError:
        return None, 0
    if packaged_key(entry) == "gguf":
        found = gguf_shape(path)
        return (ModelShape(*found[:3]), found[3]) if found else (None, 0)
    return config_shape(packed_config(path)), unpacked_bytes(path)


def check_free_space(config: dict, run_folder) -> None:
    """Raise :class:`DiskSpaceError` if the run's remaining sums cannot fit in the free space of ``run_folder``'s
    disk even one model at a time; warn if they may not fit when several models' partials coexist.
    ``CTXVAR_SKIP_DISK_CHECK=1`` skips the check (the estimate is an upper bound)."""
    planned = None if disk_check_skipped() else planned_bytes(config, run_folder)
    if planned is None:
        return
    folder = nearest_existing(run_folder)
    free = free_bytes(folder)
    peak, all_at_once = planned
    if peak > free:
        raise DiskSpaceError(
            f"disk: this run still needs up to {size_text(peak)} (merged sums plus one model's partials, and the "
            f"models still to unpack or convert) but {folder} has {size_text(free)} free; free space, run on a larger "
            "disk (snakemake --directory DIR), set "
            "geometry.cosine: false and geometry.ethayarajh: false (each as large as the core sums), use fewer shards "
            "(each repeats the types), or split the models across runs (CTXVAR_SKIP_DISK_CHECK=1 skips this "
            "upper-bound check)"
        )
    if all_at_once > free:
        log.warning(
            "disk: %s free in %s fits the run one model at a time (%s) but not every model's partials "
            "at once (%s, an upper bound); if the disk fills, run the models in turn (snakemake --until "
            "merge_statistics per model, or fewer models per run)",
            size_text(free),
            folder,
            size_text(peak),
            size_text(all_at_once),
        )
