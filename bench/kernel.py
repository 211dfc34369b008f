"""The statistics kernel alone: from hidden states already in memory to the per-type Q, M, V of every layer.

    python -m bench kernel                     # 200,000 tokens × 13 layers × 768 (8 GB of float32 states)
    python -m bench kernel --quick             # 20,000 tokens, 4 layers, d = 128, 5,000 types, one round: a smoke run
    python -m bench kernel --device cuda       # the same on a GPU

On a CPU the forward pass dominates a whole job, so job timings cannot show the statistics' own cost.
Here every approach starts from the same hidden states (a deterministic function of the seed, built
before the clock starts, in a fresh process each):

    (i)   ctxvar      EmbeddingSums.accumulate over token-budget batches (float64 scatter-add on the
                      device), then finalize per layer: what an extraction job runs after each forward
    (ii)  reference   the reference code's loop (Yamagiwa & Shimodaira, save_token_stats.py, as
                      bench/steps.py re-implements it): per layer, sentence and token, a running mean
                      in a dict keyed by the token string
    (iii) groupby     what a user might write with pandas: per layer, DataFrame(x).groupby(type).mean()
                      and the mean of ‖x‖² per type, in float64

    (i)+g ctxvar with the workflow's default geometry sums as well (Σxxᵀ, Σ x/‖x‖, a 4,096-point sample):
                      the geometry's own cost per token, apart from the forward pass and file writing

For (i) and (i)+g the report splits the seconds into allocating the zeroed sums, adding the batches and
finalizing, with the system time and page faults of the whole: on a VM, first-touch page faults of the
1.4 GB of sums are a large and variable part.

A round runs (i), (ii), (iii) and (i)+g one after the other, so each ratio comes from one round, side by
side; the report gives the median of the rounds and their range. All must agree on Q, M and V.
"""

from __future__ import annotations

import functools
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ctxvar.extraction.accumulator import EmbeddingSums, GeometryOptions
from ctxvar.models.batching import BATCH_TOKENS
from ctxvar.stats.finalize import finalize

from harness import SPREAD, Options, command, in_fresh_process, markdown, spread, write_results
from steps import running_mean_update
from synthetic import ZIPF_EXPONENT, layer_states, zipf_tokens

OPTIONS = Options(
    out="kernel.md and kernel.csv",
    quick="20,000 tokens, 4 layers, d = 128, 5,000 types, one round",
    device="cpu",
    rounds="every approach",
)
SHAPES = {
    "paper": {"tokens": 200_000, "layers": 13, "d": 768, "vocabulary": 30_000},
    "quick": {"tokens": 20_000, "layers": 4, "d": 128, "vocabulary": 5_000},  # checks the script
}
PHASES = ("allocate", "add", "finalize")  # of (i): EmbeddingSums' zeroed sums, the batches' additions, Q/M/V
APPROACHES = ("(i) ctxvar", "(ii) reference loop", "(iii) pandas groupby", "(i)+g ctxvar with geometry")
DEFAULT_GEOMETRY = GeometryOptions(covariance=True, cosine=True, sample_size=4096)  # config.schema.yaml defaults


def hidden_states(tokens: int, layers: int, d: int, vocabulary: int, seed: int = 0):
    """``(X, type_index, lengths)``: X (layers, tokens, d) float32 with a per-type mean plus noise, the type of
    each token drawn from a Zipf law over ``vocabulary``, and sentence lengths (log-normal) that cover them."""
    type_index, lengths = zipf_tokens(tokens, vocabulary, seed)
    X = torch.empty(layers, tokens, d)
    for layer, states in enumerate(layer_states(type_index, layers, d, seed)):
        X[layer] = states
    return X, type_index, lengths


