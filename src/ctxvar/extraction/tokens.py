"""Token types and the paper's input format ``[bos] + tokenizer.tokenize(s) + [eos]``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ctxvar.errors import ModelLoadError

# Word-boundary markers: BERT's continuation prefix, byte-level BPE's space, SentencePiece's space.
MARKERS = ("##", "Ġ", "▁")


def type_key(token: str, merge_markers: bool = True) -> str:
    """A token type's string key: one leading marker stripped (``##ing`` → ``ing``, ``Ġthe`` → ``the``).

    A token that is nothing but a marker keeps its string, so it never becomes ''.
    """
    if merge_markers:
        for marker in MARKERS:
            if token.startswith(marker) and len(token) > len(marker):
                return token[len(marker) :]
    return token


def boundary_tokens(tokenizer) -> tuple[int, int]:
    """Ids of the tokens that wrap every sentence: ([CLS], [SEP]) for BERT, (<s>, </s>) for
    RoBERTa, (<|endoftext|>, <|endoftext|>) for GPT-2: cls/sep where defined, else bos/eos."""
    bos = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if bos is None or eos is None:
        raise ModelLoadError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} defines neither cls/sep nor bos/eos tokens; "
            "the paper's [bos] + s + [eos] format needs them (choose a tokenizer that has them)"
        )
    return bos, eos


@dataclass
class EncodedShard:
    """A shard's sentences as one flat id array.

    ``ids[offsets[i]:offsets[i+1]]`` is sentence ``i``, boundary tokens included.
    """

    ids: np.ndarray  # (total_tokens,) int64
    offsets: np.ndarray  # (n_sentences + 1,) int64

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def encode(tokenizer, texts: list[str], chunk: int = 4096) -> EncodedShard:
    """``[bos] + tokenize(s) + [eos]`` for each text, with no truncation."""
    bos, eos = boundary_tokens(tokenizer)
    content: list[list[int]] = []
    for start in range(0, len(texts), chunk):
        content += tokenizer(texts[start : start + chunk], add_special_tokens=False, truncation=False)["input_ids"]
    inner = np.fromiter(map(len, content), dtype=np.int64, count=len(content))
    offsets = np.zeros(len(content) + 1, dtype=np.int64)
    np.cumsum(inner + 2, out=offsets[1:])
    ids = np.empty(int(offsets[-1]), dtype=np.int64)
    is_inner = np.ones(len(ids), dtype=bool)
    is_inner[offsets[:-1]] = is_inner[offsets[1:] - 1] = False
    ids[offsets[:-1]], ids[offsets[1:] - 1] = bos, eos
    ids[is_inner] = np.fromiter(itertools.chain.from_iterable(content), dtype=np.int64, count=int(inner.sum()))
    return EncodedShard(ids=ids, offsets=offsets)


def type_table(tokenizer, ids: np.ndarray, merge_markers: bool) -> tuple[np.ndarray, np.ndarray]:
    """The shard's token types and, for every id in ``ids``, the index of its type.

    Returns ``(types, type_index)``: ``types`` sorted strings (distinct after marker
    stripping), ``type_index`` int64 like ``ids``. Only ids that occur are looked up.
    """
    present = np.unique(ids)
    keys = np.array(
        [type_key(t, merge_markers) for t in tokenizer.convert_ids_to_tokens(present.tolist())], dtype=object
    )
    types, key_index = np.unique(keys, return_inverse=True)
    return types, key_index[np.searchsorted(present, ids)].astype(np.int64)


def select(encoded: EncodedShard, rows: np.ndarray) -> EncodedShard:
    """The sequences ``rows`` of ``encoded``, in that order."""
    lengths = encoded.lengths[rows]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    source = np.repeat(encoded.offsets[:-1][rows] - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
    return EncodedShard(ids=encoded.ids[source], offsets=offsets)


def split_long(encoded: EncodedShard, limit: int) -> tuple[EncodedShard, np.ndarray]:
    """Split sequences longer than ``limit`` into consecutive windows that fit.

    Each window keeps the sentence's own [bos] and [eos] around at most
    ``limit − 2`` inner tokens, so every window is ``[bos] + piece + [eos]``; no
    token is dropped. Returns the new shard and each new sequence's source row.
    """
    pieces, source = [], []
    for row, (start, end) in enumerate(zip(encoded.offsets[:-1], encoded.offsets[1:])):
        sequence = encoded.ids[start:end]
        if len(sequence) <= limit:
            pieces.append(sequence)
            source.append(row)
            continue
        bos, inner, eos = sequence[:1], sequence[1:-1], sequence[-1:]
        for window in range(0, len(inner), limit - 2):
            pieces.append(np.concatenate([bos, inner[window : window + limit - 2], eos]))
            source.append(row)
    offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    return EncodedShard(ids=ids, offsets=offsets), np.asarray(source, dtype=np.int64)
