"""The Gaussian null model's config (ctxvar.models.gaussian_null_config): one hidden state past the embeddings when it
has a LayerNorm, none without; its values saved and read back through ``AutoConfig`` once its type is registered,
which may be done again."""

from __future__ import annotations

from transformers import AutoConfig

from ctxvar.models.gaussian_null_config import MODEL_TYPE, GaussianNullConfig, register_config


def test_the_layer_norm_is_the_models_one_layer():
    assert GaussianNullConfig(layer_norm=True).num_hidden_layers == 1
    assert GaussianNullConfig(layer_norm=False).num_hidden_layers == 0


def test_a_saved_config_reads_back_through_autoconfig(tmp_path):
    register_config()
    register_config()  # idempotent: every job that reads a null model's config registers it
    GaussianNullConfig(vocab_size=120, hidden_size=24, noise_scale=0.5, layer_norm=False, seed=9).save_pretrained(
        tmp_path
    )
    config = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(config, GaussianNullConfig) and config.model_type == MODEL_TYPE
    assert (config.vocab_size, config.hidden_size, config.noise_scale) == (120, 24, 0.5)
    assert (config.layer_norm, config.seed, config.num_hidden_layers) == (False, 9, 0)
    assert config.max_position_embeddings == 512