def ctxvar_kernel(
    X: torch.Tensor,
    type_index: np.ndarray,
    lengths: np.ndarray,
    device: str,
    geometry: bool = False,
    phases: dict[str, float] | None = None,
) -> pd.DataFrame:
    """(i) Consecutive whole sentences up to BATCH_TOKENS real tokens per batch (states in memory need no
    padding, so unlike extraction the sentences are not sorted by length), each batch added to the float64
    sums on the device; then per-layer finalize. With ``geometry``, the default geometry sums too.
    ``phases`` receives the seconds of each PHASES entry."""
    n_layers, n_tokens, d = X.shape
    n_types = int(type_index.max()) + 1
    options = DEFAULT_GEOMETRY if geometry else GeometryOptions()
    sample = np.random.default_rng(0).choice(n_tokens, options.sample_size, replace=False) if geometry else None
    clock = PhaseClock(device, phases)
    sums = EmbeddingSums(range(n_layers), n_layers, n_types, d, torch.device(device), options, sample)
    clock.lap("allocate")
    types = torch.from_numpy(type_index).to(device)
    ends = np.cumsum(lengths)
    start = 0
    while start < X.shape[1]:
        stop = int(ends[np.searchsorted(ends, start + BATCH_TOKENS, side="right") - 1])
        stop = stop if stop > start else int(ends[np.searchsorted(ends, start, side="right")])
        batch = X[:, start:stop].to(device, non_blocking=True)  # what the forward pass leaves on the device
        sums.accumulate(
            [batch[layer][None] for layer in range(n_layers)],
            torch.arange(stop - start, device=device),
            types[start:stop],
            sums.sample.locate(np.arange(start, stop), np.array([0, stop - start]))[0] if sums.sample else None,
        )
        start = stop
    clock.lap("add")
    arrays = sums.types.to_numpy()
    result = pd.concat(
        [
            frame(layer, *finalize(arrays["count"], arrays["sum"][layer], arrays["sum_sq"][layer])[1:], arrays["count"])
            for layer in range(n_layers)
        ]
    )
    clock.lap("finalize")
    return result


class PhaseClock:
    """Seconds between laps (the device synchronised first), written into ``phases`` when given."""

    def __init__(self, device: str, phases: dict[str, float] | None):
        self.device, self.phases, self.last = device, phases, time.perf_counter()

    def lap(self, name: str) -> None:
        if self.phases is None:
            return
        if self.device == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        self.phases[name], self.last = now - self.last, now


def reference_kernel(X: torch.Tensor, type_index: np.ndarray, lengths: np.ndarray, device: str) -> pd.DataFrame:
    """(ii) The reference loop over the same states, moved to the host layer by layer as the reference does."""
    strings = np.array([f"t{i}" for i in range(int(type_index.max()) + 1)], dtype=object)[type_index].tolist()
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    rows = []
    for layer in range(X.shape[0]):
        table, states = {}, X[layer].to(device).float().cpu().numpy()
        for first, length in zip(offsets, lengths):
            running_mean_update(table, strings[first : first + length], states[first : first + length])
        rows += [(layer, int(token[1:]), k, q, m, v) for token, (k, _, q, m, v) in table.items()]
    return pd.DataFrame(rows, columns=["layer", "type", "n", "Q", "M", "V"]).sort_values(["layer", "type"])


def groupby_kernel(X: torch.Tensor, type_index: np.ndarray, lengths: np.ndarray, device: str) -> pd.DataFrame:
    """(iii) pandas: the per-type mean vector and mean squared norm of each layer, in float64."""
    frames = []
    for layer in range(X.shape[0]):
        x = X[layer].numpy().astype(np.float64)
        grouped = pd.DataFrame(x).groupby(type_index)
        means = grouped.mean().to_numpy()
        q = pd.Series(np.einsum("nd,nd->n", x, x)).groupby(type_index).mean().to_numpy()
        m = np.einsum("ud,ud->u", means, means)
        frames.append(frame(layer, q, m, q - m, grouped.size().to_numpy()))
    return pd.concat(frames)


def frame(layer: int, q, m, v, count) -> pd.DataFrame:
    return pd.DataFrame({"layer": layer, "type": np.arange(len(q)), "n": count, "Q": q, "M": m, "V": v})


KERNELS = dict(
    zip(APPROACHES, (ctxvar_kernel, reference_kernel, groupby_kernel, functools.partial(ctxvar_kernel, geometry=True)))
)


def timed(approach: str, shape: dict, device: str, out: str) -> dict:
    """One approach in this (fresh) process: build the states, then time the kernel alone."""
    X, type_index, lengths = hidden_states(shape["tokens"], shape["layers"], shape["d"], shape["vocabulary"])
    if device == "cuda":
        torch.cuda.synchronize()
    phases = {}
    kernel = KERNELS[approach]
    if approach.startswith("(i)"):
        kernel = functools.partial(kernel, phases=phases)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    result = kernel(X, type_index, lengths, device)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    result.to_parquet(out)
    return {
        "approach": approach,
        "seconds": seconds,
        **{f"{phase}_seconds": phases.get(phase, np.nan) for phase in PHASES},
        "system_seconds": after.ru_stime - before.ru_stime,
        "page_faults": after.ru_minflt - before.ru_minflt,
        "tokens": shape["tokens"],
        "types": int(type_index.max()) + 1,
        "tokens_per_s": shape["tokens"] / seconds,
        "peak_rss_mb": after.ru_maxrss / 1024,
    }


