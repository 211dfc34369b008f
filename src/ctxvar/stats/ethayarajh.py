"""Ethayarajh's (2019) measures of a layer, from its word and sentence sums (geometry.ethayarajh).

His measures (:func:`ethayarajh_metrics`), over the sentences' own tokens
(boundary tokens left out), words = raw token ids, exact over all occurrences:

    ethayarajh_self_similarity     unweighted mean over words w with n_w ≥ 5 that are not punctuation of
                                   (‖Σu_w‖² − n_w) / (n_w (n_w − 1))
    ethayarajh_intra_sentence_similarity   (1/S) Σ_s (1/n_s) Σ_{i∈s} cos(x_i, Σ_{j∈s} x_j)
    ethayarajh_anisotropy_baseline         mean over ordered pairs of distinct contexts s ≠ t of the mean
                                   cosine between a word of s and a word of t: (‖Σ_s ū_s‖² − Σ_s ‖ū_s‖²) / (S(S − 1))
    *_adjusted                     the two similarities minus the baseline

They are columns of ``geometry.csv`` (:func:`ctxvar.stats.geometry.geometry_table`).
"""

from __future__ import annotations

import unicodedata

import numpy as np

from ctxvar.models.tokens import type_key
from ctxvar.stats.finalize import self_similarity
from ctxvar.stats.word_files import LayerSentences, LayerWords

ETHAYARAJH_MIN_COUNT = 5  # his index_sentence(min_count=5): words with fewer occurrences are left out
ETHAYARAJH_COLUMNS = [
    "ethayarajh_n_words",
    "ethayarajh_self_similarity",
    "ethayarajh_intra_sentence_similarity",
    "ethayarajh_anisotropy_baseline",
    "ethayarajh_self_similarity_adjusted",
    "ethayarajh_intra_sentence_similarity_adjusted",
]


def is_punctuation(token: str, marker: str | None) -> bool:
    """spaCy's ``is_punct`` (every character in a Unicode P* category), which Ethayarajh's index applies to each
    word, here on the token with the tokenizer's word-boundary ``marker`` stripped (his GPT-2 words carry none)."""
    return all(unicodedata.category(char).startswith("P") for char in type_key(token, marker))


def ethayarajh_words(words: LayerWords, marker: str | None) -> np.ndarray:
    """Which words his self-similarity averages over: n_w ≥ ETHAYARAJH_MIN_COUNT, not punctuation."""
    punctuation = np.fromiter((is_punctuation(t, marker) for t in words.tokens), dtype=bool, count=len(words.tokens))
    return (words.count >= ETHAYARAJH_MIN_COUNT) & ~punctuation


def anisotropy_baseline(sentences: LayerSentences) -> float:
    """Mean over ordered pairs of distinct contexts of ū_s · ū_t, from Σ ū_s and Σ ‖ū_s‖²."""
    s = sentences.n_contexts
    total = sentences.sum_mean_unit
    return float((total @ total - sentences.sum_mean_unit_sq) / (s * (s - 1))) if s > 1 else np.nan


def ethayarajh_metrics(words: LayerWords, sentences: LayerSentences, marker: str | None) -> dict:
    """Ethayarajh's self-similarity, intra-sentence similarity and anisotropy baseline of one layer, with the
    two similarities less the baseline (see the module docstring); ``marker``: the tokenizer's word-boundary
    marker (the sums' ``type_marker``)."""
    keep = ethayarajh_words(words, marker)
    self_sim = float(np.mean(self_similarity(words.count[keep], words.sum_unit[keep]))) if keep.any() else np.nan
    intra = sentences.intra_sum / sentences.n_contexts if sentences.n_contexts else np.nan
    baseline = anisotropy_baseline(sentences)
    return {
        "ethayarajh_n_words": int(keep.sum()),
        "ethayarajh_self_similarity": self_sim,
        "ethayarajh_intra_sentence_similarity": float(intra),
        "ethayarajh_anisotropy_baseline": baseline,
        "ethayarajh_self_similarity_adjusted": self_sim - baseline,
        "ethayarajh_intra_sentence_similarity_adjusted": float(intra) - baseline,
    }
