"""The cost plan (ctxvar.run.cost): its rates are the committed benchmarks', scaled by the blocks' work; its
tokens come from the sampled corpus or the settings and source sizes that fix the corpus's size; a local, built or
cached model downloads nothing, a Hub model its checkpoint (its cached shard index's total where there is one: a
mixture of experts is not the dense formula's size), a model with forward: false its matrices up to its
checkpoint, the corpus its text unless local, generated or cached; the block names the models, the corpus, and
each model of unknown cost with the reason; a CPU time where the run extracts on a CPU; a disk estimate beside
its bound; models already done are left out, as the workflow decides it (the same run folder and hashes); a
corpus.rows the source cannot give is refused before anything runs; every Hub model of the study configs has a
shape to plan with offline; a model without blocks plans no time; python -m ctxvar.run.cost says what is wrong
with a config file in one line."""

from __future__ import annotations

import json
import math
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from ctxvar.config.entries import models_by_id
from ctxvar.errors import ConfigError
from ctxvar.files.atomic import write_json
from ctxvar.files.parquet import write_table
from ctxvar.run import cost, resources
from ctxvar.run.disk import TOKEN_TYPES
from ctxvar.run.inputs import run_inputs, sums_hashes
from ctxvar.run.resources import ModelShape, shard_tokens

from support.workflow_runs import REPO

GEOMETRY_OFF = {"covariance": False, "cosine": False, "twonn": False, "ethayarajh": False}
CONFIG = {
    "dtype": "bfloat16",
    "shards": 2,
    "device": "cuda",
    "geometry": {**GEOMETRY_OFF, "sample_size": 16, "batches": 1},
    "analysis": {"max_log10_n": 5},
    "figures": {"pca": {"model": None, "n_bins": 10}},
}
SYNTHETIC = {"source": "synthetic", "fraction": 1.0, "synthetic": {"n_sentences": 100, "mean_words": 10}}
HF = {"source": "hf", "name": "someone/uncatalogued"}


def bench_script(name: str):
    """The module ``bench/{name}.py``."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(REPO / "bench"))


def test_the_rates_are_those_the_bench_scripts_make_from_the_committed_benchmarks():
    for script, committed in (("gpu_rates", "gpu_rates.csv"), ("cpu_rates", "cpu_rates.csv")):
        expected = (REPO / "src" / "ctxvar" / "run" / committed).read_text()
        assert bench_script(script).rates().to_csv(index=False) == expected, committed


def test_a_measured_shape_takes_its_measured_rate_and_twice_the_layers_twice_the_time():
    row = next(r for r in cost.gpu_rates() if r["model"] == "llama-2-7b" and r["geometry"])
    shape = ModelShape(int(row["hidden_states"]), int(row["d"]), 32_000)
    seconds = cost.gpu_seconds(1_000_000, shape, "bfloat16", geometry=True)
    assert seconds[row["gpu"]] == pytest.approx(1_000_000 / int(row["tokens_per_s"]))
    deeper = cost.gpu_seconds(1_000_000, ModelShape(2 * shape.n_layers - 1, shape.d, 32_000), "bfloat16", True)
    assert deeper[row["gpu"]] == pytest.approx(2 * seconds[row["gpu"]])
    assert cost.gpu_seconds(1_000_000, shape, "float16", True) == seconds  # float16 at bfloat16's rate
    assert cost.gpu_seconds(1_000_000, shape, "bfloat16", False)[row["gpu"]] < seconds[row["gpu"]]
    jobs = cost.gpu_seconds(1_000_000, shape, "bfloat16", True, jobs=3)[row["gpu"]]
    assert jobs == pytest.approx(seconds[row["gpu"]] + 3 * float(row["read_seconds"]))  # each job reads the model


def test_the_cpu_time_takes_the_slower_of_equally_near_measured_models_and_scales_by_work():
    bert = ModelShape(13, 768, 30_522)
    slowest = min(int(r["tokens_per_s"]) for r in cost.cpu_rates() if r["dtype"] == "float32" and not r["geometry"])
    (machine, seconds), *others = cost.cpu_seconds(100_000, bert, "float32", geometry=False).items()
    assert not others and seconds == pytest.approx(100_000 / slowest)
    assert cost.cpu_seconds(100_000, ModelShape(25, 768, 30_522), "float32", False)[machine] == pytest.approx(
        2 * seconds
    )
    assert cost.cpu_seconds(100_000, bert, "bfloat16", False)[machine] < seconds  # measured in bfloat16 too


def hub_cache(tmp_path, monkeypatch, repo: str, weights: bool, config: dict | None = None) -> Path:
    """``repo`` at main in an HF cache under ``tmp_path``: its config.json and, with ``weights``, a weights file;
    returns its snapshot."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "hub" / f"models--{repo.replace('/', '--')}"
    commit = "a" * 40
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    config = config or {"num_hidden_layers": 2, "hidden_size": 8, "vocab_size": 100, "torch_dtype": "float16"}
    (snapshot / "config.json").write_text(json.dumps(config))
    if weights:
        (snapshot / "model.safetensors").write_bytes(b"weights")
    return snapshot


