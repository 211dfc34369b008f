"""Ethayarajh's measures as his published code computes them, with its sampling made exhaustive.

Written from kawine/contextual at commit c10c992a20d09660bcbac1e84466a3004374317c (Ethayarajh, "How Contextual
are Contextualized Word Representations?", EMNLP 2019), not copied from it:

- preprocess.py ``BertBaseCased.vectorize`` keeps ``[:, 1:-1, :]`` of the hidden states: the [CLS] and [SEP]
  positions are dropped; a sentence's words are its wordpieces as the tokenizer spells them.
- preprocess.py ``index_tokens`` / ``index_sentence``: each word maps to its (sentence, position) occurrences,
  punctuation (spaCy ``is_punct``) left out, words with fewer than ``min_count=5`` occurrences removed.
- analyze.py ``calculate_word_similarity_across_sentences``: per word, the mean of 1 − cosine distance over
  ordered pairs i ≠ j of its occurrences (same-sentence pairs included), at most ``num_samples=1000`` of
  them drawn at random; here every pair (``num_samples=None``). The paper averages over words.
- analyze.py ``explore_embedding_space``: per sampled sentence, the mean over its words of the cosine with
  the mean of its word vectors (then the mean over ``num_samples=1000`` sentences, each rounded to 3
  decimals); here every sentence, unrounded. The baseline draws one random word per sampled sentence and
  averages the cosine of ``num_samples`` random pairs of them; here its expectation over two distinct
  sentences and a uniform word of each, computed over every pair.

``sentences``: per context, ``(words, texts, x)``: the word keys (raw token ids), the strings the punctuation
rule reads, and the hidden states (L, n, d) of its words (boundary tokens already dropped).
"""

from __future__ import annotations

import unicodedata

import numpy as np


def spacy_is_punct(text: str) -> bool:
    """spaCy's lexical attribute ``is_punct`` (spacy/lang/lex_attrs.py): every character in a P* category."""
    return all(unicodedata.category(char).startswith("P") for char in text)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def index_words(sentences, min_count: int = 5) -> dict:
    """word → [(sentence index, position)], punctuation left out, words below ``min_count`` removed."""
    index: dict = {}
    for s, (words, texts, _) in enumerate(sentences):
        for position, (word, text) in enumerate(zip(words, texts)):
            if not spacy_is_punct(text):
                index.setdefault(word, []).append((s, position))
    return {word: places for word, places in index.items() if len(places) >= min_count}


def self_similarity(sentences, layer: int) -> float:
    """Mean over indexed words of the mean cosine over ordered pairs of distinct occurrences."""
    per_word = []
    for places in index_words(sentences).values():
        vectors = np.stack([sentences[s][2][layer, position] for s, position in places])
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        pairs = ~np.eye(len(places), dtype=bool)  # ordered pairs i ≠ j
        per_word.append(np.mean((unit @ unit.T)[pairs]))
    return float(np.mean(per_word))


def intra_sentence_similarity(sentences, layer: int) -> float:
    """Mean over sentences of the mean cosine between each word and the sentence's mean word vector."""
    values = []
    for _, _, x in sentences:
        mean = x[layer].mean(axis=0)
        values.append(np.nanmean([cosine(vector, mean) for vector in x[layer]]))
    return float(np.mean(values))


def anisotropy_baseline(sentences, layer: int) -> float:
    """E[cos(w, w')] for w, w' uniform words of two distinct uniform sentences, over every such pair.

    Each sentence's words against every word at once: the cosines of its words with sentence t's are the columns
    ``starts[t]:starts[t + 1]``, whose mean is E[cos] for that pair of sentences."""
    unit = [x[layer] / np.linalg.norm(x[layer], axis=1, keepdims=True) for _, _, x in sentences]
    every_word = np.concatenate(unit)
    sizes = np.array([len(u) for u in unit])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    total = 0.0
    for s, words in enumerate(unit):
        pair_means = np.add.reduceat((words @ every_word.T).sum(0), starts) / (len(words) * sizes)
        total += pair_means.sum() - pair_means[s]  # t ≠ s
    return float(total / (len(unit) * (len(unit) - 1)))
