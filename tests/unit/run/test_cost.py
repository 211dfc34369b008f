"""The cost plan (ctxvar.run.cost): its rates are the committed benchmark's, scaled by the blocks' work; its
tokens come from the sampled corpus or the settings that fix the corpus's size; a local, built or cached model
downloads nothing, a Hub model its checkpoint, a model with forward: false its matrices up to its checkpoint; the
block says what it could not estimate; models already done are left out; every Hub model of the study configs
has a shape to plan with offline; a model without blocks plans no GPU time; python -m ctxvar.run.cost says what is
wrong with a config file in one line."""

from __future__ import annotations

import json
import math
import sys
import zipfile

import pyarrow as pa
import pytest
import yaml

from ctxvar.config.entries import models_by_id
from ctxvar.files.atomic import write_json
from ctxvar.files.parquet import write_table
from ctxvar.run import cost
from ctxvar.run.resources import ModelShape, shard_tokens

from support.workflow_runs import REPO

GEOMETRY_OFF = {"covariance": False, "cosine": False, "twonn": False, "ethayarajh": False}
CONFIG = {
    "dtype": "bfloat16",
    "shards": 2,
    "geometry": {**GEOMETRY_OFF, "sample_size": 16, "batches": 1},
    "analysis": {"max_log10_n": 5},
    "figures": {"pca": {"model": None, "n_bins": 10}},
}


def test_the_rates_are_those_bench_gpu_rates_makes_from_the_committed_benchmark():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_rates
    finally:
        sys.path.remove(str(REPO / "bench"))
    committed = (REPO / "src" / "ctxvar" / "run" / "gpu_rates.csv").read_text()
    assert gpu_rates.rates().to_csv(index=False) == committed


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


def test_corpus_tokens_from_the_sample_or_from_the_settings_that_fix_the_size(tmp_path):
    synthetic = {"source": "synthetic", "fraction": 0.5, "synthetic": {"n_sentences": 1000, "mean_words": 10}}
    assert cost.corpus_tokens({"corpus": synthetic}, tmp_path) == int(1.4 * 500 * 10) + 2 * 500
    text = tmp_path / "enwik8.txt"
    text.write_text("x" * (512 * 300 + 7))
    enwik8 = {"source": "enwik8", "path": str(text), "fraction": 1.0, "rows": 128}
    assert cost.corpus_tokens({"corpus": enwik8}, tmp_path) == int(1.4 * 128 * 512 / 6) + 2 * 128
    assert cost.corpus_tokens({"corpus": {**enwik8, "rows": None}}, tmp_path) == int(1.4 * 300 * 512 / 6) + 600
    assert cost.corpus_tokens({"corpus": {"source": "hf", "name": "bookcorpus", "fraction": 0.01}}, tmp_path) is None
    (tmp_path / "corpus").mkdir()
    sentences = tmp_path / "corpus" / "sentences.parquet"
    write_table(pa.table({"text": ["a b c"], "n_words": pa.array([3], pa.int32())}), sentences)
    assert cost.corpus_tokens({"corpus": synthetic}, tmp_path) == shard_tokens(sentences)


