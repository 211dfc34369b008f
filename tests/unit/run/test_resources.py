"""Resource estimates for extraction jobs (from the shard and the model's shape, before the run) and checks of
the resources a user sets. An extraction job's memory request counts the geometry sums it holds: the sample grows
with geometry.batches (4 · L · B · k · d bytes), and Σ x/‖x‖ per type (cosine) and per raw token id (ethayarajh)
each match the core sums."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ctxvar.errors import ConfigError
from ctxvar.files.parquet import write_table
from ctxvar.run import resources
from ctxvar.stats import declarations


def test_shard_tokens_from_word_counts(tmp_path):
    write_table(pa.table({"text": ["a b c", "d"], "n_words": pa.array([3, 1], pa.int32())}), tmp_path / "s.parquet")
    assert resources.shard_tokens(tmp_path / "s.parquet") == int(1.4 * 4 + 4)


def test_model_shape_from_entry_local_config_or_fallback(tiny_models):
    random_entry = {"id": "r", "init": "random", "arch": "gpt2", "hidden_size": 96, "num_layers": 6}
    assert resources.model_shape(random_entry, "results/models/r") == resources.ModelShape(7, 96, 2000)
    assert resources.model_shape({"id": "t"}, tiny_models["bert"]) == resources.ModelShape(4, 32, 300)
    assert resources.model_shape({"id": "x"}, "nobody/not-cached-anywhere") == resources.FALLBACK_SHAPE


def test_estimates_grow_with_tokens_model_size_and_retries():
    small, large = resources.ModelShape(13, 768, 30_522), resources.ModelShape(25, 1024, 30_522)
    for estimate in (
        resources.extraction_mem_mb,
        lambda t, s, attempt=1: resources.extraction_runtime_min(t, s, True, 1, attempt),
    ):
        values = [estimate(1_000_000, small), estimate(10_000_000, small), estimate(10_000_000, large)]
        assert values == sorted(values) and len(set(values)) == 3
        assert (
            estimate(10_000_000, large, attempt=2) == 2 * estimate(10_000_000, large)
            or abs(estimate(10_000_000, large, attempt=2) - 2 * estimate(10_000_000, large)) <= 1
        )


def test_bert_base_shard_of_the_paper_fits_a_common_node():
    bert_base = resources.ModelShape(13, 768, 30_522)
    tokens = 12_400_000 // 8
    assert 2_000 < resources.extraction_mem_mb(tokens, bert_base) < 8_000
    assert resources.extraction_runtime_min(tokens, bert_base, gpu=True) < 60
    cpu = {
        threads: resources.extraction_runtime_min(tokens, bert_base, gpu=False, threads=threads) for threads in (1, 8)
    }
    assert resources.extraction_runtime_min(tokens, bert_base, gpu=True) < cpu[8] < cpu[1]  # GPUs and threads help
    assert cpu[1] > 10 * 60  # 1.5 M tokens of bert-base on one CPU thread take hours, not minutes


def test_a_shard_not_written_yet_gets_a_default_estimate(tmp_path):
    assert resources.shard_tokens(tmp_path / "later.parquet") == resources.UNKNOWN_SHARD_TOKENS


@pytest.mark.parametrize(
    "rule, name, value, message",
    [
        ("extract_statistics", "max_state_mb", "0.4", "so this would be 0; give whole megabytes"),
        ("extract_statistics", "max_state_mb", "1.5", "so this would be 2; give whole megabytes"),
        ("extract_statistics", "max_state_mb", "nan", "give whole megabytes"),
        ("extract_statistics", "max_device_mb", "0.4", "so this would be 0; give whole megabytes"),
        ("extract_statistics", "batch_tokens", "0", "give a whole number of padded tokens"),
        ("extract_statistics", "batch_tokens", "512.5", "so this would be 512; give a whole number of padded tokens"),
        ("extract_statistics", "batch_tokens", "16k", "not a number; give a whole number of padded tokens"),
    ],
)
def test_a_resource_snakemake_would_round_is_refused_at_start_up(rule, name, value, message):
    """Snakemake rounds resources to whole numbers: max_state_mb=0.4 became 0, the default (no cap on a CPU),
    without a word."""
    with pytest.raises(ConfigError, match=f"^--set-resources {rule}:{name}={value}: .*{message}") as error:
        resources.check_set_resources({rule: {name: value, "mem_mb": "2.5"}})
    assert "\n" not in str(error.value)
    resources.check_set_resources({rule: {name: "2", "mem_mb": "2.5"}})  # whole numbers pass; others' are Snakemake's
    resources.check_set_resources({rule: {name: 0 if name.startswith("max_") else 4096}})  # as a profile gives them
    resources.check_set_resources({rule: {name: "min(4000, 2 * input.size_mb)"}})  # expressions, evaluated per job


BERT_BASE = resources.ModelShape(13, 768, 30_522)
TOKENS = 1_550_000
DEFAULTS = {"covariance": True, "cosine": True, "ethayarajh": False, "twonn": True, "sample_size": 4096, "batches": 1}


def test_the_request_covers_the_sample_of_every_batch():
    heavy = {**DEFAULTS, "batches": 64, "ethayarajh": True}
    sample = 4 * 13 * 64 * 4096 * 768
    assert resources.extraction_mem_mb(TOKENS, BERT_BASE, geometry=heavy) * 2**20 > 1.5 * sample
    assert (
        resources.host_sums_bytes(TOKENS, BERT_BASE, heavy)
        - resources.host_sums_bytes(TOKENS, BERT_BASE, {**heavy, "batches": 1})
        == 4 * 13 * 63 * 4096 * 768
    )


OFF = {key: False for key in ("covariance", "cosine", "ethayarajh", "twonn")}


def test_each_switch_adds_its_sums_and_the_sample_stops_at_the_tokens():
    """With every switch off, at least the paper's sums: Σx and Σ‖x‖² per (layer, type) and n per type (a sum
    declared with no switch adds to them); each switch adds its own."""
    paper = resources.host_sums_bytes(TOKENS, BERT_BASE, OFF)
    assert paper >= 8 * 30_522 * (13 * (768 + 1) + 1)
    per_type = 8 * 30_522 * 13 * 768
    assert resources.host_sums_bytes(TOKENS, BERT_BASE, {**OFF, "cosine": True}) == paper + per_type
    assert resources.host_sums_bytes(TOKENS, BERT_BASE, {**OFF, "ethayarajh": True}) == paper + per_type
    assert resources.host_sums_bytes(TOKENS, BERT_BASE, {**OFF, "covariance": True}) == paper + 8 * 13 * 768**2
    few = {**DEFAULTS, "cosine": False, "covariance": False}
    sample = resources.host_sums_bytes(1000, BERT_BASE, few) - resources.host_sums_bytes(1000, BERT_BASE, OFF)
    assert sample == 4 * 13 * 1000 * 768
    assert resources.extraction_mem_mb(TOKENS, BERT_BASE) < resources.extraction_mem_mb(
        TOKENS, BERT_BASE, geometry=DEFAULTS
    )


def test_a_newly_declared_sum_is_in_the_request(monkeypatch):
    """The request reads the sums' widths from their declarations: a d-vector per (layer, type) and one per
    layer, declared as docs/architecture.md's recipe declares a sum, add their host copies."""
    before = resources.host_sums_bytes(TOKENS, BERT_BASE, OFF)
    per_type = declarations.TypeSum("sum_cube", "Σ x³", vector=True, switch=None, values=lambda c: c.rows**3)
    per_layer = declarations.LayerSum("sum_cube_all", "Σ x³", vector=True, switch=None, values=lambda c: c.rows**3)
    monkeypatch.setattr(declarations, "TYPE_SUMS", (*declarations.TYPE_SUMS, per_type))
    monkeypatch.setattr(declarations, "LAYER_SUMS", (*declarations.LAYER_SUMS, per_layer))
    after = resources.host_sums_bytes(TOKENS, BERT_BASE, OFF)
    assert after - before == 8 * 30_522 * 13 * 768 + 8 * 13 * 768


