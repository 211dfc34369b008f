"""Unit tier: the geometry metrics' formulas, the position sample, TwoNN, the Gaussian null model,
checkpoint revisions and the final-norm flag."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import skdim
import torch

from ctxvar.config.entries import checkpoint_families, models_by_id
from ctxvar.errors import ConfigError
from ctxvar.extraction.accumulator import EmbeddingSums, GeometryOptions
from ctxvar.extraction.budget import batch_bytes, state_bytes
from ctxvar.extraction.position_sample import sequence_windows, splitmix64, token_keys
from ctxvar.figures.geometry_plots import cv_by_min_count
from ctxvar.files.atomic import write_json
from ctxvar.models import loading as models
from ctxvar.models.gaussian_null import GaussianNullConfig, GaussianNullModel, occurrence_noise
from ctxvar.models.gaussian_null import splitmix64 as torch_splitmix64
from ctxvar.run.job_log import job_log
from ctxvar.stats.finalize import self_similarity
from ctxvar.stats.geometry import covariance, mean_cosine, rank_metrics, spectrum_metrics
from ctxvar.stats.sample_file import bottom_k
from ctxvar.stats.summary import models_table
from ctxvar.stats.twonn import gaussian_twonn, twonn_dimension


def moments_of(x: np.ndarray):
    return len(x), x.sum(0), x.T @ x


def test_gaussian_null_anisotropy_is_the_marchenko_pastur_edge_and_cosine_is_zero():
    n, d = 40_000, 64
    x = np.random.default_rng(0).standard_normal((n, d))
    metrics = spectrum_metrics(covariance(*moments_of(x)), 3)
    edge = (1 + np.sqrt(d / n)) ** 2 / d
    assert metrics["anisotropy"] == pytest.approx(edge, rel=0.03)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert abs(mean_cosine(n, unit.sum(0))) < 5 / n**0.5 / d**0.5
    assert metrics["isoscore"] > 0.95 and rank_metrics(*moments_of(x))["effective_rank"] > 0.95 * d


def test_spectrum_metrics_of_a_known_covariance():
    c = np.diag([4.0, 2.0, 1.0, 1.0])
    metrics = spectrum_metrics(c, 2)
    assert metrics["anisotropy"] == pytest.approx(0.5) and metrics["explained_2"] == pytest.approx(0.25)
    pr = 8.0**2 / (16 + 4 + 1 + 1)
    assert metrics["participation_ratio"] == pytest.approx(pr) and metrics["isoscore"] == pytest.approx((pr - 1) / 3)
    p = np.array([0.5, 0.25, 0.125, 0.125])
    ranks = rank_metrics(1, np.zeros(4), c)  # N = 1, μ = 0: C = Σxxᵀ
    assert ranks["effective_rank_covariance"] == pytest.approx(np.exp(-(p * np.log(p)).sum()))
    assert spectrum_metrics(np.eye(3), 1)["isoscore"] == pytest.approx(1.0)


def test_self_similarity_is_the_mean_pairwise_cosine_within_a_type():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 5)) + 3
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    pairs = [unit[i] @ unit[j] for i in range(7) for j in range(7) if i != j]
    got = self_similarity(np.array([7, 1]), np.stack([unit.sum(0), unit[0]]))
    assert got[0] == pytest.approx(np.mean(pairs)) and np.isnan(got[1])


def test_bottom_k_of_shard_samples_is_the_bottom_k_of_all():
    keys = token_keys(np.arange(500), np.zeros(500), np.arange(0, 5001, 10), seed=3)
    assert len(np.unique(keys)) == len(keys)
    expected = np.sort(keys)[:50]
    shards = np.array_split(np.random.default_rng(0).permutation(len(keys)), 7)
    union = np.concatenate([shard[bottom_k(keys[shard], 50)] for shard in shards])
    np.testing.assert_array_equal(keys[union[bottom_k(keys[union], 50)]], expected)


def test_keys_depend_on_the_position_only():
    one = token_keys(np.array([4, 9]), np.array([0, 0]), np.array([0, 3, 8]), seed=1)
    alone = token_keys(np.array([9]), np.array([0]), np.array([0, 5]), seed=1)
    np.testing.assert_array_equal(one[3:], alone)
    assert not np.array_equal(token_keys(np.array([9]), np.array([1]), np.array([0, 5]), seed=1), alone)  # window
    assert not np.array_equal(token_keys(np.array([9]), np.array([0]), np.array([0, 5]), seed=2), alone)  # seed
    np.testing.assert_array_equal(sequence_windows(np.array([0, 1, 1, 1, 4, 5, 5])), [0, 0, 1, 2, 0, 0, 1])


def test_torch_splitmix_equals_numpy_bit_for_bit():
    x = np.random.default_rng(0).integers(-(2**63), 2**63 - 1, 100_000, dtype=np.int64)
    np.testing.assert_array_equal(
        torch_splitmix64(torch.from_numpy(x)).numpy().view(np.uint64), splitmix64(x.view(np.uint64))
    )


def test_twonn_equals_scikit_dimension_and_recovers_a_plane():
    rng = np.random.default_rng(2)
    plane = rng.standard_normal((1500, 2)) @ rng.standard_normal((2, 30))
    assert twonn_dimension(plane) == pytest.approx(skdim.id.TwoNN().fit(plane).dimension_, rel=1e-9)
    assert twonn_dimension(plane) == pytest.approx(2, rel=0.1)
    assert gaussian_twonn(2000, 5, seed=0) == pytest.approx(5, rel=0.15)
    assert gaussian_twonn(2000, 200, seed=0) < 100  # biased low in high dimension: why the null is reported


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


@pytest.mark.parametrize(
    "config_cls, model_cls, expected",
    [
        ("GPT2Config", "GPT2Model", True),
        ("BertConfig", "BertModel", False),
        ("GPTNeoXConfig", "GPTNeoXModel", True),
        ("LlamaConfig", "LlamaModel", True),
    ],
)
def test_final_norm_is_recognised(config_cls, model_cls, expected):
    import transformers

    sizes = {
        "num_hidden_layers": 1,
        "hidden_size": 8,
        "num_attention_heads": 2,
        "intermediate_size": 8,
        "n_layer": 1,
        "n_embd": 8,
        "n_head": 2,
    }
    model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**sizes))
    assert models.ends_in_final_norm(model) is expected


def test_second_moments_keep_float64_accuracy_when_the_mean_dwarfs_the_spread():
    # ‖μ‖² = 10⁶ against a spread of 1: an uncentred fp32 product would miss the covariance entirely
    rng = np.random.default_rng(0)
    n, d = 3000, 16
    x = (1000 * rng.standard_normal(d) / np.sqrt(d) + rng.standard_normal((n, d)) * rng.uniform(0.5, 2, d)).astype(
        np.float32
    )
    sums = EmbeddingSums([0], 1, n_types=1, d=d, device=torch.device("cpu"), options=GeometryOptions(covariance=True))
    for batch in np.array_split(np.arange(n), 3):
        sums.accumulate(
            [torch.from_numpy(x[batch])[None]], torch.arange(len(batch)), torch.zeros(len(batch), dtype=torch.int64)
        )
    exact = covariance(*moments_of(x.astype(np.float64)))
    ours = covariance(n, x.astype(np.float64).sum(0), sums.moments.to_numpy()[0])
    np.testing.assert_allclose(ours, exact, atol=1e-6 * np.abs(np.diag(exact)).max())


def test_geometry_state_is_what_the_memory_model_says():
    options = GeometryOptions(covariance=True, cosine=True, sample_size=7)
    sums = EmbeddingSums(
        range(1, 4), 5, n_types=30, d=8, device=torch.device("cpu"), options=options, sample_tokens=np.arange(0, 14, 2)
    )
    tensors = [
        sums.types.count,
        *sums.types.sums.values(),
        *(tensor for _, tensor in sums.layer_sums.values()),
        sums.moments.outer,
        sums.sample.points,
    ]
    assert sum(t.numel() * t.element_size() for t in tensors) == state_bytes(3, 30, 8, options)
    hidden = [torch.randn(2, 10, 8) for _ in range(5)]
    hits = sums.sample.locate(np.arange(20), np.array([0, 20]))[0]
    sums.accumulate(hidden, torch.arange(0, 20), torch.randint(0, 30, (20,)), hits)
    buffers = sums._gather.numel() * 4 + (sums.types._rows.numel() + sums.types._unit.numel()) * 8
    assert buffers + 8 * 2 * 4 == batch_bytes(3, 20, 8, options)  # + a block row of the fp32 Gram (20 rows: one chunk)
    np.testing.assert_array_equal(sums.sample.points[1].numpy(), hidden[2].reshape(-1, 8)[0:14:2].numpy())


def test_revisions_become_model_ids_in_step_order():
    config = {
        "models": [
            {"name": "EleutherAI/pythia-70m", "revisions": ["step1000", "step0", "step143000"]},
            {"id": "tiny", "init": "random", "arch": "gpt2", "revisions": ["step0", "step5"]},
        ]
    }
    models_ = models_by_id(config)
    assert list(models_) == [
        "EleutherAI--pythia-70m@step1000",
        "EleutherAI--pythia-70m@step0",
        "EleutherAI--pythia-70m@step143000",
        "tiny@step0",
        "tiny@step5",
    ]
    assert models_["tiny@step5"]["revision"] == "step5" and models_["tiny@step5"]["step"] == 5
    families = checkpoint_families(models_)
    assert families["EleutherAI--pythia-70m"] == [
        "EleutherAI--pythia-70m@step0",
        "EleutherAI--pythia-70m@step1000",
        "EleutherAI--pythia-70m@step143000",
    ]


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"id": "t", "init": "random", "arch": "gpt2", "revisions": ["main"]}, "must be stepN"),
        ({"id": "g", "init": "gaussian", "revisions": ["step0"]}, "holds one version"),
        ({"name": "gpt2", "revision": "x", "revisions": ["step0"]}, "both revision and revisions"),
    ],
)
def test_bad_revisions_fail_with_one_line(entry, message):
    with pytest.raises(ConfigError, match=message):
        models_by_id({"models": [entry]})


def test_identical_weights_are_flagged_and_logged(tmp_path, caplog):
    runs = {}
    for model, digest in (("p@step0", "aa"), ("p@step1", "bb"), ("p@step2", "bb")):
        runs[model] = tmp_path / f"{model}.json"
        write_json({"weights_sha256": digest}, runs[model])
    with caplog.at_level(logging.WARNING):
        table = models_table(runs, {m: "p" for m in runs})
    assert list(table["same_weights_as"]) == ["", "p@step2", "p@step1"]
    assert "p@step1, p@step2 load identical weights" in caplog.text


def test_job_warnings_reach_the_console_as_one_line(tmp_path, capsys):
    with job_log(tmp_path / "job.log"):
        logging.getLogger("ctxvar.stats.summary").warning("models a, b load identical weights")
        logging.getLogger("ctxvar.stats.summary").info("not for the console")
    assert capsys.readouterr().err == "ctxvar warning: models a, b load identical weights\n"
    assert "not for the console" in (tmp_path / "job.log").read_text()
