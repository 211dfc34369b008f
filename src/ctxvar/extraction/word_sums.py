"""Sums for Ethayarajh's (2019) measures by his rules, on the device in float64: over the sentences' own tokens
(the boundary tokens [bos]/[eos] left out, as his code drops [CLS]/[SEP]), per raw token id (a "word": no
marker merging) and per context (a model input sequence: a corpus sentence, or one window of a split one).

With u = x/‖x‖, for each layer:

    per word w (raw token id):   n_w, Σ_{occurrences} u                      (L, W, d)
    per layer, over contexts s with n_s ≥ 1 inner tokens, m_s = Σ_{i∈s} x_i, ū_s = Σ_{i∈s} u_i / n_s:
        S                        their number, ``n_contexts``
        Σ_s IntraSim(s)          IntraSim(s) = (1/n_s) Σ_{i∈s} cos(x_i, m_s) = (Σ_{i∈s} u_i) · m_s / (n_s ‖m_s‖)
        Σ_s ū_s, Σ_s ‖ū_s‖²      for the mean cosine between words of distinct contexts

A context lies whole in one batch, so its sums are complete when its batch is
added; every part then adds across batches and shards. A zero vector adds 0 to
Σu (never seen in practice), a context whose m_s = 0 adds 0 to Σ IntraSim.
"""

from __future__ import annotations

import numpy as np
import torch

from ctxvar.extraction.host_copy import finite


