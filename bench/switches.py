"""The cost of each geometry switch: device memory, partial-file bytes and time per token of the statistics kernel.

    python -m bench switches                     # bert-base: 200,000 tokens × 13 layers × d = 768, 3 rounds
    python -m bench switches --tokens 100000     # a smaller shard (a busy machine)
    python -m bench switches --quick             # 6,000 tokens × 3 layers × d = 64, k = 512, one round
    python -m bench switches --device cuda

Each switch of config ``geometry`` runs on its own beside the paper's sums ("core": n, Σx, Σ‖x‖² per
type and layer), then all the schema's defaults together:

    core                    GeometryOptions(): no geometry
    + cosine                Σ x/‖x‖ per (layer, type)
    + covariance            Σxxᵀ per layer
    + twonn (k, B = 1)      a float32 sample of k token positions per layer
    + twonn (k, B = 4)      4 · k of them (geometry.batches = 4)
    + ethayarajh            Σ x/‖x‖ per (layer, raw token id) and the per-layer sentence sums
    defaults                config.schema.yaml's geometry defaults together

Every run starts from the same hidden states, built before the clock (synthetic.py's Zipf types and states,
one layer at a time), laid out as extraction's padded batches: the shard's sentences in token-budget
batches of BATCH_TOKENS padded tokens (``token_budget_batches``, ``pad_batches``), each batch one
(rows, width, d) tensor per layer, as a forward pass leaves them. The clock covers what a job adds per
token: allocating the zeroed sums and ``EmbeddingSums.accumulate`` over every batch (the sample's
``locate`` included). Per switch the report gives:

- device state: ``state_bytes`` (the sums of one pass) and, measured, the peak memory the process grew by
  from the start of the clock to the end of the last batch (on a CPU the resident set, its peak reset
  first through /proc/self/clear_refs; on a GPU ``torch.cuda.max_memory_allocated``);
- partial bytes: the files an extraction job writes for the state, written as it writes them (its hand-over to
  host memory, ``passes.host_layers``, and its writers, ``partials.PartialFiles``) in the first round and
  measured on disk, beside ``ctxvar.run.disk.sums_bytes``, the free-space check's upper bound;
- time per token: seconds per million tokens, and the ratio to core taken within each round (a round runs
  every switch once, each in a fresh process; median and range over the rounds).

Every switch must give the core sums bit for bit; the run stops otherwise.
"""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ctxvar.config.schema import SCHEMA
from ctxvar.extraction.accumulator import EmbeddingSums, GeometryOptions
from ctxvar.extraction.budget import batch_bytes, state_bytes
from ctxvar.extraction.partials import PartialFiles
from ctxvar.extraction.passes import host_layers
from ctxvar.extraction.position_sample import token_keys
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.extraction.word_sums import word_table
from ctxvar.models.batching import BATCH_TOKENS, ShardBatches, pad_batches, token_budget_batches
from ctxvar.models.tokens import EncodedShard
from ctxvar.run.disk import sums_bytes
from ctxvar.run.resources import ModelShape
from ctxvar.stats.declarations import sums_files
from ctxvar.stats.sample_file import bottom_k

from harness import Options, command, in_fresh_process, markdown, ranges, spread, write_results
from synthetic import ZIPF_EXPONENT, layer_states, zipf_tokens

OPTIONS = Options(
    out="switches.md and switches.csv",
    quick="6,000 tokens × 3 layers × d = 64, k = 512, one round",
    device="cpu",
    rounds="every switch",
)
SHAPES = {
    "bert-base": {"tokens": 200_000, "layers": 13, "d": 768, "vocabulary": 30_000, "k": 4096},
    "quick": {"tokens": 6_000, "layers": 3, "d": 64, "vocabulary": 3_000, "k": 512},
}
SEED = 0
FILES = ("sums", "moments", "sample", "words", "sentences")  # an extraction job's partial files, by geometry


def schema_geometry() -> dict:
    """config.schema.yaml's geometry defaults."""
    return {key: spec["default"] for key, spec in SCHEMA["properties"]["geometry"]["properties"].items()}


def switches(k: int) -> dict[str, dict]:
    """Config ``geometry`` of each measured setting: nothing, each switch alone, the schema's defaults."""
    none = {**schema_geometry(), "covariance": False, "cosine": False, "twonn": False, "ethayarajh": False}
    none |= {"sample_size": k, "batches": 1}
    return {
        "core": none,
        "core + cosine": none | {"cosine": True},
        "core + covariance": none | {"covariance": True},
        f"core + twonn (k = {k:,}, B = 1)": none | {"twonn": True},
        f"core + twonn (k = {k:,}, B = 4)": none | {"twonn": True, "batches": 4},
        "core + ethayarajh": none | {"ethayarajh": True},
        "defaults (config.schema.yaml)": schema_geometry() | {"sample_size": k},
    }