def test_a_cached_shard_index_gives_the_download_a_mixture_of_experts_is_not_sized_by_the_dense_formula(
    tmp_path, monkeypatch
):
    """Mixtral-8x7B's config.json and index in the HF cache, its weights not: its download is the index's
    metadata.total_size (93.4 GB), not 13.1 GB."""
    config = {"num_hidden_layers": 32, "hidden_size": 4096, "vocab_size": 32_000, "torch_dtype": "bfloat16"}
    snapshot = hub_cache(tmp_path, monkeypatch, "mistralai/Mixtral-8x7B-v0.1", weights=False, config=config)
    index = {"metadata": {"total_size": 93_405_585_408}, "weight_map": {"x": "model-00001-of-00019.safetensors"}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    planned = model_cost_of(entry_of(name="mistralai/Mixtral-8x7B-v0.1"), tmp_path / "run", 1000)
    assert planned.download == (93_405_585_408, 93_405_585_408) and planned.parameters == 93_405_585_408 // 2


def test_corpus_tokens_from_the_sample_or_from_the_settings_and_source_sizes(tmp_path):
    synthetic = {**SYNTHETIC, "fraction": 0.5, "synthetic": {"n_sentences": 1000, "mean_words": 10}}
    assert cost.corpus_tokens({"corpus": synthetic}, tmp_path) == int(1.4 * 500 * 10) + 2 * 500
    text = tmp_path / "enwik8.txt"
    text.write_text("x" * (512 * 300 + 7))
    enwik8 = {"source": "enwik8", "path": str(text), "fraction": 1.0, "rows": 128}
    assert cost.corpus_tokens({"corpus": enwik8}, tmp_path) == int(1.4 * 128 * 512 / 6) + 2 * 128
    assert cost.corpus_tokens({"corpus": {**enwik8, "rows": None}}, tmp_path) == int(1.4 * 300 * 512 / 6) + 600
    bookcorpus = cost.hub_datasets()["bookcorpus/bookcorpus"]
    rows = int(0.01 * bookcorpus["rows"])
    expected = int(rows * (1.4 * bookcorpus["text_bytes"] / bookcorpus["rows"] / 6 + 2))
    assert cost.corpus_tokens({"corpus": {**HF, "name": "bookcorpus/bookcorpus", "fraction": 0.01}}, tmp_path) == (
        expected
    )
    assert cost.corpus_tokens({"corpus": {**HF, "fraction": 0.01}}, tmp_path) is None  # not catalogued
    docs = cost.corpus_tokens({"corpus": {"source": "python-docs", "fraction": 1.0, "max_words": 63}}, tmp_path)
    assert 50_000 < docs < 150_000
    (tmp_path / "corpus").mkdir()
    sentences = tmp_path / "corpus" / "sentences.parquet"
    write_table(pa.table({"text": ["a b c"], "n_words": pa.array([3], pa.int32())}), sentences)
    assert cost.corpus_tokens({"corpus": synthetic}, tmp_path) == shard_tokens(sentences)


def dataset_cache(tmp_path, monkeypatch, repo: str, revision: str, files: list[str]) -> None:
    """``files`` of the Hub dataset ``repo`` at ``revision`` in an HF cache under ``tmp_path``."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "hub" / f"datasets--{repo.replace('/', '--')}"
    commit = "b" * 40
    (folder / "refs" / revision).parent.mkdir(parents=True, exist_ok=True)
    (folder / "refs" / revision).write_text(commit)
    for name in files:
        (folder / "snapshots" / commit / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "snapshots" / commit / name).write_bytes(b"PAR1")


def test_the_corpus_download_is_counted_unless_local_generated_or_cached(tmp_path, monkeypatch):
    export = {"revision": "refs/convert/parquet", "data_dir": "plain_text", "split": "train"}
    paper = {"corpus": {**HF, "name": "bookcorpus/bookcorpus", "fraction": 0.01, **export}}
    planned = cost.corpus_plan(paper, tmp_path)
    assert planned.download == cost.hub_datasets()["bookcorpus/bookcorpus"]["text_bytes"]
    assert cost.corpus_plan({"corpus": {**HF, **export}}, tmp_path).download is None
    assert cost.corpus_plan({"corpus": {"source": "enwik8", "rows": 128}}, tmp_path).download == 10**8
    assert cost.corpus_plan({"corpus": SYNTHETIC}, tmp_path).download == 0
    assert cost.corpus_plan({"corpus": {"source": "python-docs", "fraction": 1.0}}, tmp_path).download == 0
    dataset_cache(
        tmp_path, monkeypatch, "bookcorpus/bookcorpus", "refs/convert/parquet", ["plain_text/partial-train/0"]
    )
    assert cost.corpus_plan(paper, tmp_path).download > 0  # a partial export is not the split datasets reads
    dataset_cache(
        tmp_path, monkeypatch, "bookcorpus/bookcorpus", "refs/convert/parquet", ["plain_text/train/0000.parquet"]
    )
    assert cost.corpus_plan(paper, tmp_path).download == 0
    dataset_cache(tmp_path, monkeypatch, "LTCB/enwik8", "refs/convert/parquet", ["enwik8-raw/train/0000.parquet"])
    assert cost.corpus_plan({"corpus": {"source": "enwik8", "rows": 128}}, tmp_path).download == 0


def entry_of(**entry) -> dict:
    return next(iter(models_by_id({"models": [entry]}).values()))


def model_cost_of(entry: dict, run, tokens: int) -> cost.ModelCost:
    """:func:`cost.model_cost` of ``entry``, the one model of :data:`CONFIG`."""
    return cost.model_cost(entry, {**CONFIG, "models": [entry]}, run, tokens)


def test_downloads_nothing_for_local_built_or_cached_models_else_the_checkpoint(tmp_path, monkeypatch):
    hub_cache(tmp_path, monkeypatch, "someone/cached", weights=True)
    hub_cache(tmp_path, monkeypatch, "someone/config-only", weights=False)
    run = tmp_path / "run"
    built = entry_of(id="r", init="random", arch="gpt2")
    assert model_cost_of(built, run, 1000).download == (0, 0)
    assert model_cost_of(entry_of(name="someone/cached"), run, 1000).download == (0, 0)
    config_only = model_cost_of(entry_of(name="someone/config-only"), run, 1000)
    parameters = ModelShape(3, 8, 100).parameters
    assert (config_only.parameters, config_only.download) == (parameters, (2 * parameters, 2 * parameters))
    pythia = model_cost_of(entry_of(name="EleutherAI/pythia-70m"), run, 1000)
    shape, parameters, stored = cost.hub_shapes()["EleutherAI/pythia-70m"]
    assert pythia.download == (parameters * stored, parameters * stored) and pythia.shape == shape
    alone = model_cost_of(entry_of(name="EleutherAI/pythia-70m", forward=False), run, 1000)
    assert alone.download == (2 * shape.vocab_size * shape.d * stored, parameters * stored)
    assert (alone.tokens, alone.gpu_seconds, alone.sums) == (0, {}, None)
    unknown = model_cost_of(entry_of(name="nobody/unknown"), run, 1000)
    assert (unknown.shape, unknown.download, unknown.gpu_seconds) == (None, None, {})
    assert "in neither the HF cache nor src/ctxvar/run/hub_shapes.csv" in unknown.unknown


def write_gguf(path, blocks: int, width: int, tokens: int) -> None:
    """A GGUF file whose header gives ``blocks`` blocks of ``width`` and ``tokens`` tokens, with one tensor."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(blocks)
    writer.add_embedding_length(width)
    writer.add_token_list([f"t{i}" for i in range(tokens)])
    writer.add_tensor("token_embd.weight", np.zeros((tokens, width), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_model_to_convert_is_planned_by_its_header_and_an_unreadable_one_says_why(tmp_path):
    write_gguf(tmp_path / "m.gguf", blocks=3, width=16, tokens=40)
    entry = entry_of(id="g", init="archive", gguf=str(tmp_path / "m.gguf"), sha256={"m.gguf": "0" * 64})
    planned = cost.plan({**CONFIG, "models": [entry], "corpus": SYNTHETIC}, tmp_path / "run")
    (model,) = planned.models
    assert model.shape == ModelShape(4, 16, 40) and model.unknown is None and model.gpu_seconds
    assert "unknown" not in cost.block(planned, CONFIG)
    (tmp_path / "m.gguf").write_bytes(b"GGUF damaged")
    planned = cost.plan({**CONFIG, "models": [entry], "corpus": SYNTHETIC}, tmp_path / "run")
    text = cost.block(planned, CONFIG)
    assert "not counted: g (its archive's config.json or GGUF header cannot be read" in text
    assert "until the corpus is sampled" not in text


def test_the_block_names_the_models_the_corpus_and_each_model_of_unknown_cost_with_the_reason(tmp_path):
    config = {**CONFIG, "models": [{"name": "EleutherAI/pythia-70m"}, {"name": "nobody/unknown"}]}
    planned = cost.plan({**config, "corpus": SYNTHETIC}, tmp_path)
    text = cost.block(planned, config, command="python -m ctxvar.run.cost my.yaml")
    assert "models          EleutherAI/pythia-70m, nobody/unknown" in text
    assert "corpus          the synthetic corpus: nothing to download" in text
    for line in ("downloads", "GPU-hours"):
        said = next(row for row in text.splitlines() if row.strip().startswith(line))
        assert "not counted: nobody/unknown (shape unknown: in neither the HF cache nor" in said, said
    assert text.endswith("per model       python -m ctxvar.run.cost my.yaml")
    assert cost.large_run(planned)
    many = [{"id": f"m{i}", "init": "random", "arch": "gpt2"} for i in range(9)]
    pythia = {"name": "EleutherAI/pythia-70m", "revisions": ["step0", "step1"]}
    text = cost.block(cost.plan({**CONFIG, "models": [pythia, *many], "corpus": SYNTHETIC}, tmp_path), CONFIG)
    assert "EleutherAI/pythia-70m ×2, m0, m1, m2, m3, m4 and 4 more; 11 checkpoints" in text


def test_the_block_gives_a_cpu_time_where_the_run_extracts_on_a_cpu_and_the_downloads_time(tmp_path, monkeypatch):
    config = {**CONFIG, "models": [{"name": "EleutherAI/pythia-70m"}], "corpus": SYNTHETIC}
    on_gpu = cost.block(cost.plan(config, tmp_path), config)
    assert "GPU-hours" in on_gpu and "CPU-hours" not in on_gpu
    assert "at 50 MB/s (an assumed bandwidth)" in on_gpu
    on_cpu = cost.block(cost.plan({**config, "device": "cpu"}, tmp_path), config)
    assert "GPU-hours" in on_cpu and "CPU-hours" in on_cpu and "(device: cpu)" in on_cpu
    monkeypatch.setattr(resources, "nvidia_driver", lambda: False)  # no NVIDIA driver here
    auto = cost.plan({**config, "device": "auto"}, tmp_path)
    assert auto.device == "cpu" and "device: auto, and no NVIDIA driver here" in cost.block(auto, config)


def test_the_disk_estimate_counts_the_types_a_corpus_repeats_beside_the_bound(tmp_path):
    config = {**CONFIG, "models": [{"name": "EleutherAI/pythia-70m"}]}
    corpus = {**SYNTHETIC, "synthetic": {"n_sentences": 10_000, "mean_words": 10}}
    planned = cost.plan({**config, "corpus": corpus}, tmp_path)
    (model,) = planned.models
    assert model.sums_estimate[1] < model.sums[1] / 5  # 72,000 tokens a shard hold ~3,000 types, not 50,304
    text = cost.block(planned, config)
    assert "types by Heaps' law, fitted to real tokenizers" in text and "if every token were a type of its own" in text
    (tmp_path / "corpus").mkdir()
    words = [f"w{i % 300}" for i in range(30_000)]
    texts = [" ".join(words[i : i + 10]) for i in range(0, len(words), 10)]
    write_table(
        pa.table({"text": texts, "n_words": pa.array([10] * len(texts), pa.int32())}),
        tmp_path / "corpus" / "sentences.parquet",
    )
    sampled = cost.plan({**config, "corpus": corpus}, tmp_path)
    assert sampled.types_from == "the sample's own words"
    assert sampled.models[0].sums_estimate[1] < model.sums_estimate[1]  # 300 words, repeated


def test_models_already_done_are_left_out(tmp_path):
    config = {**CONFIG, "models": [{"id": "a", "init": "random", "arch": "gpt2"}, {"name": "gpt2", "forward": False}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "sums.parquet").write_bytes(b"")
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "embedding_matrices.csv").write_text("")
    planned = cost.plan({**config, "corpus": HF}, tmp_path)
    assert planned.models == []
    assert cost.block(planned, config) == "cost plan: nothing left to run"


@pytest.mark.parametrize("study", ["machina_mercer_2024.yaml", "razzhigaev_2024.yaml", "../config.yaml"])
def test_every_hub_model_of_a_study_config_has_a_shape_to_plan_with_offline(study):
    entries = yaml.safe_load((REPO / "config" / study).read_text())["models"]
    missing = [entry["name"] for entry in entries if entry["name"] not in cost.hub_shapes()]
    assert missing == [], f"add them to src/ctxvar/run/hub_shapes.csv: {missing}"


def test_the_table_gives_one_row_per_models_entry_and_no_gpu_minutes_without_a_forward_pass():
    config = {
        **CONFIG,
        "models": [{"name": "EleutherAI/pythia-70m", "forward": False, "revisions": ["step0", "step1"]}],
    }
    rows = cost.table(cost.plan(config, "/nonexistent"))
    shape, parameters, stored = cost.hub_shapes()["EleutherAI/pythia-70m"]
    least = 2 * 2 * shape.vocab_size * shape.d * stored / 1e9
    assert rows == [
        {
            "model": "EleutherAI--pythia-70m",
            "checkpoints": 2,
            "forward": False,
            "parameters": parameters,
            "tokens_each": 0,
            "download_gb": cost.span_text(least, 2 * parameters * stored / 1e9),
            "sums_gb": None,
            "sums_bound_gb": None,
        }
    ]
    assert not math.isnan(least)


def test_a_model_without_blocks_plans_no_time():
    """The Gaussian null model with layer_norm: false has one hidden state and no blocks: nothing to scale a rate
    by, and no time (its plan was a division by zero that stopped every dry run and start of its config)."""
    entry = entry_of(id="g", init="gaussian", layer_norm=False)
    (planned_cost,) = cost.plan({**CONFIG, "models": [entry], "corpus": SYNTHETIC}, "/nonexistent").models
    assert planned_cost.shape.n_layers == 1 and set(planned_cost.gpu_seconds.values()) == {0.0}
    assert set(planned_cost.cpu_seconds.values()) == {0.0}


def test_a_local_enwik8_counts_its_texts_pieces_in_a_zip_or_a_list_of_one(tmp_path):
    """The zip's member, not its compressed bytes (a third of them for enwik8); a path given as a list of one file,
    which the config allows, plans as the file (it stopped every dry run with a TypeError)."""
    text = "word " * (512 * 300 // 5)
    with zipfile.ZipFile(tmp_path / "enwik8.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("enwik8", text)
    (tmp_path / "enwik8").write_text(text)
    plain = {"source": "enwik8", "path": str(tmp_path / "enwik8"), "fraction": 1.0, "rows": None}
    expected = cost.corpus_tokens({"corpus": plain}, tmp_path)
    assert expected == int(1.4 * 300 * 512 / 6) + 600
    assert cost.corpus_tokens({"corpus": {**plain, "path": str(tmp_path / "enwik8.zip")}}, tmp_path) == expected
    assert cost.corpus_tokens({"corpus": {**plain, "path": [plain["path"]]}}, tmp_path) == expected


def test_hours_below_a_thousandth_read_as_such_and_waits_in_their_unit():
    assert [cost.hours(s) for s in (0, 0.02, 61, 342, 16_560, 4_440_000)] == [
        "0",
        "< 0.001",
        "0.017",
        "0.095",
        "4.6",
        "1,233",
    ]
    assert [cost.duration(s) for s in (40, 720, 12_240)] == ["40 s", "12 min", "3.4 h"]


@pytest.mark.parametrize(
    ("corpus", "asked", "available"),
    [
        (SYNTHETIC, 500, 100),
        ({"source": "enwik8", "path": None, "fraction": 1.0}, 200_000, 195_312),
        ({**HF, "name": "bookcorpus/bookcorpus", "fraction": 1.0}, 80_000_000, 74_004_228),
    ],
)
def test_a_draw_larger_than_the_source_is_refused_before_anything_runs_naming_both_numbers(corpus, asked, available):
    cost.check_rows_drawable({**corpus, "rows": available})  # as many as there are: drawn
    with pytest.raises(ConfigError) as refused:
        cost.check_rows_drawable({**corpus, "rows": asked})
    message = str(refused.value)
    assert f"corpus.rows: {asked} rows asked of a source of {available} rows" in message and "\n" not in message


def test_a_draw_from_local_files_is_refused_past_their_rows(tmp_path):
    (tmp_path / "a.txt").write_text("one .\ntwo .\nthree .\n")
    corpus = {"source": "text", "path": str(tmp_path / "a.txt"), "fraction": 1.0, "sampling": "paper"}
    cost.check_rows_drawable({**corpus, "rows": 3})
    with pytest.raises(ConfigError, match="4 rows asked of a source of 3 rows"):
        cost.check_rows_drawable({**corpus, "rows": 4})


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "missing.yaml: No such file or directory"),
        ("models: [\n", "not valid YAML"),
        ("models: 3\n", "models: 3 is not a list"),
        ("", "config: 'models' is a required property"),
        ("models: [{id: r, init: random, arch: gpt2, forward: false}]\n", "corpus: section missing"),
        (
            "models: [{id: r, init: random, arch: gpt2}]\ncorpus: {source: synthetic, rows: 9999, synthetic: "
            "{n_sentences: 50}}\n",
            "corpus.rows: 9999 rows asked of a source of 50 rows",
        ),
    ],
)
def test_the_command_says_what_is_wrong_with_a_config_file_in_one_line(tmp_path, capsys, content, said):
    path = tmp_path / "missing.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as stopped:
        cost.main([str(path), "--results", str(tmp_path / "results")])
    message = str(stopped.value.code)
    assert message.startswith("ctxvar error: ") and said in message and "\n" not in message


def test_a_sharded_checkpoint_is_cached_only_with_every_shard_its_index_names(tmp_path, monkeypatch):
    """A forward: false job fetches only the shards that hold the embedding matrices: a later forward pass still
    downloads the rest."""
    snapshot = hub_cache(tmp_path, monkeypatch, "someone/sharded", weights=False)
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {"weight_map": {"embed.weight": shards[0], "layers.0.weight": shards[1]}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    (snapshot / shards[0]).write_bytes(b"embedding")
    entry = entry_of(name="someone/sharded")
    assert model_cost_of(entry, tmp_path / "run", 1000).download[1] > 0
    (snapshot / shards[1]).write_bytes(b"blocks")
    assert model_cost_of(entry, tmp_path / "run", 1000).download == (0, 0)


def test_a_model_whose_sums_were_made_under_another_setting_is_planned_again(tmp_path):
    """The workflow passes the hash each model's sums carry under the config now: sums of another dtype or
    corpus are extracted again, and the plan must not say there is nothing left to run."""
    config = {**CONFIG, "models": [{"id": "a", "init": "random", "arch": "gpt2"}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "sums.parquet").write_bytes(b"")
    write_json({"config_hash": "made-before"}, tmp_path / "a" / "run.json")
    assert cost.plan({**config, "corpus": SYNTHETIC}, tmp_path, {"a": "made-before"}).models == []
    again = cost.plan({**config, "corpus": SYNTHETIC}, tmp_path, {"a": "under-this-config"})
    assert [model.model for model in again.models] == ["a"] and again.models[0].tokens == 1600
    assert "GPU-hours       < 0.001 on one" in cost.block(again, config)


def write_config(path, **changes) -> str:
    config = {"models": [{"id": "a", "init": "random", "arch": "gpt2"}], "corpus": SYNTHETIC, **changes}
    path.write_text(yaml.safe_dump(config))
    return str(path)


def done_as_the_workflow_would(config_files: list[str], run_folder) -> None:
    """Model a's merged sums in ``run_folder``, its run.json naming the hash the workflow gives them under the
    config ``config_files`` make."""
    config, _ = cost.checked_config(config_files)
    models, corpus = run_inputs(config, run_folder)
    (run_folder / "a").mkdir(parents=True)
    (run_folder / "a" / "sums.parquet").write_bytes(b"")
    write_json({"config_hash": sums_hashes(config, models, corpus)["a"]}, run_folder / "a" / "run.json")


def test_the_command_plans_the_workflows_run_folder_and_a_dtype_change_again(tmp_path, capsys):
    """With two config files the workflow's run folder is the last file's (its run:, else its name), and a model
    done under another dtype is planned again: the command computes the hashes as the workflow does."""
    base = write_config(tmp_path / "base.yaml", run="base")
    extra = write_config(tmp_path / "extra.yaml")
    results = tmp_path / "results"
    done_as_the_workflow_would([base, extra], results / "extra")
    cost.main([base, extra, "--results", str(results)])
    assert capsys.readouterr().out.startswith("cost plan: nothing left to run")
    other_dtype = write_config(tmp_path / "extra.yaml", dtype="bfloat16")
    cost.main([base, other_dtype, "--results", str(results)])
    assert capsys.readouterr().out.startswith("cost plan: 1 models run over the corpus")
    cost.main([base, "--results", str(results)])  # results/base: nothing done there
    assert capsys.readouterr().out.startswith("cost plan: 1 models run over the corpus")


def test_the_default_types_are_the_fit_bench_disk_types_makes_of_its_committed_curves():
    import pandas as pd

    curves = pd.read_csv(REPO / "bench" / "results" / "disk_types.csv")
    k, beta = bench_script("disk_types").fit(curves)
    assert (TOKEN_TYPES.k, TOKEN_TYPES.beta) == (k, beta)


def test_the_command_takes_the_config_values_the_workflow_was_given(tmp_path, capsys):
    """``--config`` values name the run folder and change the hashes as they do for the workflow, and the command
    the block prints carries them: the plan it prints is the workflow's run's."""
    base = write_config(tmp_path / "base.yaml", run="base")
    results = tmp_path / "results"
    done_as_the_workflow_would([base], results / "other")  # model a done under float32 in results/other
    command = cost.plan_command([base], {"run": "other", "dtype": "bfloat16"})
    assert command.endswith("base.yaml --config run=other dtype=bfloat16")
    values = command.split(" --config ")[1].split()
    cost.main([base, "--results", str(results), "--config", "run=other"])
    assert capsys.readouterr().out.startswith("cost plan: nothing left to run")
    cost.main([base, "--results", str(results), "--config", *values])
    assert capsys.readouterr().out.startswith("cost plan: 1 models run over the corpus")


def test_a_model_without_embedding_matrices_whose_config_json_is_damaged_is_planned_from_its_shard_index(
    tmp_path, monkeypatch
):
    """forward: false, the shard index in the HF cache and config.json unreadable: the download is at most the
    index's total, at least nothing; the plan is made rather than failing on the missing shape, and says why the
    shape is unknown: the file is there, not readable."""
    from huggingface_hub import constants

    from support.hf_cache import add_snapshot

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    files = tmp_path / "files"
    files.mkdir()
    (files / "config.json").write_text("{not json")
    index = {"metadata": {"total_size": 123_456_789}, "weight_map": {"w": "model-00001-of-00002.safetensors"}}
    (files / "model.safetensors.index.json").write_text(json.dumps(index))
    add_snapshot(tmp_path / "hub", "org/moe", "a" * 40, files, "main")
    entry = {"id": "moe", "name": "org/moe", "forward": False}
    planned = cost.model_cost(entry, {**CONFIG, "models": [entry]}, tmp_path / "run", None)
    assert planned.download == (0, 123_456_789)
    assert planned.unknown.startswith("its config.json in the HF cache cannot be read"), planned.unknown


def test_the_download_time_of_a_range_runs_from_the_least_to_the_most():
    """Two ends of a download's size (forward: false) give their times in that order, in seconds as in hours."""
    least_most = [(300e6, 500e6), (3e9, 6e9), (200e6, 6e9)]  # 6 s to 10 s, 60 s to 2 min, 4 s to 2 min
    for least, most in least_most:
        model = cost.ModelCost("m", "m", False, None, None, 0, (int(least), int(most)), {}, None)
        line = cost.download_line([model], None)
        times = line.split("; ≈ ")[1].split(" at ")[0].split(" to ")
        assert times == [
            cost.duration(least / cost.DOWNLOAD_BYTES_PER_S),
            cost.duration(most / cost.DOWNLOAD_BYTES_PER_S),
        ]


def test_the_embedding_matrix_time_is_the_measurement_nearest_in_width_scaled_by_rows_and_width_squared():
    """bench/cpu_rates.py --matrices measures one matrix at a few widths; a model's matrix takes the nearest width's
    seconds × V·d² over the measured V·d²; the block gives one to two matrices a model, the models of every study of
    embedding matrices alone (Machina & Mercer's) included, and names one of unknown shape."""
    measured = cost.cpu_matrix_seconds()
    assert measured and all(row["seconds"] > 0 for row in measured)
    for row in measured:
        (seconds,) = cost.matrix_seconds(ModelShape(n_layers=2, d=row["d"], vocab_size=row["rows"])).values()
        assert seconds == pytest.approx(row["seconds"])
    widest = max(measured, key=lambda row: row["d"])
    (seconds,) = cost.matrix_seconds(ModelShape(2, 2 * widest["d"], 2 * widest["rows"])).values()
    assert seconds == pytest.approx(8 * widest["seconds"])
    config = {
        **CONFIG,
        "models": [
            {"name": "EleutherAI/pythia-70m", "forward": False, "revisions": ["step0", "step1"]},
            {"name": "someone/unknown", "forward": False},
        ],
    }
    planned = cost.plan(config, "/nonexistent")
    shape = cost.hub_shapes()["EleutherAI/pythia-70m"][0]
    (one,) = cost.matrix_seconds(shape).values()
    line = next(line for line in cost.block(planned, config).splitlines() if "embedding-matrix statistics" in line)
    assert line.startswith(f"  CPU-hours       {cost.total_hours([2 * one])} to {cost.hours(4 * one)} of the")
    assert "not counted: someone/unknown" in line


def test_a_source_too_small_for_one_row_is_refused_without_asking_for_zero_rows(tmp_path):
    """A local enwik8 of fewer than 512 bytes holds no piece: the refusal names both numbers and asks for a larger
    corpus, not for corpus.rows of 0 (which the schema refuses)."""
    text = tmp_path / "enwik8"
    text.write_bytes(b"x" * 100)
    with pytest.raises(ConfigError) as refused:
        cost.check_rows_drawable({"source": "enwik8", "path": str(text), "fraction": 1.0, "rows": 3})
    message = str(refused.value)
    assert "3 rows asked of a source of 0 rows" in message and message.endswith("; use a larger corpus")