def word_table(ids: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The shard's words and, per token, its word's index, −1 for the boundary tokens (each sequence's first
    and last). Returns ``(word_ids, word_index)``: ``word_ids`` (W,) the sorted distinct inner ids,
    ``word_index`` (tokens,) int64."""
    inner = np.ones(len(ids), dtype=bool)
    inner[offsets[:-1][offsets[:-1] < len(ids)]] = False
    inner[offsets[1:][offsets[1:] > offsets[:-1]] - 1] = False
    word_ids = np.unique(ids[inner])
    word_index = np.full(len(ids), -1, dtype=np.int64)
    word_index[inner] = np.searchsorted(word_ids, ids[inner])
    return word_ids, word_index


class WordSums:
    """n_w, Σu per (layer i, word w), and the per-layer sentence sums of the module docstring.

    Per batch, :meth:`start_batch` takes its tokens' word indices and rows; per layer,
    :meth:`start_layer`, then :meth:`add` for the float64 rows of each chunk of the
    batch's tokens and their unit rows, then :meth:`end_layer`, which
    turns the batch's per-sentence sums into the layer's sentence sums. Boundary tokens
    are added into a sink row (word W, sentence B) that is never read. Nothing here
    synchronises with the host.
    """

    def __init__(self, n_layers: int, n_words: int, d: int, device: torch.device):
        self.n_layers, self.n_words, self.d = n_layers, n_words, d
        self.count = torch.zeros(n_words + 1, dtype=torch.int64, device=device)  # (W + 1,), the last a sink
        self.sum_unit = torch.zeros(n_layers, n_words + 1, d, dtype=torch.float64, device=device)  # (L, W + 1, d)
        self.n_contexts = torch.zeros((), dtype=torch.int64, device=device)
        self.intra_sum = torch.zeros(n_layers, dtype=torch.float64, device=device)  # (L,)
        self.sum_mean_unit = torch.zeros(n_layers, d, dtype=torch.float64, device=device)  # (L, d)
        self.sum_mean_unit_sq = torch.zeros(n_layers, dtype=torch.float64, device=device)  # (L,)
        self._sentence_sum: torch.Tensor | None = None  # (B + 1, d) per-sentence Σx of the current layer
        self._sentence_sum_unit: torch.Tensor | None = None  # (B + 1, d) per-sentence Σu

    def start_batch(self, word_index: torch.Tensor, row: torch.Tensor, n_rows: int) -> None:
        """``word_index`` (N,): each real token's word, −1 for boundary tokens; ``row`` (N,): its batch row,
        of ``n_rows``."""
        inner = word_index >= 0
        self._word = torch.where(inner, word_index, self.n_words)  # (N,), boundary tokens to the sink
        self._sentence = torch.where(inner, row, n_rows)  # (N,)
        self._n_rows = n_rows
        self._sentence_count = torch.zeros(n_rows + 1, dtype=torch.float64, device=row.device)
        self._sentence_count.index_add_(0, self._sentence, torch.ones(len(row), dtype=torch.float64, device=row.device))
        self.count.index_add_(0, self._word, torch.ones_like(self._word))
        self.n_contexts += (self._sentence_count[:n_rows] > 0).sum()
        if self._sentence_sum is None or self._sentence_sum.shape[0] < n_rows + 1:
            self._sentence_sum = torch.empty(n_rows + 1, self.d, dtype=torch.float64, device=row.device)
            self._sentence_sum_unit = torch.empty_like(self._sentence_sum)

    def release_buffers(self) -> None:
        """Free the batch's buffers (its tokens' words and sentences, the sentence sums); the sums stay."""
        self._sentence_sum = self._sentence_sum_unit = None
        self._word = self._sentence = self._sentence_count = None

    def start_layer(self) -> None:
        self._sentence_sum[: self._n_rows + 1].zero_()
        self._sentence_sum_unit[: self._n_rows + 1].zero_()

    def add(self, layer: int, chunk: slice, rows: torch.Tensor, unit: torch.Tensor):
        """``rows`` (C, d) float64: tokens ``chunk`` of the batch at row block ``layer``; ``unit`` (C, d) their
        x/‖x‖ (:class:`ctxvar.extraction.accumulator.RowChunk` makes them once for every sum)."""
        sentence = self._sentence[chunk]
        self._sentence_sum[: self._n_rows + 1].index_add_(0, sentence, rows)
        self._sentence_sum_unit[: self._n_rows + 1].index_add_(0, sentence, unit)
        self.sum_unit[layer].index_add_(0, self._word[chunk], unit)

    def end_layer(self, layer: int) -> None:
        """Add the batch's sentences (not the sink) to the layer's sentence sums."""
        n = self._n_rows
        count, m, su = self._sentence_count[:n], self._sentence_sum[:n], self._sentence_sum_unit[:n]
        norm = torch.linalg.vector_norm(m, dim=1)
        intra = torch.where((count > 0) & (norm > 0), torch.linalg.vecdot(su, m) / (count.clamp(min=1) * norm), 0.0)
        mean_unit = su / count.clamp(min=1)[:, None]  # zero rows for sentences without inner tokens
        self.intra_sum[layer] += intra.sum()
        self.sum_mean_unit[layer] += mean_unit.sum(0)
        self.sum_mean_unit_sq[layer] += torch.linalg.vecdot(mean_unit, mean_unit).sum()

    def all_finite(self) -> bool:
        return finite(self.sum_unit) and finite(self.intra_sum)

    def to_numpy(self, to_host) -> dict[str, np.ndarray]:
        """``count`` (W,), ``sum_unit`` (L, W, d), ``n_contexts`` (), ``intra_sum`` (L,), ``sum_mean_unit``
        (L, d), ``sum_mean_unit_sq`` (L,) on the host, through ``to_host`` (tensor → array); the sinks dropped."""
        arrays = {name: to_host(getattr(self, name)) for name in SENTENCE_AND_WORD_PARTS}
        arrays["count"], arrays["sum_unit"] = arrays["count"][:-1], arrays["sum_unit"][:, :-1]
        return arrays


SENTENCE_AND_WORD_PARTS = ("count", "sum_unit", "n_contexts", "intra_sum", "sum_mean_unit", "sum_mean_unit_sq")


def word_sums_bytes(n_layers: int, n_words: int, d: int) -> int:
    """Device memory of :class:`WordSums`' state: 8 · (W + 1) · (L · d + 1) + 8 · L · (d + 2)."""
    return 8 * ((n_words + 1) * (n_layers * d + 1) + n_layers * (d + 2))


def word_batch_bytes(n_tokens: int, d: int, unit_rows_counted: bool) -> int:
    """Device memory per batch beyond the state, an upper bound for N tokens (B + 1 ≤ N sentences): two
    (B + 1, d) float64 per-sentence sums, and the (N, d) unit rows unless a declared sum's are counted
    already (``unit_rows_counted``); plus the (N,) word, sentence and count indices."""
    return 8 * d * (2 * n_tokens + (0 if unit_rows_counted else n_tokens)) + 24 * n_tokens
