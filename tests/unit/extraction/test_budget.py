"""The device budget for the sums (ctxvar.extraction.budget): the memory left once the model and one batch are counted;
the memory model of the sums, equal to what the accumulator allocates; the leading layers kept on the device under the
cap, and a cap below one layer refused where one layer must fit."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ctxvar.errors import DeviceMemoryError, StatisticsError
from ctxvar.extraction.accumulator import EmbeddingSums, GeometryOptions
from ctxvar.extraction.budget import (
    RESERVE_MIN_BYTES,
    activation_bytes,
    batch_bytes,
    check_one_layer_fits,
    device_layers,
    state_budget_bytes,
    state_bytes,
    state_cap_bytes,
    warn_of_host_layers,
)
from ctxvar.extraction.settings import ExtractionSettings

from support.workflow_runs import REPO

GiB = 1 << 30
# CPU proxies, small enough for the fast tier: a decoder of Llama's proportions (ffn 2.69·d) and GPT-2's, and a
# deep, narrow encoder, where the hidden states kept weigh most against one layer's transients
PROXIES = {
    "llama": {
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 8,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": 1000,
    },
    "gpt2": {"model_type": "gpt2", "n_embd": 256, "n_inner": 1024, "n_layer": 8, "n_head": 4, "vocab_size": 1000},
    "bert": {
        "model_type": "bert",
        "hidden_size": 128,
        "intermediate_size": 512,
        "num_hidden_layers": 32,
        "num_attention_heads": 2,
        "vocab_size": 1000,
    },
}
LLAMA_2_7B = SimpleNamespace(hidden_size=4096, intermediate_size=11008, num_attention_heads=32)


@pytest.fixture(scope="module")
def loop_peaks() -> dict[str, dict]:
    """tests/support/forward_peak.py on every proxy, in one fresh process: 2 batches of 16 rows × 64 tokens each. Every
    term the budget counts, and every copy a leak would add (the KV cache, a batch's outputs kept alive), grows with
    the rows, so a few rows show the same proportions as many; the forward passes are most of the test's time."""
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "support" / "forward_peak.py"),
            json.dumps(list(PROXIES.values())),
            "16",
            "64",
            "2",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return dict(zip(PROXIES, json.loads(run.stdout.splitlines()[-1])))


@pytest.mark.integration
@pytest.mark.parametrize("proxy", PROXIES)
def test_the_budget_covers_the_measured_peak_of_the_batch_loop(loop_peaks, proxy):
    """The batch loop's peak memory on a CPU proxy (fresh process, 2 batches, so that one batch's outputs could
    outlive it) is within the activations and buffers the budget counts; with the KV cache (1.9× the hidden states
    at 24–32 layers) or the previous batch's outputs alive during the next forward, it was not."""
    measured = loop_peaks[proxy]
    assert measured["peak_bytes"] > measured["hidden_state_bytes"], "the measurement must see the forward pass"
    assert measured["peak_bytes"] <= measured["activation_bytes"] + measured["buffer_bytes"]


def test_activations_count_the_kept_hidden_states_and_one_layers_transients():
    config = SimpleNamespace(intermediate_size=64, num_attention_heads=2)
    n = 100
    expected = 4 * n * (5 * 16 + 6 * 16 + 4 * 64 + 2 * 2 * 10)
    assert activation_bytes(config, n_hidden=5, d=16, batch_tokens=n, width=10, element_bytes=4) == expected


def test_gpt2_style_configs_give_the_ffn_and_heads_under_their_own_names():
    gpt2 = SimpleNamespace(n_inner=None, n_head=12)  # n_inner None: 4·d
    bert = SimpleNamespace(intermediate_size=3072, num_attention_heads=12)
    assert activation_bytes(gpt2, 13, 768, 1000, 50, 4) == activation_bytes(bert, 13, 768, 1000, 50, 4)


