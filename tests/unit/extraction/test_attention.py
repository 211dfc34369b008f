"""The attention kernels a job allows (:mod:`ctxvar.extraction.attention`) and batches padded to a width multiple
(:func:`ctxvar.models.batching.pad_batches`), which bench/forward_variants.py compares on a GPU."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ctxvar.extraction.attention import attention_kernels, chosen_attention, only_attention_kernels
from ctxvar.models import loading
from ctxvar.models.batching import pad_batches
from ctxvar.models.tokens import encode, type_table
from ctxvar.stats.merge import union_of
from ctxvar.versions import TORCH_DEFAULT_ATTENTION

CUDA = torch.device("cuda", 0)  # a device object only: nothing runs on it


def kernel_flags() -> dict[str, bool]:
    backends = torch.backends.cuda
    return {
        "cudnn": backends.cudnn_sdp_enabled(),
        "flash": backends.flash_sdp_enabled(),
        "efficient": backends.mem_efficient_sdp_enabled(),
        "math": backends.math_sdp_enabled(),
    }


def test_a_gpu_job_leaves_cudnn_attention_out_and_gives_it_back():
    before = kernel_flags()
    with chosen_attention(CUDA):
        assert kernel_flags() == {"cudnn": False, "flash": True, "efficient": True, "math": True}
    assert kernel_flags() == before
    assert attention_kernels(CUDA) == "flash_attention, efficient_attention, math"


def test_a_cpu_job_keeps_torchs_choice():
    before = kernel_flags()
    with chosen_attention(torch.device("cpu")):
        assert kernel_flags() == before
    assert attention_kernels("cpu") == "torch's default"


def test_named_kernels_are_the_only_ones_on_any_device_and_none_leaves_torchs_choice():
    query = torch.randn(1, 2, 8, 16)
    with only_attention_kernels(("EFFICIENT_ATTENTION",)), pytest.raises(RuntimeError):
        torch.nn.functional.scaled_dot_product_attention(query, query, query)  # a CPU has no such kernel
    with only_attention_kernels(("MATH",)):
        math = torch.nn.functional.scaled_dot_product_attention(query, query, query)
    torch.testing.assert_close(math, torch.nn.functional.scaled_dot_product_attention(query, query, query))
    before = kernel_flags()
    with only_attention_kernels(None):  # bench/forward_variants.py's "default": cuDNN's kernel stays allowed
        assert kernel_flags() == before
    with pytest.raises(ValueError, match="at least one kernel"), only_attention_kernels(()):
        pass


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_wider_padding_leaves_the_real_tokens_states_within_rounding(tiny_models, corpus_texts, arch):
    """Rows padded past their batch's longest sentence (to a multiple of 8) hold the same real tokens, and the
    model gives them the same states to float32 rounding: padding is masked out of attention."""
    tokenizer = loading.load_tokenizer({"id": arch}, tiny_models[arch])
    model = loading.load_model({"id": arch}, tiny_models[arch], "float32", torch.device("cpu"))
    encoded = encode(tokenizer, corpus_texts[:40])
    _, type_index = type_table(tokenizer, encoded.ids, None)
    lengths = encoded.lengths
    batches = [np.argsort(-lengths, kind="stable")[:20], np.argsort(-lengths, kind="stable")[20:]]
    exact, wide = (
        pad_batches(encoded, type_index, batches, loading.pad_id(tokenizer), multiple) for multiple in (1, 8)
    )
    assert all(width % 8 == 0 for _, width in wide.shapes)
    assert any(width % 8 for _, width in exact.shapes)  # else the widths do not change
    assert np.array_equal(exact.tokens, wide.tokens) and np.array_equal(exact.type_index, wide.type_index)
    with torch.inference_mode():
        for narrow_batch, wide_batch in zip(exact.to("cpu"), wide.to("cpu")):
            states = [
                model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
                for batch in (narrow_batch, wide_batch)
            ]
            real = [s.reshape(-1, s.shape[-1])[b.positions] for s, b in zip(states, (narrow_batch, wide_batch))]
            torch.testing.assert_close(real[1], real[0], rtol=1e-5, atol=1e-5 * float(real[0].abs().max()))


def test_a_merge_counts_a_partial_written_before_kernels_were_recorded_as_torchs_choice():
    """Every job before then let torch choose; a running total lists what its shards allowed."""
    job = attention_kernels(CUDA)
    old, new = SimpleNamespace(metadata={"device_name": "cpu"}), SimpleNamespace(metadata={"attention_kernels": job})
    running = SimpleNamespace(metadata={"attention_kernels": [job], "devices": ["NVIDIA H200"]})
    kernels = ("attention_kernels", "attention_kernels", TORCH_DEFAULT_ATTENTION)
    assert union_of([new, running], *kernels) == [job]
    both = sorted([job, TORCH_DEFAULT_ATTENTION])
    assert union_of([old, new], *kernels) == union_of([running, old], *kernels) == both
    assert union_of([old, running], "device_name", "devices") == ["NVIDIA H200", "cpu"]
    assert union_of([new], "device_name", "devices") == []  # a device not recorded is not guessed
