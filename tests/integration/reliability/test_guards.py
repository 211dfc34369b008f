"""Reliability: each guard here has a test that fails without it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoTokenizer

from ctxvar.corpus.shards import split_corpus
from ctxvar.errors import CorpusError, ModelLoadError, StatisticsError
from ctxvar.files.atomic import atomic_path
from ctxvar.files.parquet import parquet_writer, read_metadata, tagged_schema, write_table
from ctxvar.stats.layers import layers_table
from ctxvar.stats.merge import MUST_MATCH, merge_partials
from ctxvar.stats.sums import SUMS_LAYOUT

from support.oracle import assert_tokens_match, brute_force_embeddings, brute_force_tokens
from support.pipeline_runs import extract, shard_of
from support.tiny_models import random_model


@pytest.fixture(scope="module")
def short_model(tmp_path_factory, corpus_texts):
    """A BERT of 24 positions, shorter than some of the corpus's sentences."""
    out = tmp_path_factory.mktemp("short") / "bert"
    sizes = dict(hidden_size=16, num_layers=2, intermediate_size=32, max_positions=24)
    random_model(out, "bert", corpus_texts, seed=5, **sizes)
    return out


def test_long_sentences_error_names_the_remedy(tmp_path, short_model, corpus_texts):
    with pytest.raises(CorpusError, match="exceed the 24 positions of model 'm'.*long_sentences: skip or split"):
        extract(short_model, shard_of(tmp_path, corpus_texts[:40]), tmp_path / "p.parquet", long_sentences="error")
    assert not (tmp_path / "p.parquet").exists()


def test_long_sentences_skipped_are_counted(tmp_path, short_model, corpus_texts):
    texts = corpus_texts[:60]
    metadata = extract(short_model, shard_of(tmp_path, texts), tmp_path / "p.parquet", long_sentences="skip")
    tokenizer = AutoTokenizer.from_pretrained(short_model)
    too_long = sum(len(tokenizer.tokenize(text)) + 2 > 24 for text in texts)
    assert 0 < too_long < len(texts)
    assert metadata["n_skipped_too_long"] == too_long and metadata["n_sentences"] == len(texts) - too_long


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


def test_long_sentences_split_into_windows_match_brute_force(tmp_path, short_model, corpus_texts):
    texts = corpus_texts[:60]
    metadata = extract(short_model, shard_of(tmp_path, texts), tmp_path / "p.parquet", long_sentences="split")
    merge_partials([tmp_path / "p.parquet"], tmp_path / "stats.parquet", tmp_path / "tokens.parquet")
    expected = brute_force_tokens(*brute_force_embeddings(short_model, texts, window=24))
    assert_tokens_match(pd.read_parquet(tmp_path / "tokens.parquet"), expected)
    assert metadata["n_split_too_long"] > 0 and metadata["n_sequences"] > len(texts)


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


