"""The cost of geometry.batches: the sample's bytes, its accumulation per token, and its metrics per layer.

    python -m bench sample_batches                       # L = 13, d = 768, k = 4,096, B = 1 and 4 (bert-base)
    python -m bench sample_batches --quick               # d = 64, k = 512: a smoke run
    python -m bench sample_batches --batches 1 2 8 --device cuda

For each B it prints: the device bytes of the B · k float32 points of every layer (``state_bytes`` with the
sample less without) and their bytes in a partial (``ctxvar.run.disk.sums_bytes``, likewise); the seconds per
token that copying the sampled rows adds to ``EmbeddingSums.accumulate`` (synthetic hidden states, one
token-budget batch at a time, against the same sums without a sample); and the seconds per layer of the
sample's metrics (``ctxvar.stats.sample_metrics.twonn_metrics``'s per-batch work on Gaussian points: TwoNN,
the study's variant, anisotropy).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ctxvar.extraction.accumulator import EmbeddingSums, GeometryOptions
from ctxvar.extraction.budget import state_bytes
from ctxvar.models.batching import BATCH_TOKENS
from ctxvar.run.disk import sums_bytes
from ctxvar.run.resources import ModelShape
from ctxvar.stats.sample_metrics import batch_anisotropy, batch_twonn, mean_and_std

from harness import Options

OPTIONS = Options(quick="d = 64, k = 512, 20,000 tokens", device="cpu")  # prints its table: no --out

TYPES = 1000


def accumulate_seconds(n_layers: int, d: int, n_tokens: int, points: int, device: str) -> float:
    """Seconds of EmbeddingSums.accumulate over ``n_tokens`` synthetic tokens with a sample of ``points``."""
    device = torch.device(device)
    rng = np.random.default_rng(0)
    sample = rng.choice(n_tokens, points, replace=False) if points else None
    sums = EmbeddingSums(range(n_layers), n_layers, TYPES, d, device, GeometryOptions(sample_size=points), sample)
    states = [torch.randn(1, BATCH_TOKENS, d, device=device) for _ in range(n_layers)]
    type_index = torch.as_tensor(rng.integers(0, TYPES, BATCH_TOKENS), device=device)
    positions = torch.arange(BATCH_TOKENS, device=device)
    starts = range(0, n_tokens, BATCH_TOKENS)
    hits = (
        sums.sample.locate(np.arange(n_tokens), np.array([*starts, n_tokens])) if sums.sample else [None] * len(starts)
    )
    begin = time.perf_counter()
    for hit in hits:
        sums.accumulate(states, positions, type_index, hit)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - begin


def metrics_seconds(k: int, d: int, batches: int) -> float:
    """Seconds of one layer's per-batch sample metrics for ``batches`` batches of ``k`` Gaussian points."""
    x = np.random.default_rng(1).standard_normal((batches * k, d)).astype(np.float32)
    begin = time.perf_counter()
    rows = [
        {**batch_twonn(x[b * k : (b + 1) * k]), "a": batch_anisotropy(x[b * k : (b + 1) * k])} for b in range(batches)
    ]
    mean_and_std([row["twonn_razzhigaev"] for row in rows])
    return time.perf_counter() - begin


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--layers", type=int, default=13)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--tokens", type=int, default=100_000, help="synthetic tokens accumulated")
    args = parser.parse_args(argv)
    if args.quick:
        args.d, args.k, args.tokens = 64, 512, 20_000
    shape = ModelShape(n_layers=args.layers, d=args.d, vocab_size=30_000)
    geometry = {"covariance": False, "cosine": False, "twonn": True, "ethayarajh": False, "sample_size": args.k}
    bare = accumulate_seconds(args.layers, args.d, args.tokens, 0, args.device)
    print(f"L = {args.layers}, d = {args.d}, k = {args.k}, {args.tokens} tokens on {args.device}")
    print("| B | device MB | partial MB | accumulate s/token (without sample) | metrics s/layer |")
    print("| --- | --- | --- | --- | --- |")
    for batches in args.batches:
        points = batches * args.k
        device_mb = (
            state_bytes(args.layers, TYPES, args.d, GeometryOptions(sample_size=points))
            - state_bytes(args.layers, TYPES, args.d)
        ) / 1e6
        partial_mb = (
            sums_bytes(10**9, shape, {**geometry, "batches": batches})
            - sums_bytes(10**9, shape, {**geometry, "twonn": False})
        ) / 1e6
        seconds = accumulate_seconds(args.layers, args.d, args.tokens, min(points, args.tokens), args.device)
        metrics = metrics_seconds(args.k, args.d, batches)
        print(
            f"| {batches} | {device_mb:.0f} | {partial_mb:.0f} | {seconds / args.tokens:.2e} "
            f"({bare / args.tokens:.2e}) | {metrics:.2f} |"
        )


if __name__ == "__main__":
    main()
