"""The Gaussian null model: per-type means plus isotropic noise, as a transformers model.

Hidden state 0 is x = c + μ_t + σ·ε for an occurrence of type t, with μ_t ~ N(0, s² I_d)
drawn once per type, c a common offset of norm ``offset`` in a random direction,
and ε ~ N(0, I_d) drawn per occurrence. With ``layer_norm``, hidden state 1 is
LayerNorm(x) with random γ ~ U(0.5, 1.5) and β ~ N(0, 0.1²), the setting of the
paper's Appendix I, where C.V. of Q(X_t) = O(1/√min n_t).

ε is a deterministic function of (seed, the sentence's token ids, position)
(SplitMix64 and Box–Muller on the device), so a sentence gets the same vectors
whatever its batch or shard: merged shards equal one shard, as for real models,
and a repeated sentence repeats its vectors, as a real model's would.

It is saved and loaded like any model (``save_pretrained`` / ``AutoModel``), so
it runs through the same rules; the means are its only weights.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import AutoModel, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from ctxvar.config.kinds import gaussian_spec
from ctxvar.models.gaussian_null_config import GaussianNullConfig, register_config
from ctxvar.models.random_init import randomise_layer_norms
from ctxvar.models.tokens import type_key, type_marker


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


GOLDEN, MIX1, MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shift(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 holding uint64 bits."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """:func:`ctxvar.extraction.position_sample.splitmix64` on int64 tensors (two's-complement wrapping), bitwise."""
    z = x + GOLDEN
    z = (z ^ _shift(z, 30)) * MIX1
    z = (z ^ _shift(z, 27)) * MIX2
    return z ^ _shift(z, 31)


def _unit_interval(bits: torch.Tensor) -> torch.Tensor:
    """Uniform in (0, 1) from the top 53 bits."""
    return (_shift(bits, 11).to(torch.float64) + 0.5) * 2.0**-53


def occurrence_noise(input_ids: torch.Tensor, attention_mask: torch.Tensor, d: int, seed: int) -> torch.Tensor:
    """(B, T, d) float64 standard normal values, a function of (seed, the row's real ids, position) only."""
    position = torch.arange(input_ids.shape[1], device=input_ids.device)
    token_hash = splitmix64(input_ids * 1_000_003 + position) * attention_mask
    sentence = splitmix64(token_hash.sum(dim=1) ^ seed)  # (B,); the sum wraps
    key = splitmix64(sentence[:, None] ^ splitmix64(position)[None, :])  # (B, T)
    dims = 2 * torch.arange(d, device=input_ids.device)
    u1 = _unit_interval(splitmix64(key[..., None] ^ dims))
    u2 = _unit_interval(splitmix64(key[..., None] ^ (dims + 1)))
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * torch.pi * u2)


class GaussianNullModel(PreTrainedModel):
    config_class = GaussianNullConfig
    base_model_prefix = "null"
    _supports_sdpa = True
    attention_kind = "none"  # no attention: a position's vector is its type's mean plus its own noise

    def __init__(self, config: GaussianNullConfig):
        super().__init__(config)
        self.means = torch.nn.Embedding(config.vocab_size, config.hidden_size)  # c + μ_t for each id's type
        self.norm = torch.nn.LayerNorm(config.hidden_size) if config.layer_norm else None
        self.post_init()

    @property
    def ends_in_final_norm(self) -> bool:
        return self.norm is not None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_) -> BaseModelOutput:
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        noise = occurrence_noise(input_ids, mask, self.config.hidden_size, self.config.seed)
        x = self.means(input_ids) + (self.config.noise_scale * noise).to(self.means.weight.dtype)
        states = (x,) if self.norm is None else (x, self.norm(x))
        return BaseModelOutput(last_hidden_state=states[-1], hidden_states=states)


def register() -> None:
    """Make ``AutoConfig`` and ``AutoModel.from_pretrained`` know the null model's type (idempotent)."""
    register_config()
    AutoModel.register(GaussianNullConfig, GaussianNullModel, exist_ok=True)


def type_means(type_of_id: np.ndarray, n_types: int, d: int, spec: dict, seed: int) -> np.ndarray:
    """(vocab, d) float32: c + μ_t for each id, ids of one type sharing μ_t."""
    rng = np.random.default_rng(seed)
    offset = rng.standard_normal(d)
    offset *= spec["offset"] / np.linalg.norm(offset)
    mu = spec["mean_scale"] * rng.standard_normal((n_types, d))
    return (offset + mu[type_of_id]).astype(np.float32)


def build_gaussian_model(entry: dict, tokenizer, merge_markers: bool, hidden_size: int, seed: int) -> GaussianNullModel:
    """The null model over ``tokenizer``'s vocabulary, token types keyed as extraction keys them."""
    spec = gaussian_spec(entry)
    marker = type_marker(tokenizer, merge_markers)
    keys = [type_key(token, marker) for token in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))]
    types, type_of_id = np.unique(np.array(keys, dtype=object), return_inverse=True)
    config = GaussianNullConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        noise_scale=spec["noise_scale"],
        layer_norm=spec["layer_norm"],
        seed=seed,
    )
    model = GaussianNullModel(config).eval()
    with torch.no_grad():
        model.means.weight.copy_(torch.from_numpy(type_means(type_of_id, len(types), hidden_size, spec, seed)))
    randomise_layer_norms(model, torch.Generator().manual_seed(seed))
    return model
