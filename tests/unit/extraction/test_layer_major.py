"""Layer-major memory plans from a model's shape alone (:func:`ctxvar.extraction.layer_major.shape_plan`): the
job's own arithmetic on models built on ``meta`` from transformers configs, no weights, no device."""

from __future__ import annotations

import sys

import pytest
import torch
from transformers import LlamaConfig, LlamaModel

from ctxvar.extraction.budget import reserve_bytes
from ctxvar.extraction.layer_major import ModelWeights, find_blocks, shape_plan, shape_weights

from support.workflow_runs import REPO

sys.path.insert(0, str(REPO / "bench"))
import memory_plans  # noqa: E402  (bench/memory_plans.py: the shapes docs/performance.md tabulates)

CARD = memory_plans.CARD_BYTES  # 80 · 10⁹ bytes: below an H100 80GB's 80 GiB
SHAPES = memory_plans.shapes()
BF16 = 2


def plan_of(name: str, padded_tokens: int, n_types: int, card: int = CARD, streamed: bool | None = None):
    config, dtype = SHAPES[name]
    weights = shape_weights(config, dtype)
    settings = memory_plans.settings_for(name, dtype)
    return shape_plan(config, weights, settings, padded_tokens, n_types, card, memory_plans.WIDTH, streamed)


def llama_block_bytes(d: int, ffn: int, heads: int, kv_heads: int) -> int:
    """A Llama block's bf16 weights by hand: q and o (d × d), k and v (d × d · kv/heads), the gated MLP's three
    d × ffn matrices and two RMS norms."""
    return BF16 * (2 * d * d + 2 * d * d * kv_heads // heads + 3 * d * ffn + 2 * d)


def fits_one_pass(plan) -> bool:
    """The plan holds everything, hidden states included, on the card beside the reserve."""
    return not plan.states_on_host and plan.device_bytes() + reserve_bytes(CARD) <= CARD


@pytest.mark.parametrize("name", memory_plans.PAPER_MODELS)
def test_each_paper_model_plans_its_paper_shard_whole_on_an_80_gb_card(name):
    plan = plan_of(name, memory_plans.PAPER_SHARD_TOKENS, memory_plans.PAPER_TYPES)
    assert not plan.streamed and plan.resident_weights == plan.weights
    assert fits_one_pass(plan)


def test_a_13b_model_plans_one_pass_of_a_million_tokens_on_an_80_gb_card():
    d, ffn, vocab = 5120, 13824, 32000
    plan = plan_of("llama-2-13b", 10**6, vocab)
    block = llama_block_bytes(d, ffn, 40, 40)
    assert plan.block_weights == block
    assert plan.weights == 40 * block + BF16 * (vocab * d + d)  # the blocks, the embedding, the final norm
    assert not plan.streamed and plan.resident_weights == plan.weights  # 25.7 GB: loaded whole
    assert plan.hidden_states == 10**6 * d * BF16
    assert fits_one_pass(plan)


def test_a_70b_model_streams_its_blocks_and_plans_at_most_40_gb_for_a_million_tokens():
    d, ffn, vocab = 8192, 28672, 32000
    plan = plan_of("llama-2-70b", 10**6, vocab)  # U ≤ the vocabulary: the sums of any such shard fit
    block = llama_block_bytes(d, ffn, 64, 8)
    assert plan.block_weights == block
    assert plan.weights == 80 * block + BF16 * (vocab * d + d)  # 137 GB: beyond the card
    assert plan.streamed
    assert plan.resident_weights == BF16 * (vocab * d + d) + 2 * block  # outside the blocks and two blocks
    assert plan.hidden_states == 10**6 * d * BF16
    assert not plan.states_on_host
    assert plan.device_bytes() <= 40e9


def test_a_model_beyond_a_smaller_card_streams_on_it():
    assert plan_of("llama-2-13b", 10**6, 32000, card=20 * 10**9).streamed


def test_the_weights_of_a_shape_are_those_of_the_model_built():
    config = LlamaConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2
    )
    model = LlamaModel(config).to(torch.bfloat16)
    assert shape_weights(config, "bfloat16") == ModelWeights.of(model, find_blocks(model))


def test_the_committed_table_is_what_the_code_plans_now():
    """bench/results/memory_plans.csv, which docs/performance.md quotes, holds the current arithmetic's plan
    (its 70B row, recomputed: the whole table takes seconds)."""
    import pandas as pd

    committed = pd.read_csv(REPO / "bench" / "results" / "memory_plans.csv").set_index("model")
    name = "llama-2-70b"
    config, dtype = SHAPES[name]
    row = memory_plans.plan_row(
        name,
        config,
        dtype,
        memory_plans.settings_for(name, dtype),
        shape_weights(config, dtype),
        10**6,
        config.vocab_size,
        *memory_plans.checkpoint_bytes(config, dtype),
    )
    assert {key: committed.loc[name, key] for key in row if key != "model"} == {
        key: value for key, value in row.items() if key != "model"
    }


MIB = 2**20
CARDS = {"24 GB": 24e9, "48 GB": 48e9, "80 GB": 80e9, "H100": 81_559 * MIB, "141 GB": 141e9, "H200": 143_771 * MIB}


@pytest.mark.parametrize("card", CARDS, ids=list(CARDS))
@pytest.mark.parametrize("name", ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-405b"])
def test_no_plan_errs_where_the_other_choice_fits(name, card):
    """Whether a job streams is decided from the whole plan (the weights and one layer's sums and batch beside them,
    :func:`ctxvar.extraction.layer_major.streams`): on every card, the choice made plans without error wherever
    loading whole or streaming would; on an H100 and on an H200 as torch reports them (81,559 and 143,771 MiB),
    Llama-2-70B and Llama-3.1-405B in bf16 plan."""
    from ctxvar.errors import DeviceMemoryError

    def plan(streamed=None):
        try:
            return plan_of(name, 10**6, SHAPES[name][0].vocab_size, int(CARDS[card]), streamed)
        except DeviceMemoryError:
            return None

    chosen = plan()
    others = [plan(streamed) for streamed in (False, True)]
    assert chosen is not None or not any(others), f"{name} on {card}: the choice errs where another plans"
    if card in ("H100", "H200"):
        assert chosen is not None