def test_a_7b_decoder_in_bf16_fits_its_sums_on_an_80_gb_card():
    """Llama-2-7B's shape (33 hidden states, d = 4096), 24k types with the default cosine sums, bf16 weights
    (13.5 GB) on an 80 GB H100, whole-model: the budget holds every layer's sums; half the card (the old cap)
    would have held 27 of the 33."""
    n_hidden, d, types = 33, 4096, 24_000
    total = 80 * GiB
    free = total - int(13.5e9) - GiB  # the weights and the CUDA context
    activations = activation_bytes(LLAMA_2_7B, n_hidden, d, 16384, 64, 2)
    budget = state_budget_bytes(free, total, activations, 16384 * d * 20)
    cosine = GeometryOptions(cosine=True)
    assert state_bytes(n_hidden, types, d, cosine) < budget < free - activations
    assert device_layers(n_hidden, types, d, budget, cosine) == n_hidden
    assert device_layers(n_hidden, types, d, total / 2, cosine) == 27


def test_the_reserve_is_five_percent_of_the_card_or_one_gib():
    assert state_budget_bytes(10 * GiB, 80 * GiB) == 10 * GiB - 4 * GiB
    assert state_budget_bytes(10 * GiB, 8 * GiB, GiB) == 10 * GiB - GiB - RESERVE_MIN_BYTES


def test_too_little_memory_for_one_layer_says_what_to_change():
    with pytest.raises(StatisticsError, match="raise max_state_mb in the profile, use more shards"):
        check_one_layer_fits(50_000, 4096, state_budget_bytes(20 * GiB, 80 * GiB, 19 * GiB))


def gpu_job(monkeypatch, card_bytes: int, dtype: str):
    """A Llama-2-7B-shaped job on a GPU of ``card_bytes`` with its weights (2 bytes per parameter in bf16) loaded:
    24,000 types, 16,384-token batches of 64-token rows, the default cosine sums; its settings, job and padded
    batches, as :func:`state_cap_bytes` reads them."""
    weights = int(6.74e9) * (2 if dtype == "bfloat16" else 4)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (card_bytes - weights - GiB, card_bytes))
    settings = ExtractionSettings(
        model={"id": "llama-2-7b"}, source="-", dtype=dtype, geometry=GeometryOptions(cosine=True)
    )
    job = SimpleNamespace(
        device=torch.device("cuda", 0),
        encoded=SimpleNamespace(lengths=np.full(1000, 64)),
        model=SimpleNamespace(config=LLAMA_2_7B),
        n_layers=33,
        d=4096,
        types=np.arange(24_000),
        n_words=None,
    )
    return settings, job, SimpleNamespace(device_bytes=lambda: 16 * 2 * 64_000)


def test_a_gpu_without_room_for_one_layer_of_sums_names_the_budget_not_a_negative_cap(monkeypatch):
    """Llama-2-7B in fp32 on a 40 GB card: the budget is negative. The error names what takes the memory and what
    to change, not a negative cap and not max_state_mb (raising it skips the check)."""
    settings, job, padded = gpu_job(monkeypatch, 40 * GiB, "float32")
    with pytest.raises(DeviceMemoryError) as raised:
        state_cap_bytes(settings, job, padded)
    message = str(raised.value)
    assert "leaves nothing for the sums (one layer: " in message and "more shards (fewer types per shard)" in message
    assert "use dtype: bfloat16, a lower batch_tokens" in message and "GPU with more memory" in message
    assert "max_state_mb" not in message and " -" not in message


def test_sums_in_host_memory_are_a_warning_with_their_cost_and_remedy(monkeypatch, caplog):
    """Llama-2-7B in bf16 on a 24 GB card, whole-model: room for one layer's sums, so the other 32 are kept in host
    memory, their hidden states copied there batch by batch."""
    settings, job, padded = gpu_job(monkeypatch, 24 * GiB, "bfloat16")
    cap = state_cap_bytes(settings, job, padded)
    on_device = device_layers(33, 24_000, 4096, cap, settings.geometry)
    warn_of_host_layers(settings, job, on_device, cap)
    assert on_device == 1
    [record] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "so those of layers 1–32 are kept in host memory" in record.message
    assert "to keep every layer on the device, use more shards (fewer types per shard) or a GPU with more memory" in (
        record.message
    )