def test_tokenizer_without_boundary_tokens_is_refused(tmp_path, tiny_models, corpus_texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.train_from_iterator(corpus_texts, trainers.BpeTrainer(vocab_size=200))
    model_dir = tmp_path / "nospecial"
    shutil.copytree(tiny_models["gpt2"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (model_dir / name).unlink(missing_ok=True)
    PreTrainedTokenizerFast(tokenizer_object=core).save_pretrained(model_dir)
    with pytest.raises(ModelLoadError, match="defines neither cls/sep nor bos/eos"):
        extract(model_dir, shard_of(tmp_path, corpus_texts[:5]), tmp_path / "p.parquet")


def test_encoder_decoder_model_is_refused(tmp_path, tiny_models, corpus_texts):
    from transformers import T5Config, T5Model

    model_dir = tmp_path / "t5"
    T5Model(T5Config(vocab_size=300, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2)).save_pretrained(model_dir)
    AutoTokenizer.from_pretrained(tiny_models["bert"]).save_pretrained(model_dir)
    with pytest.raises(ModelLoadError, match="is an encoder-decoder"):
        extract(model_dir, shard_of(tmp_path, corpus_texts[:5]), tmp_path / "p.parquet")


def test_pickled_weights_are_read_weights_only_and_a_pickle_that_runs_code_is_refused(
    tmp_path, tiny_models, corpus_texts
):
    """A checkpoint saved before safetensors (pytorch_model.bin alone) is read as transformers reads it, by torch's
    weights-only unpickler: its sums and weight hash are those of the same weights in safetensors. A file holding an
    object whose unpickling would run code (create a folder) stops the job in one line, and nothing runs."""
    from safetensors.torch import load_file

    shard = shard_of(tmp_path, corpus_texts[:5])
    whole = extract(tiny_models["bert"], shard, tmp_path / "safetensors.parquet")
    model_dir = tmp_path / "pickled"
    shutil.copytree(tiny_models["bert"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    tensors = load_file(model_dir / "model.safetensors")
    (model_dir / "model.safetensors").unlink()
    torch.save(tensors, model_dir / "pytorch_model.bin")
    pickled = extract(model_dir, shard, tmp_path / "pickled.parquet")
    assert pickled["weights_sha256"] == whole["weights_sha256"]
    assert pq.read_table(tmp_path / "pickled.parquet").equals(pq.read_table(tmp_path / "safetensors.parquet"))
    marker = tmp_path / "code-ran"
    torch.save({**tensors, "payload": RunsCode(str(marker))}, model_dir / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as error:
        extract(model_dir, shard, tmp_path / "p.parquet")
    assert "\n" not in str(error.value) and "weights-only" in str(error.value) and not marker.exists()


def test_a_pickle_read_for_the_embedding_matrices_runs_no_code(tmp_path, tiny_models):
    """A forward: false model without safetensors has its pytorch_model.bin unpickled weights-only: a file holding
    an object whose unpickling would run code (here, create a folder; plain pickle does) is refused in one line
    naming what it would import, and nothing runs."""
    from safetensors.torch import load_file

    from ctxvar.stats.embedding_matrices import read_matrices

    model_dir = tmp_path / "pickled"
    shutil.copytree(tiny_models["gpt2"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    tensors = load_file(model_dir / "model.safetensors")
    (model_dir / "model.safetensors").unlink()
    marker = tmp_path / "code-ran"
    torch.save({**tensors, "payload": RunsCode(str(marker))}, model_dir / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as error:
        read_matrices({"id": "m"}, str(model_dir), "float32")
    assert "pytorch_model.bin cannot be read by torch's weights-only unpickler" in str(error.value)
    assert "os.makedirs" in str(error.value) and "\n" not in str(error.value) and not marker.exists()


class RunsCode:
    """An object whose unpickling calls ``os.makedirs(path)``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return os.makedirs, (self.path,)


def test_remote_code_does_not_run_unless_the_config_allows_it(tmp_path, tiny_models, corpus_texts):
    model_dir = tmp_path / "custom"
    shutil.copytree(tiny_models["bert"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    marker = tmp_path / "code-ran"
    (model_dir / "custom_model.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom transformers import BertModel\nclass CustomModel(BertModel):\n "
        "   pass\n"
    )
    config = json.loads((model_dir / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "custom_model.CustomModel"}
    (model_dir / "config.json").write_text(json.dumps(config))
    shard = shard_of(tmp_path, corpus_texts[:5])
    extract(model_dir, shard, tmp_path / "p.parquet")  # falls back to the built-in BertModel
    assert not marker.exists()
    extract(model_dir, shard, tmp_path / "p.parquet", entry={"id": "m", "trust_remote_code": True})
    assert marker.exists()


def test_non_finite_hidden_states_fail_without_writing(tmp_path, tiny_models, corpus_texts):
    from transformers import AutoModel

    model_dir = tmp_path / "overflow"
    shutil.copytree(tiny_models["gpt2"], model_dir, ignore=shutil.ignore_patterns("SHA256SUMS"))  # a user's directory
    model = AutoModel.from_pretrained(model_dir)
    with torch.no_grad():
        model.h[0].mlp.c_fc.weight.mul_(1e38)  # overflows float32 in the first block
    model.save_pretrained(model_dir)
    with pytest.raises(
        StatisticsError, match="NaN or Inf with dtype float32; nothing was written: the model's weights"
    ):
        extract(model_dir, shard_of(tmp_path, corpus_texts[:20]), tmp_path / "p.parquet")
    assert not (tmp_path / "p.parquet").exists()


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


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_clears_temporaries_of_killed_attempts(tmp_path):
    target = tmp_path / "out.csv"
    (tmp_path / ".out.csv.abc123.tmp").write_text("left by a killed job")
    (tmp_path / ".other.csv.abc123.tmp").write_text("not ours")
    with atomic_path(target) as tmp:
        tmp.write_text("done")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.csv.abc123.tmp", "out.csv"]


def test_atomic_outputs_get_the_permissions_of_ordinary_new_files(tmp_path):
    previous = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "out.csv") as tmp:
            tmp.write_text("done")
        (tmp_path / "plain.csv").write_text("done")
    finally:
        os.umask(previous)
    assert (tmp_path / "out.csv").stat().st_mode & 0o777 == (tmp_path / "plain.csv").stat().st_mode & 0o777 == 0o644


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
