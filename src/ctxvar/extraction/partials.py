"""The partial files an extraction job writes, a layer at a time: the sums file, and the moments, sample, word and
sentence files its geometry keeps (:func:`ctxvar.stats.declarations.sums_files`)."""

from __future__ import annotations

from contextlib import ExitStack

from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.stats.declarations import kept_layer_sums, kept_sums
from ctxvar.stats.sample_file import sample_schema, sample_table
from ctxvar.stats.sums import LayerWriter, moments_schema, moments_table, sums_schema
from ctxvar.stats.word_files import sentences_schema, words_schema


def sum_names(options: GeometryOptions) -> list[str]:
    """The names of the declared sums a job with ``options`` keeps (the sums file's columns after n)."""
    return [item.name for item in kept_sums(options)]


class PartialFiles:
    """The job's partial files, each a :class:`ctxvar.stats.sums.LayerWriter` entered in ``opened`` (closed with
    it): the sums file at ``out_path`` and those of ``files`` (by kind: ``moments``, ``sample``, ``words`` with
    ``sentences``), their schemas for width ``d`` with ``metadata``; ``sampled``: the job's sampled positions."""

    def __init__(
        self, opened: ExitStack, out_path, files: dict, d: int, metadata: dict, options: GeometryOptions, sampled
    ):
        self.sampled = sampled
        self.sums = opened.enter_context(LayerWriter(out_path, sums_schema(d, metadata, sum_names(options))))
        layer_sum_names = [item.name for item in kept_layer_sums(options)]
        self.moments = (
            opened.enter_context(
                LayerWriter(files["moments"], moments_schema(d, metadata, options.covariance, layer_sum_names))
            )
            if "moments" in files
            else None
        )
        self.sample = (
            opened.enter_context(LayerWriter(files["sample"], sample_schema(d, metadata)))
            if "sample" in files
            else None
        )
        self.words = (
            (
                opened.enter_context(LayerWriter(files["words"], words_schema(d, metadata))),
                opened.enter_context(LayerWriter(files["sentences"], sentences_schema(metadata))),
            )
            if "words" in files
            else None
        )

    def write(self, layers) -> None:
        """Each of ``layers`` (``(sums, (Σxxᵀ or None, per-layer sums), sampled points, word parts)``, as
        :func:`ctxvar.extraction.passes.host_layers` gives them) into the files it belongs to."""
        for sums, (outer, layer_values), points, words in layers:
            self.sums.write(sums.to_table(self.sums.schema))
            if self.moments:
                total = sums.sum.sum(axis=0)
                self.moments.write(
                    moments_table(sums.layer, int(sums.count.sum()), total, outer, self.moments.schema, layer_values)
                )
            if self.sample:
                self.sample.write(sample_table(sums.layer, self.sampled, points, self.sample.schema))
            if self.words:
                for file, part in zip(self.words, words):
                    file.write(part.to_table(file.schema))
