"""The merge of partials (ctxvar.stats.merge) on tiny models' partials: it refuses partials that differ in
what must match, repeat a shard, were made under another configuration, are damaged, or are in an older layout or of
another kind, each in one line, and names the stale file to delete and how Snakemake remakes it; an empty partial
merges as an empty one, a model with no token in any shard stops at its final merge; a merge killed mid-way leaves
no output, and a rerun is byte for byte the same."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from ctxvar.corpus.shards import split_corpus
from ctxvar.errors import IntegrityError, StatisticsError
from ctxvar.files.parquet import parquet_writer, read_metadata, read_table, tagged_schema, write_table
from ctxvar.stats.layers import layers_table
from ctxvar.stats.merge import MUST_MATCH, merge_partials
from ctxvar.stats.sums import SUMS_LAYOUT, SumsFile

from support.byte_flips import data_region, flip
from support.declared_sums import LAYOUT_1
from support.messages import one_line
from support.pipeline_runs import extract, geometry_partial_files, shard_of
from support.tiny_models import short_bert


@pytest.fixture(scope="module")
def short_model(tmp_path_factory, corpus_texts):
    """A BERT of 24 positions, shorter than some of the corpus's sentences."""
    return Path(short_bert(tmp_path_factory.mktemp("short") / "bert", corpus_texts))


@pytest.fixture(scope="module")
def geometry_partial(tmp_path_factory, tiny_models, corpus_texts):
    """A partial with every sums file: sums with Σ x/‖x‖, moments, sample."""
    return geometry_partial_files(tmp_path_factory.mktemp("geometry-partial"), tiny_models["bert"], corpus_texts[:60])


def test_a_model_whose_every_sentence_is_too_long_stops_at_its_final_merge(tmp_path, short_model, corpus_texts):
    """A shard whose sentences are all skipped is a valid empty partial that merges exactly; a model with no
    token in any shard is one line naming it, its positions and the remedy (it was LinAlgError in geometry)."""
    tokenizer = AutoTokenizer.from_pretrained(short_model)
    too_long = [text for text in corpus_texts if len(tokenizer.tokenize(text)) + 2 > 24][:12]
    fitting = [text for text in corpus_texts if len(tokenizer.tokenize(text)) + 2 <= 24][:30]
    assert len(too_long) == 12 and len(fitting) == 30
    skipped = extract(
        short_model, shard_of(tmp_path, too_long, "long.parquet"), tmp_path / "p0.parquet", long_sentences="skip"
    )
    assert skipped["n_tokens"] == 0 and pq.ParquetFile(tmp_path / "p0.parquet").metadata.num_rows == 0
    extract(short_model, shard_of(tmp_path, fitting, "fit.parquet"), tmp_path / "p1.parquet", shard=1)
    both = merge_partials(
        [tmp_path / "p0.parquet", tmp_path / "p1.parquet"], tmp_path / "s2.parquet", tmp_path / "t2.parquet"
    )
    merge_partials([tmp_path / "p1.parquet"], tmp_path / "s1.parquet", tmp_path / "t1.parquet")
    assert pq.read_table(tmp_path / "t2.parquet").equals(pq.read_table(tmp_path / "t1.parquet"))
    assert both["n_skipped_too_long"] == 12 and both["n_sentences"] == 30
    merge_partials([tmp_path / "p0.parquet"], tmp_path / "through.parquet")  # a running total may hold no token
    with pytest.raises(
        StatisticsError,
        match="^model 'm': every one of the corpus's 12 sentences is longer than its 24 positions and was skipped "
        r"\(tokens.long_sentences: skip\), so it has no token to analyse; lower corpus.max_words or set "
        "tokens.long_sentences: split$",
    ):
        merge_partials([tmp_path / "p0.parquet"], tmp_path / "s0.parquet", tmp_path / "t0.parquet")
    assert not (tmp_path / "s0.parquet").exists() and not (tmp_path / "t0.parquet").exists()


