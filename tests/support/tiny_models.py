"""Tiny random-init models for the tests, built two ways, each in one place.

:func:`random_model` is ctxvar's own ``init: random`` model (:func:`ctxvar.models.random_init.build_random_model`):
a BERT, RoBERTa or GPT-2 with a tokenizer trained on the texts given and LayerNorm γ and β randomised, since
random-init norms are the identity and would make Q constant across types. :func:`tiny_model` is any family
transformers knows, initialised by transformers under a seed, for the vocabulary of a tokenizer already saved (the
session's tiny GPT-2's, say), with its norms randomised where a test asks (:func:`randomise_norms`, which covers
RMSNorm too). The sizes are the caller's, so that each test keeps the model, and the numbers, it was written for.
:func:`pickled` saves a model's checkpoint again as transformers saved them before safetensors.
"""

from __future__ import annotations

import torch

# The session's models (tests/conftest.py's tiny_models): what random_model builds unless told otherwise.
RANDOM_SIZES = {
    "vocab_size": 300,
    "hidden_size": 32,
    "num_layers": 3,
    "num_heads": 2,
    "intermediate_size": 64,
    "max_positions": 512,
}
# The decoder families the tests run beyond BERT, RoBERTa and GPT-2, in transformers' names (sliding windows
# shorter than the test sentences, so that they slide).
DECODER_SIZES = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64)
GROUPED = dict(**DECODER_SIZES, num_key_value_heads=2)
DECODERS = {
    "gpt_neox": DECODER_SIZES,
    "opt": dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, ffn_dim=64, word_embed_proj_dim=32),
    "llama": GROUPED,
    "mistral": dict(**GROUPED, sliding_window=6),
    "qwen2": dict(**GROUPED, use_sliding_window=True, sliding_window=6, max_window_layers=1),
    "gemma2": dict(**GROUPED, head_dim=8, sliding_window=6),
    "gptj": dict(n_embd=32, n_layer=3, n_head=4, rotary_dim=4),
    "falcon": DECODER_SIZES,  # its blocks return tuples
    "bloom": dict(hidden_size=32, n_layer=3, n_head=4),
    "mpt": dict(d_model=32, n_layers=3, n_heads=4, expansion_ratio=2),
}
# Encoders beyond BERT and RoBERTa: DeBERTa-v2's layers return tuples; ALBERT's 3 layers share one block.
ENCODERS = {
    "deberta-v2": DECODER_SIZES,
    "albert": dict(**DECODER_SIZES, embedding_size=16),
}


def random_model(folder, arch: str, texts, seed: int, **entry) -> str:
    """``folder`` (as text), holding ctxvar's random-init model of ``arch`` with a tokenizer trained on ``texts``:
    the models entry ``{arch, seed, **RANDOM_SIZES, **entry}``."""
    from ctxvar.models.random_init import build_random_model

    build_random_model({"arch": arch, **RANDOM_SIZES, **entry, "seed": seed}, texts, folder)
    return str(folder)


def tiny_model(
    folder,
    family: str,
    tokenizer_dir,
    seed: int,
    head: bool | str = False,
    norms_seed: int | None = None,
    token_ids: bool = True,
    shard_size: str | None = None,
    **sizes,
) -> str:
    """``folder`` (as text), holding a random-init model of ``family`` (a transformers ``model_type``) of ``sizes``
    for the vocabulary of the tokenizer in ``tokenizer_dir``, and that tokenizer. Initialised by transformers after
    ``torch.manual_seed(seed)``; with its causal language-modelling head if ``head`` (its masked one if ``head`` is
    ``"masked"``); its norms randomised with
    ``norms_seed`` if given; the tokenizer's BOS and EOS ids in its config if ``token_ids`` (else the family's
    defaults); saved in files of at most ``shard_size`` if given."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id) if token_ids else {}
    config = AutoConfig.for_model(family, vocab_size=len(tokenizer), **ids, **sizes)
    torch.manual_seed(seed)
    builder = AutoModelForMaskedLM if head == "masked" else AutoModelForCausalLM if head else AutoModel
    model = builder.from_config(config)
    if norms_seed is not None:
        randomise_norms(model, norms_seed)
    model.save_pretrained(folder, **({"max_shard_size": shard_size} if shard_size else {}))
    tokenizer.save_pretrained(folder)
    return str(folder)


def untied_gpt2(folder, tokenizer_dir, head: bool = True) -> str:
    """:func:`tiny_model`: a GPT-2 of one layer whose output matrix is its own (``tie_word_embeddings`` false),
    saved with its language-modelling head, or (``head`` false) as the base model alone, whose files then lack the
    head's matrix."""
    sizes = dict(n_embd=16, n_layer=1, n_head=2, tie_word_embeddings=False)
    return tiny_model(folder, "gpt2", tokenizer_dir, 0, head=head, token_ids=False, **sizes)


def pickled(folder, zip_format: bool = True) -> str:
    """``folder``'s saved model (as text) made a checkpoint of before safetensors, as transformers saved those:
    each ``model*.safetensors`` written by ``torch.save`` as ``pytorch_model*.bin`` (``model.safetensors`` as
    ``pytorch_model.bin``, ``model-00001-of-00003.safetensors`` as ``pytorch_model-00001-of-00003.bin``) and the
    index as ``pytorch_model.bin.index.json``, the safetensors removed; in torch's older format (not a zip, which
    cannot be memory-mapped) unless ``zip_format``."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    folder = Path(folder)
    renamed = {}
    for path in sorted(folder.glob("model*.safetensors")):
        name = "pytorch_" + path.name.removesuffix(".safetensors") + ".bin"
        torch.save(load_file(path), folder / name, _use_new_zipfile_serialization=zip_format)
        renamed[path.name] = name
        path.unlink()
    index = folder / "model.safetensors.index.json"
    if index.exists():
        content = json.loads(index.read_text())
        content["weight_map"] = {key: renamed[file] for key, file in content["weight_map"].items()}
        (folder / "pytorch_model.bin.index.json").write_text(json.dumps(content))
        index.unlink()
    return str(folder)


def randomise_norms(model: torch.nn.Module, seed: int) -> None:
    """Every norm's weight ~ U(0.5, 1.5) and bias ~ N(0, 0.1²), LayerNorm and RMSNorm alike (ctxvar's own
    :func:`~ctxvar.models.random_init.randomise_layer_norms` draws the same for ``torch.nn.LayerNorm`` alone)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if "Norm" in type(module).__name__:
                for name, parameter in module.named_parameters(recurse=False):
                    values = torch.rand if name == "weight" else torch.randn
                    scale, shift = (1.0, 0.5) if name == "weight" else (0.1, 0.0)
                    parameter.copy_(shift + scale * values(parameter.shape, generator=generator))


def short_bert(folder, texts) -> str:
    """``folder`` (as text), holding a random-init BERT of 24 positions, shorter than some of ``texts`` (the
    session's corpus): the model of the tests of ``tokens.long_sentences``."""
    sizes = dict(hidden_size=16, num_layers=2, intermediate_size=32, max_positions=24)
    return random_model(folder, "bert", texts, seed=5, **sizes)