class Shard:
    """The Zipf shard that kernel.py times too (synthetic.py), as extraction sees it (its ``job``): sentences, types,
    padded batches, sampled positions, raw ids (the types themselves, spelled as the types by its tokenizer)."""

    def __init__(self, shape: dict, options: GeometryOptions):
        self.shape = shape
        self.type_index, lengths = zipf_tokens(shape["tokens"], shape["vocabulary"], SEED)
        self.offsets = np.r_[0, np.cumsum(lengths)]
        self.n_types = int(self.type_index.max()) + 1
        self.types = np.array([f"t{i:06d}" for i in range(self.n_types)], dtype=object)  # sorted keys
        encoded = EncodedShard(ids=self.type_index, offsets=self.offsets)
        self.batches: ShardBatches = pad_batches(
            encoded, self.type_index, token_budget_batches(lengths, BATCH_TOKENS), pad_id=0
        )
        self.word_ids, word_index = word_table(self.type_index, self.offsets)  # raw ids: the types themselves
        if options.ethayarajh:
            self.batches.with_words(word_index)
        self.sampled = self.sample(options.sample_size)

    @property
    def tokenizer(self):
        return self  # what the job's hand-over asks of a tokenizer: the raw ids' spelling

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return self.types[ids].tolist()

    def metadata(self, options: GeometryOptions) -> dict:
        """The partial files' metadata: the geometry that made them."""
        return {"model_id": "bench", "geometry": options.record()}

    def sample(self, m: int) -> dict[str, np.ndarray] | None:
        """The bottom-m positions by the position hash, described as ``job.sample_positions`` does."""
        if not m:
            return None
        n_sentences = len(self.offsets) - 1
        keys = token_keys(np.arange(n_sentences), np.zeros(n_sentences, np.int64), self.offsets, SEED)
        tokens = bottom_k(keys, m)
        sequence = np.searchsorted(self.offsets, tokens, side="right") - 1
        return {
            "tokens": tokens,
            "key": keys[tokens],
            "sentence_id": sequence,
            "window": np.zeros(len(tokens), np.int32),
            "position": tokens - self.offsets[sequence],
            "token": self.types[self.type_index[tokens]],
        }

    def hidden_states(self, device: str) -> list[list[torch.Tensor]]:
        """Per batch, the ``layers`` (rows, width, d) float32 hidden states, zero at the padding; built one layer
        at a time, so the whole unpadded X is never held beside them."""
        batches, L, d = self.batches, self.shape["layers"], self.shape["d"]
        grids = [torch.zeros(L, rows * width, d) for rows, width in batches.shapes]
        for layer, states in enumerate(layer_states(self.type_index, L, d, SEED)):
            for b, grid in enumerate(grids):
                real = slice(batches.real[b], batches.real[b + 1])
                grid[layer, torch.from_numpy(batches.positions[real])] = states[torch.from_numpy(batches.tokens[real])]
        return [list(grid.to(device).view(L, *shape, d)) for grid, shape in zip(grids, batches.shapes)]


def accumulate(shard: Shard, options: GeometryOptions, states, device: str, clock: "PhaseClock") -> EmbeddingSums:
    """What ``passes.run_batches`` does after each forward pass, for every batch: the allocation included."""
    L, d = shard.shape["layers"], shard.shape["d"]
    sample = shard.sampled["tokens"] if shard.sampled else None
    sums = EmbeddingSums(range(L), L, shard.n_types, d, torch.device(device), options, sample, len(shard.word_ids))
    clock.lap("allocate")
    batches = shard.batches.to(device)
    hits = sums.sample.locate(shard.batches.tokens, shard.batches.real) if sums.sample else [None] * len(batches)
    for batch, hidden, sample_hits in zip(batches, states, hits):
        words = {"word_index": batch.word_index} if batch.word_index is not None else {}
        sums.accumulate(hidden, batch.positions, batch.type_index, sample_hits, **words)
    clock.lap("add")
    return sums


