"""The config of the Gaussian null model (:mod:`ctxvar.models.gaussian_null`), apart from its model class: jobs
that read only a null model's tokenizer or config.json (splitting the corpus, choosing Fig. 1's types) then do
not import transformers' modeling code, which takes seconds per job."""

from __future__ import annotations

from transformers import AutoConfig, PretrainedConfig

MODEL_TYPE = "ctxvar-gaussian"


class GaussianNullConfig(PretrainedConfig):
    model_type = MODEL_TYPE

    def __init__(
        self,
        vocab_size: int = 2,
        hidden_size: int = 64,
        noise_scale: float = 1.0,
        layer_norm: bool = True,
        seed: int = 0,
        max_position_embeddings: int = 512,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size, self.hidden_size, self.noise_scale = vocab_size, hidden_size, noise_scale
        self.layer_norm, self.seed, self.max_position_embeddings = layer_norm, seed, max_position_embeddings
        self.num_hidden_layers = 1 if layer_norm else 0  # hidden states: x, then LayerNorm(x)


def register_config() -> None:
    """Make ``AutoConfig`` (and so ``AutoTokenizer``) know the null model's type (idempotent)."""
    AutoConfig.register(MODEL_TYPE, GaussianNullConfig, exist_ok=True)
