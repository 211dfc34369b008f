"""Random-init models: deterministic, with LayerNorms that are not the identity."""

import subprocess
import sys

import torch

from ctxvar.models.random_init import randomise_layer_norms, train_tokenizer

SCRIPT = """
import hashlib, json
from ctxvar.corpus.sentences import synthetic_sentences
from ctxvar.models.random_init import train_tokenizer
texts = synthetic_sentences({"n_sentences": 800, "vocab_size": 600, "zipf_exponent": 1.1, "mean_words": 12}, 0)
archs = ("bert", "roberta", "gpt2")
vocabularies = {arch: sorted(train_tokenizer(arch, texts, 300).get_vocab().items()) for arch in archs}
print(json.dumps(vocabularies))
"""


def test_tokenizers_are_identical_across_processes():
    """tokenizers' trainers break ties in hash order, which changes per process: guard against it."""
    processes = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    runs = [process.communicate()[0] for process in processes]  # at once, on the machine's cores
    assert [process.returncode for process in processes] == [0, 0, 0]
    assert runs[0] == runs[1] == runs[2]


def test_wordpiece_vocabulary_has_continuation_pieces(corpus_texts):
    tokenizer = train_tokenizer("bert", corpus_texts, 120)
    tokens = [t for text in corpus_texts[:50] for t in tokenizer.tokenize(text)]
    assert any(t.startswith("##") for t in tokens) and any(not t.startswith("##") and len(t) > 1 for t in tokens)
    assert len(tokenizer) <= 120 + 2 * 40


def test_layer_norms_are_randomised():
    norm = torch.nn.LayerNorm(8)
    randomise_layer_norms(torch.nn.Sequential(norm), torch.Generator().manual_seed(0))
    assert norm.weight.std() > 0.1 and norm.bias.abs().max() > 0