def test_empty_shard_gives_valid_empty_statistics(tmp_path, tiny_models, corpus_texts):
    empty = shard_of(tmp_path, [], "empty.parquet")
    extract(tiny_models["gpt2"], empty, tmp_path / "p0.parquet", shard=0)
    assert pq.ParquetFile(tmp_path / "p0.parquet").metadata.num_rows == 0
    merge_partials([tmp_path / "p0.parquet"], tmp_path / "s.parquet")  # a running total of shard 0 alone
    layers = layers_table(tmp_path / "s.parquet", 1, 5)
    assert len(layers) == 4 and (layers["n_types"] == 0).all() and layers["Q"].isna().all()
    extract(
        tiny_models["gpt2"], shard_of(tmp_path, corpus_texts[:50], "full.parquet"), tmp_path / "p1.parquet", shard=1
    )
    merge_partials([tmp_path / "p0.parquet", tmp_path / "p1.parquet"], tmp_path / "s2.parquet", tmp_path / "t2.parquet")
    merge_partials([tmp_path / "p1.parquet"], tmp_path / "s1.parquet", tmp_path / "t1.parquet")
    assert pq.read_table(tmp_path / "t2.parquet").equals(pq.read_table(tmp_path / "t1.parquet"))


@pytest.fixture(scope="module")
def two_partials(tmp_path_factory, tiny_models, corpus_texts):
    tmp = tmp_path_factory.mktemp("partials")
    write_table(pa.table({"sentence_id": np.arange(len(corpus_texts)), "text": corpus_texts}), tmp / "s.parquet")
    split_corpus(tmp / "s.parquet", [tmp / "0.parquet", tmp / "1.parquet"], {"id": "m"}, tiny_models["roberta"], 512)
    for shard in (0, 1):
        extract(tiny_models["roberta"], tmp / f"{shard}.parquet", tmp / f"p{shard}.parquet", shard=shard)
    return tmp / "p0.parquet", tmp / "p1.parquet"


def with_metadata(source_path, out_path, **changes):
    """A copy of the sums file ``source_path`` at ``out_path`` whose ctxvar metadata has ``changes``."""
    source = pq.ParquetFile(source_path)
    schema = tagged_schema(
        source.schema_arrow.remove_metadata(), {**read_metadata(source_path), **changes}, SUMS_LAYOUT
    )
    with parquet_writer(out_path, schema) as writer:
        for layer in range(source.num_row_groups):
            writer.write_table(source.read_row_group(layer).replace_schema_metadata(schema.metadata))
    return out_path


@pytest.mark.parametrize("key", MUST_MATCH)
def test_merge_refuses_a_partial_that_differs(tmp_path, two_partials, key):
    odd = with_metadata(two_partials[1], tmp_path / "odd.parquet", **{key: "something else"})
    expected = (
        "holds 4 layers but its metadata says something else"
        if key == "n_layers"
        else f"differs from .*p0.parquet in {key}"
    )
    with pytest.raises(StatisticsError, match=f"odd.parquet.*{expected}"):
        merge_partials([two_partials[0], odd], tmp_path / "s.parquet", tmp_path / "t.parquet")


def test_a_stale_running_total_is_named_as_the_file_to_delete(tmp_path, two_partials):
    """A running total (partials/{model}/through/{k}) cannot be re-extracted: the merge names the older file,
    partial or running total, and how Snakemake remakes it once deleted."""
    through = tmp_path / "through" / "1.parquet"
    through.parent.mkdir()
    merge_partials(two_partials, through)
    shard2 = with_metadata(two_partials[1], tmp_path / "2.parquet", shard=2, weights_sha256="changed in place")
    os.utime(through, (1e9, 1e9))  # made before the model changed
    total, partial = re.escape(str(through)), re.escape(str(shard2))
    with pytest.raises(
        StatisticsError,
        match=f"^merge: {partial} differs from {total} in weights_sha256 .*: they were made from different model "
        f"files or settings; delete the older, {total}, and re-run: Snakemake rebuilds this sum of shards "
        r"\[0, 1\] from their partials \(re-extracting those already deleted\)$",
    ):
        merge_partials([through, shard2], tmp_path / "s.parquet")
    os.utime(shard2, (1e8, 1e8))  # a partial kept from before the change (keep_partials)
    with pytest.raises(
        StatisticsError, match=f"delete the older, {partial}, and re-run: Snakemake re-extracts shard 2$"
    ):
        merge_partials([through, shard2], tmp_path / "s.parquet")


