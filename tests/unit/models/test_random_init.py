"""Random-init models: deterministic, with LayerNorms that are not the identity."""

import json
import logging
import subprocess
import sys
from pathlib import Path

import torch

from ctxvar.corpus.sources import synthetic_sentences
from ctxvar.models.random_init import build_random_model, randomise_layer_norms, train_tokenizer


def trained_vocabularies() -> str:
    """Each architecture's tokenizer vocabulary trained on a synthetic corpus, as JSON."""
    texts = synthetic_sentences({"n_sentences": 800, "vocab_size": 600, "zipf_exponent": 1.1, "mean_words": 12}, 0)
    archs = ("bert", "roberta", "gpt2")
    return json.dumps({arch: sorted(train_tokenizer(arch, texts, 300).get_vocab().items()) for arch in archs})


SCRIPT = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from {Path(__file__).stem} import trained_vocabularies
print(trained_vocabularies())
"""


def test_tokenizers_are_identical_across_processes():
    """tokenizers' trainers break ties in hash order, which changes per process: guard against it. Three processes
    train: two started for it (at once, on the machine's cores) and this one, whose imports are already paid."""
    processes = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    here = trained_vocabularies()
    runs = [process.communicate()[0].strip() for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    assert runs[0] == runs[1] == here


def test_wordpiece_vocabulary_has_continuation_pieces(corpus_texts):
    tokenizer = train_tokenizer("bert", corpus_texts, 120)
    tokens = [t for text in corpus_texts[:50] for t in tokenizer.tokenize(text)]
    assert any(t.startswith("##") for t in tokens) and any(not t.startswith("##") and len(t) > 1 for t in tokens)
    assert len(tokenizer) <= 120 + 2 * 40


def test_layer_norms_are_randomised():
    norm = torch.nn.LayerNorm(8)
    randomise_layer_norms(torch.nn.Sequential(norm), torch.Generator().manual_seed(0))
    assert norm.weight.std() > 0.1 and norm.bias.abs().max() > 0


def test_training_sends_transformers_remarks_to_the_job_log_not_the_console(tmp_path, corpus_texts, capfd, caplog):
    """A checkpoint of a training sweep (``revision: stepN``): transformers remarks once per process on the loss
    type of a config it did not load (``loss_type=None``); the job log gets it, the console nothing."""
    logging.Logger.warning_once.cache_clear()  # transformers' once-per-process cache: another test may have hit it
    entry = {"id": "t", "arch": "gpt2", "vocab_size": 200, "hidden_size": 16, "num_layers": 1, "num_heads": 2}
    entry |= {"intermediate_size": 32, "max_positions": 128, "seed": 0, "revision": "step2", "learning_rate": 1e-3}
    with caplog.at_level(logging.INFO):
        build_random_model(entry, corpus_texts[:40], tmp_path / "model")
    assert (tmp_path / "model" / "config.json").exists()
    assert "[transformers]" not in capfd.readouterr().err
    assert any("loss_type" in record.getMessage() for record in caplog.records)
