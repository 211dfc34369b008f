"""The sums a job accumulates (ctxvar.extraction.accumulator): per-type sums over many chunks are those of the kept
rows, column sums over chunks are float64's, second moments keep float64 accuracy when the mean dwarfs the spread, and
Σxxᵀ of bf16 and fp16 models as the split bf16 product (``SecondMoments(split=True)``) stays within the bound that
docs/numerics.md states, on activations with massive outliers, against float64 of the same bf16 inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctxvar.extraction import accumulator
from ctxvar.extraction.accumulator import (
    CPU_CHUNK_ROWS,
    SPLIT_CHUNK_ROWS,
    EmbeddingSums,
    GeometryOptions,
    SecondMoments,
    column_sums,
    splits_gram,
)
from ctxvar.extraction.budget import batch_bytes
from ctxvar.stats.geometry import covariance

from support.oracle import moments_of, sums_of
from support.workflow_runs import REPO

ROUND_TO_NEAREST_BOUND = 2e-5  # fp32 accumulation to nearest (a CPU's): the loᵀlo left out, ≲ 1.54e-5, and rounding
TENSOR_CORE_BOUND = 1e-4  # fp32 accumulation that truncates every addition (the pessimistic tensor-core model)
UNCENTRED_MISS = 2e-4  # one uncentred bf16 product, fp32 accumulation to nearest, misses by more than this
BATCHES = (6000, 3000)  # rows: one batch of two chunks, one of one
D = 64
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def outlier_batches(seed: int = 0) -> list[torch.Tensor]:
    """bf16 rows of a decoder's kind: coordinates spread 0.1 to 10 about means of ~1, three massive coordinates
    (±1,500–3,000, spread 30) and, first in every batch, a sentence-start row of norm ~10⁴."""
    generator = torch.Generator().manual_seed(seed)
    rows = sum(BATCHES)
    scale = torch.logspace(-1, 1, D, dtype=torch.float64)
    x = torch.randn(rows, D, generator=generator, dtype=torch.float64) * scale
    x += torch.randn(D, generator=generator, dtype=torch.float64)
    massive = torch.tensor([2000.0, -1500.0, 3000.0], dtype=torch.float64)
    x[:, :3] = massive + 30 * torch.randn(rows, 3, generator=generator, dtype=torch.float64)
    batches = list(x.bfloat16().split(BATCHES))
    for batch in batches:
        batch[0, 3:7] = torch.tensor([7000.0, -5000.0, 4000.0, -3000.0])
    return batches


def worst_element_error(outer: np.ndarray, batches: list[torch.Tensor]) -> float:
    """max over (i, j) of |Ĉ_ij − C_ij| / √(C_ii C_jj), with Ĉ the covariance from Σx and ``outer`` (Σxxᵀ), C
    the float64 covariance of the same bf16 rows: each element's error in units of its two coordinates' spread."""
    rows = torch.cat(batches).double().numpy()
    exact = covariance(len(rows), rows.sum(0), rows.T @ rows)
    spread = np.sqrt(np.diag(exact))
    return float((np.abs(covariance(len(rows), rows.sum(0), outer) - exact) / np.outer(spread, spread)).max())


def second_moments(batches: list[torch.Tensor], split: bool, device: str = "cpu") -> np.ndarray:
    moments = SecondMoments(1, D, torch.device(device), split)
    for batch in batches:
        moments.add(0, batch.to(device).clone())
    return moments.to_numpy()[0]


def truncating_product(left: torch.Tensor, right: torch.Tensor, step: int = 16) -> torch.Tensor:
    """leftᵀ right under a pessimistic model of tensor cores: exact products, summed ``step`` rows at a time into
    an fp32 accumulator that rounds every addition toward zero."""
    a, b = left.double().cpu().numpy(), right.double().cpu().numpy()
    total = np.zeros((a.shape[1], b.shape[1]), dtype=np.float32)
    for start in range(0, a.shape[0], step):
        exact = total + a[start : start + step].T @ b[start : start + step]
        total = exact.astype(np.float32)
        rounded_up = np.abs(total) > np.abs(exact)
        total[rounded_up] = np.nextafter(total[rounded_up], np.float32(0))
    return torch.from_numpy(total).to(left.device)


@pytest.mark.parametrize("device", DEVICES)
def test_the_split_product_is_within_the_bound_on_massive_outliers(device):
    """Round-to-nearest accumulation (a CPU's model; on a GPU its tensor cores): within the stated bound, as the
    fp32 product is."""
    batches = outlier_batches()
    bound = ROUND_TO_NEAREST_BOUND if device == "cpu" else TENSOR_CORE_BOUND
    assert worst_element_error(second_moments(batches, split=True, device=device), batches) < bound
    assert worst_element_error(second_moments(batches, split=False), batches) < ROUND_TO_NEAREST_BOUND


def test_the_split_product_is_within_the_bound_under_truncating_accumulation(monkeypatch):
    batches = outlier_batches()
    monkeypatch.setattr(accumulator, "bf16_product", truncating_product)
    error = worst_element_error(second_moments(batches, split=True), batches)
    assert ROUND_TO_NEAREST_BOUND < error < TENSOR_CORE_BOUND  # truncation costs more, within its own bound


def test_one_uncentred_bf16_product_misses_the_bound():
    """What centring and splitting buy: the same data through one bf16 product of the raw rows (exact products,
    fp32 accumulation to nearest) is off by more than UNCENTRED_MISS, ten times the bound of the split product."""
    batches = outlier_batches()
    outer = sum((batch.float().T @ batch.float()).double() for batch in batches).numpy()
    assert worst_element_error(outer, batches) > UNCENTRED_MISS


def test_no_fp32_product_accumulates_more_than_a_chunk(monkeypatch):
    """Every fp32 accumulation spans at most SPLIT_CHUNK_ROWS rows (3 products each) before it goes into float64."""
    spans, product = [], accumulator.bf16_product

    def recorded(left, right):
        spans.append(left.shape[0])
        return product(left, right)

    monkeypatch.setattr(accumulator, "bf16_product", recorded)
    second_moments(outlier_batches(), split=True)
    blocks = -(-D // accumulator.gram_block(D))
    chunk_spans = [3 * SPLIT_CHUNK_ROWS, 3 * (BATCHES[0] - SPLIT_CHUNK_ROWS), 3 * BATCHES[1]]
    assert spans == [span for span in chunk_spans for _ in range(blocks)]


def test_shards_merge_to_the_sums_of_one_in_float64():
    """The same batch gives bitwise the same sums wherever it is added; shards merged differ from one pass only
    by the float64 additions' order."""
    batches = outlier_batches()
    whole = second_moments(batches, split=True)
    shards = [second_moments([batch], split=True) for batch in batches]
    np.testing.assert_array_equal(shards[1], second_moments(batches[1:], split=True))
    np.testing.assert_allclose(sum(shards), whole, rtol=1e-14, atol=1e-14 * np.abs(whole).max())


def test_half_models_on_cuda_split_and_everything_else_keeps_fp32():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert splits_gram(torch.bfloat16, cuda) and splits_gram(torch.float16, cuda)
    assert not splits_gram(torch.float32, cuda)
    assert not any(splits_gram(dtype, cpu) for dtype in (torch.bfloat16, torch.float16, torch.float32))
    options = GeometryOptions(covariance=True)
    assert not EmbeddingSums([0], 1, 1, D, cpu, options).moments.split  # default: the fp32 product
    assert not EmbeddingSums([0], 1, 1, D, cpu, options, forward_dtype=torch.bfloat16).moments.split


def test_the_budget_counts_the_split_buffers():
    moments = SecondMoments(1, 8, torch.device("cpu"), split=True)
    moments.add(0, torch.randn(SPLIT_CHUNK_ROWS + 5, 8).bfloat16())
    buffers = moments._parts.numel() * 2 + moments._centred.numel() * 4
    options = GeometryOptions(covariance=True)
    for tokens in (SPLIT_CHUNK_ROWS + 5, 2 * SPLIT_CHUNK_ROWS):
        assert batch_bytes(3, tokens, 8, options, split=True) - batch_bytes(3, tokens, 8, options) == buffers


def test_numerics_doc_states_the_bounds_this_file_checks():
    text = " ".join((REPO / "docs" / "numerics.md").read_text().split())
    for claim in (
        "below 2·10⁻⁵ of √(C_ii·C_jj)",
        "below 10⁻⁴ under a model of tensor cores",
        "more than 2·10⁻⁴",
        f"every {SPLIT_CHUNK_ROWS:,} rows",
        f"≈ {(1 + 2**-8) ** 2 * 2**-16 * 1e5:.2f}·10⁻⁵",  # the loᵀlo bound: |lo| ≤ (1 + u)·u·|y|, u = 2⁻⁸
    ):
        assert claim in text, claim
    assert (ROUND_TO_NEAREST_BOUND, TENSOR_CORE_BOUND, UNCENTRED_MISS) == (2e-5, 1e-4, 2e-4)


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


@pytest.mark.parametrize(
    "options",
    [GeometryOptions(), GeometryOptions(covariance=True, cosine=True, sample_size=5)],
    ids=["chunks gathered one by one", "one gather for the Gram matrix"],
)
def test_type_sums_over_many_chunks_are_those_of_the_kept_rows(options):
    # more real tokens than CPU_CHUNK_ROWS, scattered among padding: every chunk must gather its own positions
    rng = np.random.default_rng(1)
    n_hidden, d, n_types = 3, 8, 50
    hidden = [torch.randn(5, 200, d) for _ in range(n_hidden)]
    positions = np.sort(rng.choice(1000, size=2 * CPU_CHUNK_ROWS + 77, replace=False))
    labels = rng.integers(0, n_types, size=len(positions))
    sample_tokens = np.array([0, 3, 100, 300, len(positions) - 1]) if options.sample_size else None
    sums = EmbeddingSums(range(1, 3), n_hidden, n_types, d, torch.device("cpu"), options, sample_tokens)
    hits = sums.sample.locate(np.arange(len(positions)), np.array([0, len(positions)]))[0] if sums.sample else None
    sums.accumulate(hidden, torch.from_numpy(positions), torch.from_numpy(labels), hits)
    arrays = sums.types.to_numpy()
    for i, layer in enumerate((1, 2)):
        kept = hidden[layer].reshape(-1, d).numpy().astype(np.float64)[positions]
        count, sum_, sum_sq = sums_of(kept, labels)
        np.testing.assert_array_equal(arrays["count"], count)
        np.testing.assert_allclose(arrays["sum"][i], sum_, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(arrays["sum_sq"][i], sum_sq, rtol=1e-12)
        if options.sample_size:
            np.testing.assert_array_equal(sums.sample.to_numpy()[i], kept[sample_tokens].astype(np.float32))


def test_column_sums_over_chunks_are_the_float64_sums():
    x = (1e4 + np.random.default_rng(2).standard_normal((3 * CPU_CHUNK_ROWS + 5, 7))).astype(np.float32)
    ours = column_sums(torch.from_numpy(x))
    assert ours.dtype == torch.float64
    np.testing.assert_allclose(ours.numpy(), x.astype(np.float64).sum(0), rtol=1e-15)