def test_merge_refuses_the_same_shard_twice(tmp_path, two_partials):
    with pytest.raises(StatisticsError, match="shard numbers repeat"):
        merge_partials([two_partials[0], two_partials[0]], tmp_path / "s.parquet", tmp_path / "t.parquet")


def test_merge_killed_mid_way_leaves_no_output_and_a_rerun_is_identical(tmp_path, two_partials):
    script = textwrap.dedent(f"""
        import os, signal
        from ctxvar.stats import sums
        from ctxvar.stats.merge import merge_partials
        original, written = sums.LayerWriter.write, []
        def write_then_die(self, table):
            original(self, table)
            written.append(1)
            if len(written) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        sums.LayerWriter.write = write_then_die
        merge_partials({[str(p) for p in two_partials]!r}, {str(tmp_path / "stats.parquet")!r},
                       {str(tmp_path / "tokens.parquet")!r})
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "stats.parquet").exists() and not (tmp_path / "tokens.parquet").exists()
    merge_partials(two_partials, tmp_path / "stats.parquet", tmp_path / "tokens.parquet")
    merge_partials(two_partials, tmp_path / "stats2.parquet", tmp_path / "tokens2.parquet")
    assert (tmp_path / "tokens.parquet").read_bytes() == (tmp_path / "tokens2.parquet").read_bytes()
    assert (tmp_path / "stats.parquet").read_bytes() == (tmp_path / "stats2.parquet").read_bytes()


@pytest.fixture(scope="module")
def partial(tmp_path_factory, tiny_models, corpus_texts):
    tmp = tmp_path_factory.mktemp("partial")
    extract(tiny_models["gpt2"], shard_of(tmp, corpus_texts[:60]), tmp / "partial.parquet")
    return tmp / "partial.parquet"


def test_merge_refuses_a_partial_with_a_flipped_byte(tmp_path, partial):
    """Seen on the old main: a type seen once got V = 4.0 after a flip, where V must be 0."""
    damaged = tmp_path / "3.parquet"
    shutil.copy(partial, damaged)
    start, end = data_region(damaged)
    flip(damaged, (start + end) // 2)
    with pytest.raises(IntegrityError, match="3.parquet.*delete it and re-run") as error:
        merge_partials([damaged], tmp_path / "stats.parquet", tmp_path / "tokens.parquet")
    one_line(error)
    assert not (tmp_path / "stats.parquet").exists()


def test_merge_refuses_a_partial_of_another_configuration(tmp_path, partial):
    with pytest.raises(
        StatisticsError, match="partial.parquet was made under another configuration .*delete it and re-run"
    ) as error:
        merge_partials(
            [partial], tmp_path / "stats.parquet", tmp_path / "tokens.parquet", config_hash="0123456789abcdef"
        )
    one_line(error)
    merge_partials([partial], tmp_path / "stats.parquet", tmp_path / "tokens.parquet", config_hash="h")


def test_an_intact_partial_merges_to_v_zero_for_types_seen_once(tmp_path, partial):
    merge_partials([partial], tmp_path / "stats.parquet", tmp_path / "tokens.parquet")
    tokens = read_table(tmp_path / "tokens.parquet").to_pandas()
    once = tokens[tokens["n"] == 1]
    assert len(once) and np.allclose(once["V"], 0, atol=1e-9 * once["Q"].max())
    assert SumsFile(tmp_path / "stats.parquet").n_layers == read_metadata(partial)["n_layers"]


def test_a_merge_refuses_sums_of_the_layout_before_and_files_of_another_kind(tmp_path, geometry_partial):
    old = tmp_path / "1.parquet"
    write_table(pa.table(LAYOUT_1["sums"]), old, metadata={"n_layers": 1, "shard": 1})
    with pytest.raises(IntegrityError, match="1.parquet: is in an older layout .*re-run") as error:
        merge_partials([geometry_partial["sums"], old], tmp_path / "stats.parquet")
    one_line(error)
    with pytest.raises(IntegrityError, match="holds layout 'ctxvar moments 2', not 'ctxvar sums 2'") as error:
        merge_partials([geometry_partial["moments"]], tmp_path / "stats.parquet")
    one_line(error)
    assert not (tmp_path / "stats.parquet").exists()
