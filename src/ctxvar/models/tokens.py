"""Token types and the paper's input format ``[bos] + tokenizer.tokenize(s) + [eos]``.

A token type is a token's string less one leading copy of the word-boundary marker its own tokenizer
writes (:func:`word_marker`): WordPiece's continuing-subword prefix (``##ing`` → ``ing``), byte-level
BPE's space ``Ġ`` (``Ġthe`` → ``the``), SentencePiece's ``▁`` (``▁the`` → ``the``). Other tokenizers'
markers stay (byte-level BPE's ``###`` is its own type), as the core paper's code strips ``##`` for
BERT models only and ``Ġ`` for the others. :data:`ctxvar.config.hashes.TYPE_KEY_RULE` names this rule in the
extraction hash: change it with the rule, so that partials keyed by the old one re-extract.
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass
from functools import partial

import numpy as np

from ctxvar.errors import ModelLoadError

log = logging.getLogger(__name__)

BYTE_LEVEL_SPACE = "Ġ"  # the space byte (0x20) as byte-level BPE writes it (GPT-2's bytes_to_unicode)
SENTENCEPIECE_SPACE = "▁"  # SentencePiece's meta symbol for a space (U+2581)


def type_key(token: str, marker: str | None) -> str:
    """A token type's string key: ``token`` less one leading ``marker`` (``##ing`` → ``ing`` for ``##``,
    ``Ġthe`` → ``the`` for ``Ġ``); ``marker`` None keeps every token as it is.

    A token made of nothing but copies of the marker (``Ġ``, ``ĠĠ``, ``##``, ``####``) keeps its
    string: no key is empty, and no two tokens share a key that the rule "strip one leading marker"
    keeps apart (``Ġ`` would otherwise meet ``ĠĠ`` less its marker).
    """
    if marker and token.startswith(marker) and token != marker * (len(token) // len(marker)):
        return token[len(marker) :]
    return token


def type_marker(tokenizer, merge_markers: bool) -> str | None:
    """The marker type keys strip: the tokenizer's own (:func:`word_marker`) with ``tokens.merge_markers``, else
    None."""
    return word_marker(tokenizer) if merge_markers else None


def word_marker(tokenizer) -> str | None:
    """The word-boundary marker ``tokenizer`` writes into its tokens, or None where it writes none.

    Read from the tokenizers backend's JSON (:func:`spec_marker`); a tokenizer without one
    (transformers' Python tokenizers) by its kind (:func:`python_tokenizer_marker`).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    if backend is None:
        return python_tokenizer_marker(tokenizer, name)
    return spec_marker(json.loads(backend.to_str()), name)


def spec_marker(spec: dict, name: str = "tokenizer") -> str | None:
    """The marker a tokenizers JSON ``spec`` names, the most direct first: the model's continuing-subword
    prefix (WordPiece's ``##``), then the decoder's, pre-tokenizer's and normalizer's markers (``ByteLevel``:
    ``Ġ``; ``Metaspace``: its ``replacement``; ``Replace`` between a character and a space: that character).

    None where none names one (a tokenizer that keeps spaces out of its tokens). Where parts name different
    markers, the first is used and a warning names them all.
    """
    found = [prefix for prefix in [(spec.get("model") or {}).get("continuing_subword_prefix")] if prefix]
    for part in ("decoder", "pre_tokenizer", "normalizer"):
        found += [marker for component in components(spec.get(part)) if (marker := component_marker(component, part))]
    markers = list(dict.fromkeys(found))
    if not markers:
        log.info("%s: its tokenizer writes no word-boundary marker; token types strip none", name)
        return None
    if len(markers) > 1:
        log.warning(
            "%s: its tokenizer names several word-boundary markers (%s); token types strip %r, the first",
            name,
            ", ".join(map(repr, markers)),
            markers[0],
        )
    return markers[0]


def components(part: dict | None) -> list[dict]:
    """A tokenizers pipeline part (decoder, pre-tokenizer, normalizer) as its components, sequences flattened."""
    if not part:
        return []
    nested = part.get("decoders") or part.get("pretokenizers") or part.get("normalizers")
    if part.get("type") == "Sequence" and nested is not None:
        return [leaf for child in nested for leaf in components(child)]
    return [part]


def component_marker(component: dict, role: str) -> str | None:
    """The word-boundary marker one tokenizers component writes (``role`` pre_tokenizer, normalizer) or reads
    back (decoder), or None."""
    kind = component.get("type")
    if kind == "ByteLevel":
        return BYTE_LEVEL_SPACE
    if kind == "Metaspace":
        return component.get("replacement") or SENTENCEPIECE_SPACE
    if kind == "WordPiece" and role == "decoder":
        return component.get("prefix") or None
    if kind == "Replace":
        pattern = (component.get("pattern") or {}).get("String")
        space, other = (component.get("content"), pattern) if role == "decoder" else (pattern, component.get("content"))
        return other if space == " " and other and other != " " else None
    return None


def python_tokenizer_marker(tokenizer, name: str) -> str | None:
    """The marker of a tokenizer without a tokenizers backend, by its kind: SentencePiece (``sp_model``):
    ``▁``; byte-level BPE (``byte_encoder``): the space byte's character; WordPiece (``wordpiece_tokenizer``):
    ``##``. Any other strips none, with a warning."""
    if getattr(tokenizer, "sp_model", None) is not None:
        return SENTENCEPIECE_SPACE
    byte_encoder = getattr(tokenizer, "byte_encoder", None)
    if byte_encoder:
        return byte_encoder[ord(" ")]
    if getattr(tokenizer, "wordpiece_tokenizer", None) is not None:
        return "##"
    log.warning(
        "%s: %s has no tokenizers backend and no known word-boundary marker; token types strip none "
        "(load its fast tokenizer to merge ##ing/Ġing/▁ing with ing)",
        name,
        type(tokenizer).__name__,
    )
    return None


def tokenizer_identity(tokenizer, sha256: str) -> dict:
    """What decides the ids a tokenizer gives a text: its definition (``sha256``, of
    :func:`ctxvar.models.hashing.tokenizer_sha256`), its class, and the transformers and tokenizers that run it.
    Token ids stored with one identity (the shards' ``ids``) are taken only by a tokenizer of the same."""
    import tokenizers
    import transformers

    return {
        "sha256": sha256,
        "class": type(tokenizer).__name__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


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
    """``[bos] + tokenize(s) + [eos]`` for each text, with no truncation: ``tokenizer(texts, add_special_tokens=False,
    truncation=False)``, in chunks of ``chunk`` texts. The chunks after the first go straight to the Rust tokenizer
    behind a fast one (:func:`rust_encoder`) where it gives the first chunk's ids exactly (no Python objects per
    text)."""
    bos, eos = boundary_tokens(tokenizer)
    first = list(texts[:chunk])
    content = called_ids(tokenizer, first) if first else []
    fast = rust_encoder(tokenizer, first, content) if len(texts) > chunk else None
    encode_chunk = fast or partial(called_ids, tokenizer)
    for start in range(chunk, len(texts), chunk):
        content += encode_chunk(texts[start : start + chunk])
    inner = np.fromiter(map(len, content), dtype=np.int64, count=len(content))
    offsets = np.zeros(len(content) + 1, dtype=np.int64)
    np.cumsum(inner + 2, out=offsets[1:])
    ids = np.empty(int(offsets[-1]), dtype=np.int64)
    is_inner = np.ones(len(ids), dtype=bool)
    is_inner[offsets[:-1]] = is_inner[offsets[1:] - 1] = False
    ids[offsets[:-1]], ids[offsets[1:] - 1] = bos, eos
    ids[is_inner] = np.fromiter(itertools.chain.from_iterable(content), dtype=np.int64, count=int(inner.sum()))
    return EncodedShard(ids=ids, offsets=offsets)


def called_ids(tokenizer, texts) -> list[list[int]]:
    """Each text's ids as transformers' call gives them, with no special tokens and no truncation."""
    return tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]


def rust_encoder(tokenizer, sample: list[str], expected: list[list[int]]):
    """A function of texts to their ids, as ``tokenizer(texts, add_special_tokens=False, truncation=False)`` gives
    them, that calls the Rust tokenizer behind a fast ``tokenizer`` itself (``encode_batch_fast``: no offsets, no
    Python objects per token) in the state such a call leaves it in: no truncation, no padding, special tokens
    split as the tokenizer splits them (a text in another state goes through the call). No copy: a copy of a Rust
    tokenizer can resolve ties (two added tokens that normalize alike, two strings of one id) otherwise. None where
    there is no Rust tokenizer, or where it does not give ``expected``, the call's ids, for ``sample``, which the
    call has just tokenized: a tokenizer class that does more than the Rust tokenizer in its call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "encode_batch_fast"):
        return None
    split = bool(getattr(tokenizer, "split_special_tokens", False))

    def ids(texts: list[str]) -> list[list[int]]:
        as_called = backend.truncation is None and backend.padding is None
        if not as_called or bool(getattr(backend, "encode_special_tokens", False)) != split:
            return called_ids(tokenizer, texts)
        return [encoding.ids for encoding in backend.encode_batch_fast(list(texts), add_special_tokens=False)]

    if ids(sample) != expected:
        log.info("the Rust tokenizer alone gives other ids than %s's call: it is not used", type(tokenizer).__name__)
        return None
    return ids


def type_table(tokenizer, ids: np.ndarray, marker: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The shard's token types and, for every id in ``ids``, the index of its type.

    Returns ``(types, type_index)``: ``types`` sorted strings (distinct after ``marker``
    stripping, see :func:`type_key`), ``type_index`` int64 like ``ids``. Only ids that occur are looked up.
    """
    present = np.unique(ids)
    keys = np.array([type_key(t, marker) for t in tokenizer.convert_ids_to_tokens(present.tolist())], dtype=object)
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