def hub_cache(tmp_path, monkeypatch, repo: str, weights: bool) -> None:
    """``repo`` at main in an HF cache under ``tmp_path``: its config.json and, with ``weights``, a weights file."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "hub" / f"models--{repo.replace('/', '--')}"
    commit = "a" * 40
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    config = {"num_hidden_layers": 2, "hidden_size": 8, "vocab_size": 100, "torch_dtype": "float16"}
    (snapshot / "config.json").write_text(json.dumps(config))
    if weights:
        (snapshot / "model.safetensors").write_bytes(b"weights")


def entry_of(**entry) -> dict:
    return next(iter(models_by_id({"models": [entry]}).values()))


def planned(entry: dict, run, tokens: int) -> cost.ModelCost:
    """:func:`cost.model_cost` of ``entry``, the one model of :data:`CONFIG`."""
    return cost.model_cost(entry, {**CONFIG, "models": [entry]}, run, tokens)


def test_downloads_nothing_for_local_built_or_cached_models_else_the_checkpoint(tmp_path, monkeypatch):
    hub_cache(tmp_path, monkeypatch, "someone/cached", weights=True)
    hub_cache(tmp_path, monkeypatch, "someone/config-only", weights=False)
    run = tmp_path / "run"
    built = entry_of(id="r", init="random", arch="gpt2")
    assert planned(built, run, 1000).download == (0, 0)
    assert planned(entry_of(name="someone/cached"), run, 1000).download == (0, 0)
    config_only = planned(entry_of(name="someone/config-only"), run, 1000)
    parameters = ModelShape(3, 8, 100).parameters
    assert (config_only.parameters, config_only.download) == (parameters, (2 * parameters, 2 * parameters))
    pythia = planned(entry_of(name="EleutherAI/pythia-70m"), run, 1000)
    shape, parameters, stored = cost.hub_shapes()["EleutherAI/pythia-70m"]
    assert pythia.download == (parameters * stored, parameters * stored) and pythia.shape == shape
    alone = planned(entry_of(name="EleutherAI/pythia-70m", forward=False), run, 1000)
    assert alone.download == (2 * shape.vocab_size * shape.d * stored, parameters * stored)
    assert (alone.tokens, alone.gpu_seconds, alone.sums) == (0, {}, None)
    unknown = planned(entry_of(name="nobody/unknown"), run, 1000)
    assert (unknown.shape, unknown.download, unknown.gpu_seconds) == (None, None, {})


HF = {"source": "hf", "name": "bookcorpus"}


def test_the_block_totals_the_models_and_says_what_it_could_not_estimate(tmp_path):
    config = {**CONFIG, "models": [{"name": "EleutherAI/pythia-70m"}, {"name": "nobody/unknown"}]}
    costs = cost.plan({**config, "corpus": HF}, tmp_path)
    text = cost.block(costs, config)
    assert "unknown until the corpus is sampled" in text and "1 of unknown size, not counted" in text
    assert cost.large_run(costs)
    synthetic = {"source": "synthetic", "fraction": 1.0, "synthetic": {"n_sentences": 100, "mean_words": 10}}
    small = cost.plan({**config, "models": config["models"][:1], "corpus": synthetic}, tmp_path)
    text = cost.block(small, config)
    gpu = next(iter(small[0].gpu_seconds))
    assert f"on one {gpu}" in text and "forward tokens  ≈ 1,600 a model" in text
    assert not cost.large_run(small)  # a 141 MB download and seconds of GPU time
    local = cost.plan({**config, "models": [{"id": "r", "init": "random", "arch": "gpt2"}], "corpus": HF}, tmp_path)
    assert not cost.large_run(local)  # a corpus not sampled yet: local models print no plan of unknowns
    pythia = cost.plan({**config, "models": [{"name": "EleutherAI/pythia-1b"}], "corpus": HF}, tmp_path)
    assert cost.large_run(pythia)  # 2 GB to download
    removed = cost.block(small, config, remove_after_use=True)
    assert "each removed once used" in removed


def test_models_already_done_are_left_out(tmp_path):
    config = {**CONFIG, "models": [{"id": "a", "init": "random", "arch": "gpt2"}, {"name": "gpt2", "forward": False}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "sums.parquet").write_bytes(b"")
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "embedding_matrices.csv").write_text("")
    assert cost.plan({**config, "corpus": {"source": "hf", "name": "x"}}, tmp_path) == []
    assert cost.block([], config) == "cost plan: nothing left to run"


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
        }
    ]
    assert not math.isnan(least)


def test_a_model_without_blocks_plans_no_gpu_time():
    """The Gaussian null model with layer_norm: false has one hidden state and no blocks: nothing to scale a rate
    by, and no GPU time (its plan was a division by zero that stopped every dry run and start of its config)."""
    entry = entry_of(id="g", init="gaussian", layer_norm=False)
    synthetic = {"source": "synthetic", "fraction": 1.0, "synthetic": {"n_sentences": 100, "mean_words": 10}}
    (planned_cost,) = cost.plan({**CONFIG, "models": [entry], "corpus": synthetic}, "/nonexistent")
    assert planned_cost.shape.n_layers == 1 and set(planned_cost.gpu_seconds.values()) == {0.0}


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


def test_hours_below_a_thousandth_read_as_such():
    assert [cost.hours(s) for s in (0, 0.02, 61, 342, 16_560, 4_440_000)] == [
        "0",
        "< 0.001",
        "0.017",
        "0.095",
        "4.6",
        "1,233",
    ]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "missing.yaml: No such file or directory"),
        ("models: [\n", "not valid YAML"),
        ("models: 3\n", "models: 3 is not a list"),
        ("", "config: 'models' is a required property"),
        ("models: [{id: r, init: random, arch: gpt2, forward: false}]\n", "corpus: section missing"),
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
    hub_cache(tmp_path, monkeypatch, "someone/sharded", weights=False)
    snapshot = next((tmp_path / "hub" / "models--someone--sharded" / "snapshots").iterdir())
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {"weight_map": {"embed.weight": shards[0], "layers.0.weight": shards[1]}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    (snapshot / shards[0]).write_bytes(b"embedding")
    entry = entry_of(name="someone/sharded")
    assert planned(entry, tmp_path / "run", 1000).download[1] > 0
    (snapshot / shards[1]).write_bytes(b"blocks")
    assert planned(entry, tmp_path / "run", 1000).download == (0, 0)


def test_a_model_whose_sums_were_made_under_another_setting_is_planned_again(tmp_path):
    """The workflow passes the hash each model's sums carry under the config now: sums of another dtype or
    corpus are extracted again, and the plan must not say there is nothing left to run."""
    config = {**CONFIG, "models": [{"id": "a", "init": "random", "arch": "gpt2"}]}
    corpus = {"source": "synthetic", "fraction": 1.0, "synthetic": {"n_sentences": 100, "mean_words": 10}}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "sums.parquet").write_bytes(b"")
    write_json({"config_hash": "made-before"}, tmp_path / "a" / "run.json")
    assert cost.plan({**config, "corpus": corpus}, tmp_path, {"a": "made-before"}) == []
    (again,) = cost.plan({**config, "corpus": corpus}, tmp_path, {"a": "under-this-config"})
    assert again.model == "a" and again.tokens == 1600
    assert "GPU-hours       < 0.001 on one" in cost.block([again], config)
