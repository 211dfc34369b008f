"""Tiny random-init models with tokenizers trained on the corpus, for offline runs and tests.

Random-init LayerNorms are the identity (γ = 1, β = 0), which would make every
final-layer norm equal and Q constant; γ and β are randomised so that statistics
vary as in trained models.
"""

from __future__ import annotations

from collections import Counter

import torch
from transformers import AutoModel

from ctxvar.config.kinds import CHECKPOINT_PATTERN, random_spec
from ctxvar.files.atomic import atomic_directory
from ctxvar.models.training import language_model, train_steps

ARCH_SPECIALS = {
    "bert": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
    "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    "gpt2": ["<|endoftext|>"],
}


def train_tokenizer(arch: str, texts, vocab_size: int):
    """A transformers fast tokenizer of the architecture's kind, built from ``texts``, deterministically."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ARCH_SPECIALS[arch]
    if arch == "bert":
        core = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        core.normalizer = normalizers.BertNormalizer(lowercase=True)
        core.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        core.model = models.WordPiece(wordpiece_vocab(core, texts, vocab_size, specials), unk_token="[UNK]")
        core.decoder = decoders.WordPiece()
        return PreTrainedTokenizerFast(
            tokenizer_object=core,
            pad_token="[PAD]",
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    # Byte-level BPE, as RoBERTa and GPT-2; with the full byte alphabet given, training is deterministic.
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(
        texts,
        trainer=trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    if arch == "roberta":
        return PreTrainedTokenizerFast(
            tokenizer_object=core,
            bos_token="<s>",
            pad_token="<pad>",
            eos_token="</s>",
            unk_token="<unk>",
            mask_token="<mask>",
            cls_token="<s>",
            sep_token="</s>",
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>"
    )


def wordpiece_vocab(core, texts, vocab_size: int, specials: list[str]) -> dict[str, int]:
    """A deterministic WordPiece vocabulary: specials, every character alone and as ``##c``,
    then the most frequent words (ties alphabetical) up to ``vocab_size``.

    (The ``tokenizers`` WordPiece trainer breaks ties in hash order, so its
    vocabulary changes from run to run.) Rarer words split into ``##`` pieces.
    """
    words: Counter = Counter()
    for text in texts:
        words.update(word for word, _ in core.pre_tokenizer.pre_tokenize_str(core.normalizer.normalize_str(text)))
    characters = sorted({c for word in words for c in word})
    pieces = [*specials, *characters, *(f"##{c}" for c in characters)]
    frequent = [w for w, _ in sorted(words.items(), key=lambda item: (-item[1], item[0])) if len(w) > 1]
    pieces += frequent[: max(vocab_size - len(pieces), 0)]
    return {piece: index for index, piece in enumerate(pieces)}


def model_config(arch: str, spec: dict, tokenizer):
    """A transformers config of ``arch`` with the entry's sizes."""
    from transformers import BertConfig, GPT2Config, RobertaConfig

    sizes = dict(
        vocab_size=len(tokenizer),
        hidden_size=spec["hidden_size"],
        num_hidden_layers=spec["num_layers"],
        num_attention_heads=spec["num_heads"],
        intermediate_size=spec["intermediate_size"],
    )
    if arch == "bert":
        return BertConfig(**sizes, max_position_embeddings=spec["max_positions"], pad_token_id=tokenizer.pad_token_id)
    if arch == "roberta":
        pad = tokenizer.pad_token_id
        return RobertaConfig(
            **sizes,
            max_position_embeddings=spec["max_positions"] + pad + 1,
            pad_token_id=pad,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    return GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=spec["hidden_size"],
        n_layer=spec["num_layers"],
        n_head=spec["num_heads"],
        n_inner=spec["intermediate_size"],
        n_positions=spec["max_positions"],
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def randomise_layer_norms(model: torch.nn.Module, generator: torch.Generator) -> None:
    """γ ~ U(0.5, 1.5) and β ~ N(0, 0.1²) elementwise in every LayerNorm."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(0.5 + torch.rand(module.weight.shape, generator=generator))
                module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=generator))


def build_random_model(entry: dict, texts, out_dir) -> None:
    """Train a tokenizer on ``texts``, make a random-init model of ``entry['arch']``, save both
    (``save_pretrained``) into ``out_dir``, which appears only when complete.

    With ``revision: stepN`` the model is built with its pretraining head and
    trained N steps on ``texts`` (:mod:`ctxvar.models.training`); the base model is saved.
    """
    spec = random_spec(entry)
    tokenizer = train_tokenizer(entry["arch"], texts, spec["vocab_size"])
    torch.manual_seed(spec["seed"])
    config = model_config(entry["arch"], spec, tokenizer)
    checkpoint = CHECKPOINT_PATTERN.match(entry.get("revision") or "")
    model = language_model(entry["arch"], config) if checkpoint else AutoModel.from_config(config)
    randomise_layer_norms(model, torch.Generator().manual_seed(spec["seed"]))
    if checkpoint:
        train_steps(
            model, tokenizer, entry["arch"], list(texts), int(checkpoint.group(1)), spec["seed"], spec["learning_rate"]
        )
        torch.manual_seed(spec["seed"])  # parts the pretraining model lacks (BERT's pooler) get fixed weights
        trained, model = model, AutoModel.from_config(config)
        model.load_state_dict(trained.base_model.state_dict(), strict=False)
    save_model(model, tokenizer, out_dir)


def save_model(model, tokenizer, out_dir) -> None:
    """``save_pretrained`` both into ``out_dir``, with a SHA256SUMS manifest; ``out_dir`` appears only when complete."""
    with atomic_directory(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
