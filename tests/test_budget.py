"""The device budget for the sums: the memory left once the model and one batch are counted."""

from types import SimpleNamespace

import pytest

from ctxvar.errors import StatisticsError
from ctxvar.extraction.accumulator import layer_groups, state_bytes
from ctxvar.extraction.budget import RESERVE_MIN_BYTES, activation_bytes, state_budget_bytes

GiB = 1 << 30
LLAMA_2_7B = SimpleNamespace(hidden_size=4096, intermediate_size=11008, num_attention_heads=32)


def test_activations_count_the_kept_hidden_states_and_one_layers_transients():
    config = SimpleNamespace(intermediate_size=64, num_attention_heads=2)
    n = 100
    expected = 4 * n * (5 * 16 + 6 * 16 + 2 * 64 + 2 * 2 * 10)
    assert activation_bytes(config, n_hidden=5, d=16, batch_tokens=n, width=10, element_bytes=4) == expected


def test_gpt2_style_configs_give_the_ffn_and_heads_under_their_own_names():
    gpt2 = SimpleNamespace(n_inner=None, n_head=12)  # n_inner None: 4·d
    bert = SimpleNamespace(intermediate_size=3072, num_attention_heads=12)
    assert activation_bytes(gpt2, 13, 768, 1000, 50, 4) == activation_bytes(bert, 13, 768, 1000, 50, 4)


def test_a_7b_decoder_in_bf16_fits_its_sums_in_one_pass_on_an_80_gb_card():
    """Llama-2-7B's shape (33 hidden states, d = 4096), 24k types with the default cosine sums, bf16 weights
    (13.5 GB) on an 80 GB H100: half the card (the old cap) needed two passes; the budget needs one."""
    n_hidden, d, types = 33, 4096, 24_000
    total = 80 * GiB
    free = total - int(13.5e9) - GiB  # the weights and the CUDA context
    activations = activation_bytes(LLAMA_2_7B, n_hidden, d, 16384, 64, 2)
    budget = state_budget_bytes(free, total, activations, 16384 * d * 20)
    cosine = SimpleNamespace(cosine=True, covariance=False, sample_size=0)
    assert state_bytes(n_hidden, types, d, cosine) < budget < free - activations
    assert len(layer_groups(n_hidden, types, d, budget, cosine)) == 1
    assert len(layer_groups(n_hidden, types, d, total / 2, cosine)) == 2


def test_the_reserve_is_five_percent_of_the_card_or_one_gib():
    assert state_budget_bytes(10 * GiB, 80 * GiB) == 10 * GiB - 4 * GiB
    assert state_budget_bytes(10 * GiB, 8 * GiB, GiB) == 10 * GiB - GiB - RESERVE_MIN_BYTES


def test_too_little_memory_for_one_layer_says_what_to_change():
    with pytest.raises(StatisticsError, match="raise max_state_mb in the profile, use more shards"):
        layer_groups(33, 50_000, 4096, state_budget_bytes(20 * GiB, 80 * GiB, 19 * GiB))
