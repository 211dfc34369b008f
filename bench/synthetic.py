"""The benchmarks' synthetic inputs, each a deterministic function of its seed: a shard of Zipf-distributed
sentences and random-weight models with a tokenizer trained on them, for the benchmarks that run models, and
Zipf-distributed token types with hidden states for those that time the statistics alone (kernel.py, switches.py)."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from ctxvar.corpus.sources import synthetic_sentences
from ctxvar.files.parquet import write_table

CORPUS = {"vocab_size": 20000, "zipf_exponent": 1.1, "mean_words": 14}
ZIPF_EXPONENT = 1.1  # of the token types drawn by zipf_tokens
MEAN_SENTENCE_TOKENS = 24


def write_corpus(folder: Path, n_sentences: int, seed: int = 0) -> Path:
    """One shard of synthetic sentences (sentence_id, text, n_words, chunk) for every model of the benchmark."""
    texts = synthetic_sentences({"n_sentences": n_sentences, **CORPUS}, seed)
    texts = [t for t in texts if len(t.split(" ")) < 64]
    table = pa.table({"sentence_id": np.arange(len(texts)), "text": texts})
    write_table(table, folder / "sentences.parquet")
    # One chunk: extraction cuts its length-sorted batches over the whole shard, as from a one-shard plan (which
    # also caps a batch at ⌈n/64⌉ sentences: 938 of 60,000, so the batches of the shortest ones differ a little).
    words = pa.array([len(text.split(" ")) for text in texts], pa.int32())
    chunk = pa.array(np.zeros(len(texts), dtype=np.int64))
    write_table(table.append_column("n_words", words).append_column("chunk", chunk), folder / "shard.parquet")
    return folder / "shard.parquet"


@contextlib.contextmanager
def corpus_folder(n_sentences: int):
    """``(folder, shard)``: a temporary folder, gone after the block, holding the shard :func:`write_corpus` writes
    of ``n_sentences`` sentences, beside which :func:`random_model` builds the models that run over it."""
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp), write_corpus(Path(tmp), n_sentences)


def corpus_texts(folder: Path) -> list[str]:
    """The sentences :func:`write_corpus` wrote into ``folder``, in order."""
    return pq.read_table(folder / "sentences.parquet", columns=["text"]).column("text").to_pylist()


def random_model(folder: Path, name: str, **entry) -> Path:
    """``folder / name``: a random-weight model of ``entry`` (an ``init: random`` model entry's ``arch``, sizes and
    seed; a vocabulary of 8,000 unless it says otherwise) with a tokenizer trained on the corpus that
    :func:`write_corpus` wrote into ``folder``."""
    from ctxvar.models.random_init import build_random_model  # transformers' models: not for kernel.py's states

    build_random_model({"id": name, "vocab_size": 8000, **entry}, corpus_texts(folder), folder / name)
    return folder / name


def zipf_tokens(tokens: int, vocabulary: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(type_index, lengths)``: each token's type (0 … U − 1, the types drawn from a Zipf law over
    ``vocabulary`` renumbered in order), and sentence lengths (log-normal) that sum to ``tokens``."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocabulary + 1, dtype=np.float64) ** -ZIPF_EXPONENT
    drawn = rng.choice(vocabulary, size=tokens, p=ranks / ranks.sum())
    used, type_index = np.unique(drawn, return_inverse=True)
    lengths = np.clip(rng.lognormal(np.log(MEAN_SENTENCE_TOKENS), 0.5, tokens // 4).astype(np.int64), 3, 512)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), tokens) + 1]
    lengths[-1] -= lengths.sum() - tokens
    return type_index, lengths[lengths > 0]


def layer_states(type_index: np.ndarray, layers: int, d: int, seed: int = 0):
    """Hidden states of the tokens of ``type_index``, one (tokens, d) float32 tensor per layer at a time: per
    layer, a mean per type (N(0, 4) entries) plus N(0, 1) noise per token."""
    generator = torch.Generator().manual_seed(seed)
    index = torch.from_numpy(type_index)
    for _ in range(layers):
        means = torch.randn(int(type_index.max()) + 1, d, generator=generator) * 2
        yield means[index] + torch.randn(len(type_index), d, generator=generator)