def agreement(out: Path) -> dict[str, dict[str, float]]:
    """Per approach, the largest |difference| of Q, M and V from (i), over Q, in the last round's results;
    counts must be equal."""
    ours = pd.read_parquet(out / ".kernel-0.parquet").set_index(["layer", "type"])
    errors = {}
    for index, approach in enumerate(APPROACHES):
        path = out / f".kernel-{index}.parquet"
        other = pd.read_parquet(path).set_index(["layer", "type"]).loc[ours.index]
        if not (other["n"].to_numpy() == ours["n"].to_numpy()).all():
            raise RuntimeError(f"{approach} counted different tokens than (i)")
        errors[approach] = {
            f"max_diff_over_Q_{column}": float(
                (np.abs(other[column].to_numpy() - ours[column].to_numpy()) / ours["Q"].to_numpy()).max()
            )
            for column in ("Q", "M", "V")
        }
    for index in range(len(APPROACHES)):
        (out / f".kernel-{index}.parquet").unlink()
    return errors


def main(argv=None) -> None:
    args = OPTIONS.parser(__doc__).parse_args(argv)
    shape = SHAPES["quick" if args.quick else "paper"]
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for round_ in range(args.rounds):
        for index, approach in enumerate(APPROACHES):
            run = in_fresh_process(timed, approach, shape, args.device, str(out / f".kernel-{index}.parquet"))
            runs.append({"round": round_, **run})
            print(f"round {round_}: {approach}: {run['seconds']:.2f} s", flush=True)
    errors = agreement(out)
    table = pd.DataFrame(runs)
    table = table.join(pd.DataFrame([errors[approach] for approach in table["approach"]]))
    per_round = table.pivot(index="round", columns="approach", values="seconds")
    ratios = pd.DataFrame({f"{other} / (i)": per_round[other] / per_round[APPROACHES[0]] for other in APPROACHES[1:]})
    ours = table[table["approach"] == APPROACHES[0]].set_index("round")
    ratios[f"{APPROACHES[1]} / (i) once its sums are allocated"] = per_round[APPROACHES[1]] / (
        ours["add_seconds"] + ours["finalize_seconds"]
    )
    write_results(out, {"kernel.csv": table, "kernel.md": report(table, ratios, errors, shape, args)})


def report(table: pd.DataFrame, ratios: pd.DataFrame, errors: dict[str, dict[str, float]], shape: dict, args) -> str:
    before = {"tokens": ("tokens", "first"), "types": ("types", "first")}
    after = {"median_tokens_per_s": ("tokens_per_s", "median"), "peak_rss_mb": ("peak_rss_mb", "max")}
    summary = spread(table, "approach", ["seconds"], before=before, after=after)
    ratio = ratios.agg(list(SPREAD)).T
    phases = (
        table[table["approach"].str.startswith("(i)")]
        .groupby("approach", sort=False)[[f"{phase}_seconds" for phase in PHASES] + ["system_seconds", "page_faults"]]
        .median()
    )
    device = args.device + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else "")
    flags = (["--quick"] if args.quick else []) + (["--device", "cuda"] if args.device == "cuda" else [])
    return "\n".join(
        [
            "# The statistics kernel: hidden states in memory → per-type Q, M, V",
            "",
            f"`{command(__file__, *flags)}`: "
            f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {torch.get_num_threads()} torch threads, "
            f"torch {torch.__version__}, device {device}; {shape['tokens']:,} tokens × {shape['layers']} layers × "
            f"d = {shape['d']}, Zipf({ZIPF_EXPONENT}) types over a {shape['vocabulary']:,}-word vocabulary, "
            f"batches of up to {BATCH_TOKENS:,} tokens; {len(ratios)} round(s), each approach in a fresh process.",
            "",
            markdown(summary.reset_index()),
            "",
            "Ratios of seconds within each round (median, min, max over the rounds):",
            "",
            markdown(ratio.reset_index(names="ratio")),
            "",
            "Where (i)'s seconds go (medians over the rounds): allocating its zeroed float64 sums, adding the "
            "batches, finalizing Q, M, V; the kernel's (system) share of the whole and the pages first touched:",
            "",
            markdown(phases.reset_index()),
            "",
            "Largest |difference| from (i), over Q, per (layer, type): "
            + "; ".join(
                f"{approach}: " + ", ".join(f"{key[-1]} {value:.1e}" for key, value in error.items())
                for approach, error in errors.items()
                if approach != APPROACHES[0]
            )
            + ". (ii) keeps float32 running means, as the reference does.",
            "",
            *([] if args.device == "cuda" else ["GPU rows: not measured (no GPU on this machine).", ""]),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
