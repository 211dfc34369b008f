"""Train a tiny random-init model for a few steps on the corpus: local checkpoints for offline sweeps.

``init: random`` entries with ``revisions: [step0, step200, …]`` become models
trained N steps from the same initialisation, with AdamW on the architecture's
own objective: next-token prediction for GPT-2, masked-token prediction (15 %)
for BERT and RoBERTa. Deterministic for a given seed on CPU.
"""

from __future__ import annotations

import numpy as np
import torch

from ctxvar.models.batching import pad_batch
from ctxvar.models.tokens import encode
from ctxvar.models.transformers_log import transformers_into_log

BATCH_SENTENCES = 16
MAX_TOKENS = 64  # longer sentences are cut for training only; extraction never truncates
MASK_PROBABILITY = 0.15


def language_model(arch: str, config):
    """The architecture's pretraining model (LM head on top of the base model) for ``config``."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    return (AutoModelForCausalLM if arch == "gpt2" else AutoModelForMaskedLM).from_config(config)


def train_steps(
    model, tokenizer, arch: str, texts: list[str], steps: int, seed: int, learning_rate: float
) -> list[float]:
    """Train ``model`` (from :func:`language_model`) in place for ``steps`` AdamW steps; returns the losses.
    transformers' remarks on the way (its loss type of a config made here) go to the job log."""
    if steps == 0:
        return []
    with transformers_into_log():
        return _train(model, tokenizer, arch, texts, steps, seed, learning_rate)


def _train(model, tokenizer, arch: str, texts: list[str], steps: int, seed: int, learning_rate: float) -> list[float]:
    from transformers import DataCollatorForLanguageModeling

    encoded = encode(tokenizer, texts)
    generator = np.random.default_rng(seed)
    torch.manual_seed(seed)  # the collator's masking draws from torch's global generator
    collator = None if arch == "gpt2" else DataCollatorForLanguageModeling(tokenizer, mlm_probability=MASK_PROBABILITY)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    losses = []
    for _ in range(steps):
        rows = generator.choice(len(encoded.lengths), size=min(BATCH_SENTENCES, len(encoded.lengths)), replace=False)
        batch = pad_batch(encoded, np.zeros(len(encoded.ids), np.int64), rows, pad)
        input_ids = torch.from_numpy(batch.input_ids[:, :MAX_TOKENS])
        attention_mask = torch.from_numpy(batch.attention_mask[:, :MAX_TOKENS])
        if collator is None:
            labels = input_ids.masked_fill(attention_mask == 0, -100)
        else:
            masked = collator.torch_mask_tokens(
                input_ids.clone(), special_tokens_mask=(attention_mask == 0) | _specials(tokenizer, input_ids)
            )
            input_ids, labels = masked
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


def _specials(tokenizer, input_ids: torch.Tensor) -> torch.Tensor:
    return torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))
