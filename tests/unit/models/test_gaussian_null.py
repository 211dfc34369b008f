"""The Gaussian null model (ctxvar.models.gaussian_null): its noise depends on the sentence and not on its batch, its
torch SplitMix64 equals numpy's bit for bit, and with LayerNorm the C.V. of Q shrinks like 1/√n_min (Appendix I)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ctxvar.extraction.position_sample import splitmix64
from ctxvar.figures.geometry_plots import cv_by_min_count
from ctxvar.models import loading as models
from ctxvar.models.gaussian_null import GaussianNullConfig, GaussianNullModel, occurrence_noise
from ctxvar.models.gaussian_null import splitmix64 as torch_splitmix64


def test_torch_splitmix_equals_numpy_bit_for_bit():
    x = np.random.default_rng(0).integers(-(2**63), 2**63 - 1, 100_000, dtype=np.int64)
    np.testing.assert_array_equal(
        torch_splitmix64(torch.from_numpy(x)).numpy().view(np.uint64), splitmix64(x.view(np.uint64))
    )


def null_model(layer_norm=True, seed=0, d=16):
    model = GaussianNullModel(GaussianNullConfig(vocab_size=50, hidden_size=d, layer_norm=layer_norm, seed=seed)).eval()
    torch.nn.init.normal_(model.means.weight)
    return model


def test_null_model_noise_depends_on_the_sentence_not_its_batch():
    model = null_model()
    a, b = torch.tensor([[1, 5, 7, 2]]), torch.tensor([[1, 9, 2, 0]])
    batch = torch.cat([a, b]), torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    together = model(input_ids=batch[0], attention_mask=batch[1]).hidden_states
    alone = model(input_ids=a, attention_mask=torch.ones_like(a)).hidden_states
    for layer in range(2):
        torch.testing.assert_close(together[layer][0], alone[layer][0], rtol=0, atol=0)
    noise = occurrence_noise(torch.arange(4000).reshape(1, -1) % 50, torch.ones(1, 4000, dtype=torch.int64), 16, 0)
    assert abs(float(noise.mean())) < 0.01 and float(noise.std()) == pytest.approx(1, rel=0.01)
    assert models.ends_in_final_norm(model) and not models.ends_in_final_norm(null_model(layer_norm=False))
    assert len(null_model(layer_norm=False)(input_ids=a).hidden_states) == 1


def test_layer_norm_null_cv_of_q_shrinks_like_one_over_root_n_min():
    """Appendix I: Q of LayerNorm outputs of noise around a per-type mean of zero has C.V. ∝ 1/√n_min."""
    rng = np.random.default_rng(0)
    counts = np.unique(np.ceil(10 ** rng.uniform(1, 4, 300)).astype(int))
    model = null_model(d=64)
    q = []
    for t, n in enumerate(counts):
        x = torch.from_numpy(rng.standard_normal((n, 64)))
        with torch.no_grad():
            q.append(float((model.norm(x.float()).double() ** 2).sum(1).mean()))
    frame = pd.DataFrame({"layer": 0, "token": counts.astype(str), "n": counts, "Q": q, "M": 0.0, "V": 0.0})
    table = cv_by_min_count(FrameStats(frame), {"min_log10_n": 1, "max_log10_n": 5})
    slope = np.polyfit(np.log10(table["n_min"]), np.log10(table["cv_Q"]), 1)[0]
    assert -0.7 < slope < -0.3


class FrameStats:
    """TokenStats over an in-memory frame."""

    def __init__(self, frame):
        self.frame, self.n_layers = frame, 1

    def layer(self, layer):
        return self.frame