def write_partial(sums: EmbeddingSums, shard: Shard, options: GeometryOptions, folder: Path) -> dict[str, int]:
    """The partial files an extraction job writes for these sums, as it writes them (its hand-over to host memory,
    ``passes.host_layers``, and its writers, ``partials.PartialFiles``), in ``folder``; their bytes by kind."""
    paths = {"sums": folder / "sums.parquet", **sums_files(folder / "sums", options)}
    settings = ExtractionSettings(model={"id": "bench"}, source="bench", geometry=options)
    with ExitStack() as opened:
        files = PartialFiles(
            opened, paths["sums"], paths, shard.shape["d"], shard.metadata(options), options, shard.sampled
        )
        files.write(host_layers(sums, shard, settings))
    return {kind: os.path.getsize(path) for kind, path in paths.items()}


class PhaseClock:
    """Seconds between laps (the device synchronised first)."""

    def __init__(self, device: str):
        self.device, self.phases, self.last = device, {}, time.perf_counter()

    def lap(self, name: str) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        self.phases[name], self.last = now - self.last, now


def memory_mark(device: str) -> int:
    """Bytes in use now, the peak reset to them: the resident set on a CPU, torch's allocations on a GPU."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    Path("/proc/self/clear_refs").write_text("5")  # the resident set's high-water mark back to its size now
    return proc_status_kb("VmRSS") * 1024


def memory_peak(device: str) -> int:
    if device == "cuda":
        return torch.cuda.max_memory_allocated()
    return proc_status_kb("VmHWM") * 1024


def proc_status_kb(field: str) -> int:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1])


def timed(switch: str, geometry: dict, shape: dict, device: str, write_to: str | None) -> dict:
    """One switch in this (fresh) process: build the shard and its states, then time the sums; with
    ``write_to``, write the partial files there afterwards and measure them."""
    options = GeometryOptions.from_config(geometry)
    shard = Shard(shape, options)
    states = shard.hidden_states(device)
    before = memory_mark(device)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    clock = PhaseClock(device)
    sums = accumulate(shard, options, states, device, clock)
    peak = memory_peak(device) - before
    after = resource.getrusage(resource.RUSAGE_SELF)
    core = sums.types.to_numpy()
    digest = hashlib.sha256(b"".join(core[name].tobytes() for name in ("count", "sum", "sum_sq"))).hexdigest()
    L, d, tokens = shape["layers"], shape["d"], shape["tokens"]
    n_words = len(shard.word_ids)
    seconds = clock.phases["allocate"] + clock.phases["add"]
    row = {
        "switch": switch,
        "tokens": tokens,
        "types": shard.n_types,
        "words": n_words,
        "sampled": len(shard.sampled["tokens"]) if shard.sampled else 0,
        "batches": len(shard.batches),
        "seconds": seconds,
        "allocate_seconds": clock.phases["allocate"],
        "add_seconds": clock.phases["add"],
        "s_per_M_tokens": seconds / tokens * 1e6,
        "system_seconds": after.ru_stime - usage.ru_stime,
        "page_faults": after.ru_minflt - usage.ru_minflt,
        "state_bytes": state_bytes(L, shard.n_types, d, options, n_words),
        "batch_bytes": batch_bytes(L, int(np.diff(shard.batches.real).max()), d, options),
        "peak_bytes": peak,
        "partial_bytes_bound": sums_bytes(tokens, ModelShape(L, d, shard.n_types), geometry),
        "core_digest": digest,
    }
    if write_to is not None:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=write_to, prefix=".switches-") as folder:
            sizes = write_partial(sums, shard, options, Path(folder))
        row |= {"write_seconds": time.perf_counter() - start, "partial_bytes": sum(sizes.values())}
        row |= {f"{name}_file_bytes": sizes.get(name, 0) for name in FILES}
    return row


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--tokens", type=int, help="tokens in the shard (default 200,000; --quick 6,000)")
    parser.add_argument("--dir", help="folder the partial files are written to and deleted from (default: --out)")
    args = parser.parse_args(argv)
    args.load_at_start = os.getloadavg()
    shape = dict(SHAPES["quick" if args.quick else "bert-base"])
    shape["tokens"] = args.tokens or shape["tokens"]
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    settings = switches(shape["k"])
    runs = []
    for round_ in range(args.rounds):
        for switch, geometry in settings.items():
            write_to = (args.dir or str(out)) if round_ == 0 else None
            run = in_fresh_process(timed, switch, geometry, shape, args.device, write_to)
            runs.append({"round": round_, **run})
            print(f"round {round_}: {switch}: {run['seconds']:.2f} s", flush=True)
    table = pd.DataFrame(runs)
    if table["core_digest"].nunique() != 1:
        raise RuntimeError("the switches gave different core sums (n, Σx, Σ‖x‖²): " + str(table["core_digest"]))
    seconds = table.pivot(index="round", columns="switch", values="seconds")
    table["ratio_to_core"] = [seconds.loc[r, "core"] for r in table["round"]]
    table["ratio_to_core"] = table["seconds"] / table["ratio_to_core"]
    write_results(out, {"switches.csv": table, "switches.md": report(table, list(settings), shape, args)})


def summary(table: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per switch: MB of device state (formula, measured peak), MB of partial files (written, bound), seconds per
    million tokens and the ratio to core (median, range over the rounds)."""
    first = table[table["round"] == 0].set_index("switch").loc[order]
    medians = {"s_per_M": ("s_per_M_tokens", "median"), "peak": ("peak_bytes", "median")}
    grouped = spread(table, "switch", ["ratio_to_core"], after=medians).loc[order]
    return pd.DataFrame(
        {
            "switch": order,
            "state MB": (first["state_bytes"] / 1e6).to_numpy(),
            "peak MB": (grouped["peak"] / 1e6).to_numpy(),
            "partial MB": (first["partial_bytes"] / 1e6).to_numpy(),
            "bound MB": (first["partial_bytes_bound"] / 1e6).to_numpy(),
            "s per M tokens": grouped["s_per_M"].to_numpy(),
            "× core": grouped["median_ratio_to_core"].to_numpy(),
            "× core range": ranges(grouped, "ratio_to_core"),
        }
    )


