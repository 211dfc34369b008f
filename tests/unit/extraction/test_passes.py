"""Unit tier: whether a model is an encoder or a decoder (ctxvar.extraction.passes, models.csv's ``attention``), as it
declares it or as one forward pass shows it: transformers' ``is_causal`` flags say what the probe measures on every
family that sets them, the probe tells the families that set none, and the Gaussian null, whose positions attend to
nothing, says so itself."""

from __future__ import annotations

import pytest
import torch

from ctxvar.extraction.passes import attention_kind
from ctxvar.models import loading

SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=100)
FLAGGED = {  # transformers' model_type → (its sizes, what it is)
    "bert": (SIZES, "bidirectional"),
    "roberta": (SIZES, "bidirectional"),
    "distilbert": (dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=100), "bidirectional"),
    "gpt2": (dict(n_embd=32, n_layer=2, n_head=4, vocab_size=100), "causal"),
    "gpt_neox": (SIZES, "causal"),
    "llama": (dict(SIZES, num_key_value_heads=2), "causal"),
    "opt": (dict(SIZES, ffn_dim=64, word_embed_proj_dim=32), "causal"),
}
UNFLAGGED = {  # families whose attention modules carry no is_causal in transformers 5
    "deberta-v2": (SIZES, "bidirectional"),
    "mpnet": (SIZES, "bidirectional"),
    "bloom": (dict(hidden_size=32, n_layer=2, n_head=4, vocab_size=100), "causal"),
    "mpt": (dict(d_model=32, n_layers=2, n_heads=4, vocab_size=100), "causal"),
}
CPU = torch.device("cpu")


def tiny(model_type: str, **sizes) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    return AutoModel.from_config(AutoConfig.for_model(model_type, **sizes)).eval()


def probed(model) -> str:
    """What the forward pass shows, whatever the model declares."""
    declared = loading.declared_attention
    try:
        loading.declared_attention = lambda model: None
        return attention_kind(model, CPU)
    finally:
        loading.declared_attention = declared


@pytest.mark.parametrize("model_type", FLAGGED)
def test_transformers_flags_say_what_the_forward_pass_shows(model_type):
    sizes, kind = FLAGGED[model_type]
    model = tiny(model_type, **sizes)
    assert loading.declared_attention(model) == probed(model) == kind
    assert attention_kind(model, CPU, whole=False) == kind  # streamed weights: the flags alone


@pytest.mark.parametrize("model_type", UNFLAGGED)
def test_a_family_without_flags_is_probed_when_whole_and_not_known_when_streamed(model_type):
    sizes, kind = UNFLAGGED[model_type]
    model = tiny(model_type, **sizes)
    assert loading.declared_attention(model) is None
    assert attention_kind(model, CPU) == kind
    assert attention_kind(model, CPU, whole=False) is None


def test_a_bert_configured_as_a_decoder_is_causal():
    model = tiny("bert", **SIZES, is_decoder=True)
    assert loading.declared_attention(model) == probed(model) == "causal"


def test_the_gaussian_null_declares_no_attention():
    """Its noise is a function of the whole sentence, so a later token changes an earlier vector: the probe would
    read it as bidirectional, which it is not."""
    from ctxvar.models.gaussian_null import GaussianNullModel
    from ctxvar.models.gaussian_null_config import GaussianNullConfig

    model = GaussianNullModel(GaussianNullConfig(vocab_size=50, hidden_size=8, seed=0)).eval()
    assert attention_kind(model, CPU) == attention_kind(model, CPU, whole=False) == "none"
    assert probed(model) == "bidirectional"
