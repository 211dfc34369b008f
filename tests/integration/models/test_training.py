"""Local checkpoints of a tiny random-init model (ctxvar.models.training): AdamW steps on the architecture's own
objective, next-token prediction for GPT-2 and masked tokens for BERT, deterministic for a seed, the loss falling, the
model left in eval mode; no step, no change; transformers' remarks on the way go to the job log."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoTokenizer

from ctxvar.models.training import language_model, train_steps


def twins(model_dir, arch: str):
    """Two language models of ``model_dir``'s config with the same initial weights, and its tokenizer."""
    config = AutoConfig.from_pretrained(model_dir)
    torch.manual_seed(0)
    first = language_model(arch, config)
    second = language_model(arch, config)
    second.load_state_dict(first.state_dict())
    return first, second, AutoTokenizer.from_pretrained(model_dir)


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_training_is_deterministic_for_a_seed_and_lowers_the_loss(arch, tiny_models, corpus_texts):
    first, second, tokenizer = twins(tiny_models[arch], arch)
    assert type(first).__name__ == {"gpt2": "GPT2LMHeadModel", "bert": "BertForMaskedLM"}[arch]
    losses = train_steps(first, tokenizer, arch, corpus_texts[:60], steps=12, seed=4, learning_rate=3e-3)
    assert train_steps(second, tokenizer, arch, corpus_texts[:60], steps=12, seed=4, learning_rate=3e-3) == losses
    assert len(losses) == 12 and sum(losses[-3:]) < sum(losses[:3])
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    assert not first.training


def test_no_step_changes_nothing(tiny_models, corpus_texts):
    first, second, tokenizer = twins(tiny_models["gpt2"], "gpt2")
    assert train_steps(first, tokenizer, "gpt2", corpus_texts[:10], steps=0, seed=0, learning_rate=1.0) == []
    for a, b in zip(first.state_dict().values(), second.state_dict().values()):
        assert torch.equal(a, b)