def report(table: pd.DataFrame, order: list[str], shape: dict, args) -> str:
    first = table[table["round"] == 0].set_index("switch").loc[order]
    device = args.device + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else "")
    flags = (["--quick"] if args.quick else []) + (["--tokens", str(args.tokens)] if args.tokens else [])
    flags += ["--rounds", str(args.rounds)] if args.rounds != OPTIONS.default_rounds[args.quick] else []
    flags += ["--device", "cuda"] if args.device == "cuda" else []
    start, end = args.load_at_start, os.getloadavg()
    default_tokens = SHAPES["quick" if args.quick else "bert-base"]["tokens"]
    smaller = (
        f" (fewer than the shape's {default_tokens:,}: the machine is shared, and its load average was "
        f"{max(start):.1f} when the run began)"
        if shape["tokens"] < default_tokens
        else ""
    )
    files = first[[f"{name}_file_bytes" for name in FILES]].rename(columns=lambda c: c.replace("_file_bytes", ""))
    files = (files / 1e6).reset_index()
    phases = (
        table.groupby("switch")[["allocate_seconds", "add_seconds", "system_seconds", "page_faults"]]
        .median()
        .loc[order]
        .join(first[["write_seconds", "batch_bytes"]])
    )
    phases["batch_bytes"] /= 1e6
    phases = phases.rename(columns={"batch_bytes": "batch MB"}).reset_index()
    return "\n".join(
        [
            "# The cost of each geometry switch",
            "",
            f"`{command(__file__, *flags)}`: {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
            f"{os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads, torch {torch.__version__}, "
            f"device {device}; load average (1 / 5 / 15 min) {start[0]:.1f} / {start[1]:.1f} / {start[2]:.1f} at "
            f"the start, {end[0]:.1f} / {end[1]:.1f} / {end[2]:.1f} at the end; {shape['tokens']:,} tokens"
            f"{smaller} × {shape['layers']} layers × d = {shape['d']}, Zipf({ZIPF_EXPONENT}) "
            f"types over a {shape['vocabulary']:,}-word vocabulary ({int(first['types'].iloc[0]):,} types, "
            f"{int(first['words'].iloc[0]):,} raw ids inside sentences), {int(first['batches'].iloc[0])} batches of "
            f"up to {BATCH_TOKENS:,} padded tokens; {args.rounds} round(s), each switch in a fresh process, the rounds "
            "interleaved. Every switch gave the same core sums, bit for bit.",
            "",
            markdown(summary(table, order), ".4g"),
            "",
            "state MB: `state_bytes`, the device sums of one pass; peak MB: what the process grew by while it "
            "allocated and added them (median over the rounds); partial MB: the partial files written with "
            "extraction's writers; bound MB: `ctxvar.run.disk.sums_bytes` (the free-space check's upper bound, with "
            "the shard's types); s per M tokens: allocating and adding, seconds per million tokens (median); "
            "× core: the ratio to core within each round, median and range.",
            "",
            "Partial files, MB (first round):",
            "",
            markdown(files, ".4g"),
            "",
            "Where the seconds go (medians; writing in the first round only) and the largest batch's own buffers "
            "(`batch_bytes`):",
            "",
            markdown(phases),
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