def test_every_layer_on_the_device_is_no_warning_and_a_float32_job_is_told_of_bfloat16(monkeypatch, caplog):
    """Llama-2-7B on an 80 GB card: every layer's sums on the device in bf16; not all in fp32, whose remedy starts
    with bf16."""
    for dtype, all_fit in (("bfloat16", True), ("float32", False)):
        settings, job, padded = gpu_job(monkeypatch, 80 * GiB, dtype)
        cap = state_cap_bytes(settings, job, padded)
        on_device = device_layers(33, 24_000, 4096, cap, settings.geometry)
        warn_of_host_layers(settings, job, on_device, cap)
        assert (on_device == 33) == all_fit
    [record] = caplog.records
    assert "kept in host memory" in record.message and "use dtype: bfloat16, more shards" in record.message


def test_geometry_state_is_what_the_memory_model_says():
    options = GeometryOptions(covariance=True, cosine=True, sample_size=7)
    sums = EmbeddingSums(
        range(1, 4), 5, n_types=30, d=8, device=torch.device("cpu"), options=options, sample_tokens=np.arange(0, 14, 2)
    )
    tensors = [
        sums.types.count,
        *sums.types.sums.values(),
        *(tensor for _, tensor in sums.layer_sums.values()),
        sums.moments.outer,
        sums.sample.points,
    ]
    assert sum(t.numel() * t.element_size() for t in tensors) == state_bytes(3, 30, 8, options)
    hidden = [torch.randn(2, 10, 8) for _ in range(5)]
    hits = sums.sample.locate(np.arange(20), np.array([0, 20]))[0]
    sums.accumulate(hidden, torch.arange(0, 20), torch.randint(0, 30, (20,)), hits)
    buffers = sums._gather.numel() * 4 + (sums.types._rows.numel() + sums.types._unit.numel()) * 8
    assert buffers + 8 * 2 * 4 == batch_bytes(3, 20, 8, options)  # + a block row of the fp32 Gram (20 rows: one chunk)
    np.testing.assert_array_equal(sums.sample.points[1].numpy(), hidden[2].reshape(-1, 8)[0:14:2].numpy())


def test_the_leading_layers_on_the_device_keep_the_state_under_the_cap():
    # Llama-size: 128k types, d = 4096, 33 hidden states: 138 GB of sums in one pass
    assert state_bytes(33, 128_000, 4096) > 138e9
    on_device = device_layers(33, 128_000, 4096, max_state_bytes=40e9)
    assert on_device == 9 and state_bytes(9, 128_000, 4096) <= 40e9 < state_bytes(10, 128_000, 4096)
    assert device_layers(13, 20_000, 768, float("inf")) == 13
    assert device_layers(33, 128_000, 4096, max_state_bytes=1e9) == 0  # all of them in host memory


def test_a_cap_below_one_layer_is_refused_where_one_layer_must_fit():
    with pytest.raises(StatisticsError, match="raise max_state_mb"):
        check_one_layer_fits(128_000, 4096, max_state_bytes=1e9)


def test_device_state_is_what_the_memory_model_says():
    sums = EmbeddingSums(range(2, 5), 6, n_types=300, d=16, device=torch.device("cpu"))
    tensors = (
        sums.types.count,
        *sums.types.sums.values(),
        *(tensor for _, tensor in sums.layer_sums.values()),
    )  # every sum declared kept
    allocated = sum(t.numel() * t.element_size() for t in tensors)
    assert allocated == state_bytes(3, 300, 16)
    hidden = [torch.randn(4, 10, 16) for _ in range(6)]
    sums.accumulate(hidden, torch.arange(0, 40, 2), torch.randint(0, 300, (20,)))
    assert sums._gather.numel() * 4 + sums.types._rows.numel() * 8 == batch_bytes(3, 20, 16)