def test_a_mixture_of_experts_config_gives_its_experts_parameters_and_its_active_experts_work():
    """Mixtral-8x7B's config.json: the dense formula gives under 7 B parameters and 12 d² a block; its 8 experts make
    it over 40 B (46.7 B published: the formula takes attention at full width), and each token runs 2 of them."""
    mixtral = {
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "vocab_size": 32_000,
        "intermediate_size": 14_336,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    shape = resources.config_shape(mixtral)
    dense = resources.config_shape({**mixtral, "num_local_experts": None})
    assert dense.parameters < 7e9 < 40e9 < shape.parameters < 50e9
    assert shape.block_work == 32 * (4 * 4096**2 + 2 * 3 * 4096 * 14_336) > 2 * dense.block_work


def test_extraction_runs_where_the_device_setting_and_the_machine_say(monkeypatch):
    assert [resources.extraction_device(device) for device in ("cpu", "cuda")] == ["cpu", "cuda"]
    monkeypatch.setattr(resources, "nvidia_driver", lambda: False)
    assert resources.extraction_device("auto") == "cpu"
    monkeypatch.setattr(resources, "nvidia_driver", lambda: True)
    assert resources.extraction_device("auto") == "cuda"


@pytest.mark.parametrize(
    "entry, shards, removed, expected",
    [
        ({"id": "m", "name": "org/model"}, 8, False, True),  # a Hub model: hashed once for its 8 jobs
        ({"id": "m", "name": "org/model"}, 1, False, False),  # one job: nothing to share
        ({"id": "m", "name": "org/m", "inputs": {"commit": "a" * 40}}, 8, True, False),  # no download ahead of its jobs
        ({"id": "m", "name": "org/m", "inputs": {"commit": "a" * 40}}, 8, False, True),
        ({"id": "m", "init": "archive"}, 2, True, True),  # not a Hub checkpoint: never removed
        ({"id": "m", "init": "random", "arch": "bert", "hidden_size": 32, "num_layers": 2}, 8, False, False),
        ({"id": "m", "init": "random", "arch": "gpt2", "hidden_size": 2048, "num_layers": 24}, 8, False, True),
    ],
)
def test_which_models_get_a_weight_digest(entry, shards, removed, expected):
    assert resources.digested(entry, shards, removed) is expected
