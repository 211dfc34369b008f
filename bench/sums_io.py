"""Sums files on disk: writing and verified reading of a partial, in ctxvar's layout with its value digests, in the
same layout with Parquet's page CRC-32 instead, in the layout before it and as raw numpy, on the same arrays, the
same file system and in the same run; then the paper run on one H100 at those rates. Writes sums_io.md,
sums_io.csv and sums_io_projection.csv.

    python -m bench sums_io                 # a bert-base-sized partial and a 7B layer group, 3 rounds: ≈ 15 min
    python -m bench sums_io --quick         # small shapes, one round (the bench test tier runs it)
    python -m bench sums_io --dir /scratch  # the file system to measure (default: the system's temporary folder)

Each shape is one sums file with Σx and Σ x/‖x‖ (the default geometry): U types × L layers × d, every layer
holding the same arrays (built once: only the files change). Types seen once (a Zipf law gives about a third)
have sums that are float32 values, as in a real partial, so compression finds what it would find there.

- ``ctxvar``: :func:`ctxvar.stats.sums.write_sums`, then :class:`ctxvar.stats.sums.SumsFile` reading every layer
  into numpy, each column chunk's value and byte digests (xxh3-128, in the footer) and the footer's SHA-256
  verified and every byte read counted.
- ``page CRC``: the same layout written without value digests, a CRC-32 on every page instead (as ctxvar wrote it
  before value digests), read by the same :class:`~ctxvar.stats.sums.SumsFile`, which verifies each page's CRC.
- ``layout 1``: the layout and the code before layout 2, kept here as the reference: vectors as
  ``fixed_size_list<float64>[d]``, nullable columns, snappy, min/max statistics, page checksums written and
  verified, the same row groups.
- ``numpy``: ``ndarray.tofile`` and ``numpy.fromfile`` of the same arrays, with no checksum.

A round runs every variant of a shape in turn, each write followed by its read (from the page cache: the file was
just written); ratios are taken within a round. Reported: the median of the rounds with their range, in GB/s of the
sums' numbers (n, Σ‖x‖², Σx, Σ x/‖x‖: U · L · (2d + 2) · 8 bytes), whatever a file's size.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ctxvar.files.atomic import atomic_path, use_system_allocator
from ctxvar.files.parquet import PARQUET_READS, VECTOR_WRITE_OPTIONS, tagged_schema
from ctxvar.stats.declarations import kept_sums
from ctxvar.stats.sums import LayerSums, SumsFile, sums_schema, write_sums

from harness import Options, command, markdown, ranges, spread, write_results

OPTIONS = Options(out="sums_io.md and the CSVs", quick="small shapes, one round", rounds="every variant of each shape")
SHAPES = {
    "bert-base partial": {"types": 20_000, "layers": 13, "d": 768},  # one of the paper's 8 shards, default geometry
    "7B layer group": {"types": 24_000, "layers": 4, "d": 4096},  # 4 of a Llama-2-7B's 33 hidden states
}
QUICK_SHAPES = {
    "bert-base partial": {"types": 2_000, "layers": 3, "d": 768},
    "7B layer group": {"types": 500, "layers": 2, "d": 4096},
}
VARIANTS = ("layout 1", "page CRC", "ctxvar", "numpy")
METADATA = {"model_id": "bench", "shard": 0}


def layer_arrays(types: int, d: int, seed: int = 0) -> LayerSums:
    """One layer's sums shaped like a partial's: n_t from a Zipf law; Σx and Σ x/‖x‖ of a type seen once are
    float32 values, the others carry float64's full precision."""
    rng = np.random.default_rng(seed)
    count = np.minimum(rng.zipf(1.5, types), 100_000).astype(np.int64)
    once = count == 1

    def vectors():
        rows = rng.standard_normal((types, d), dtype=np.float32).astype(np.float64) * count[:, None]
        rows[~once] += rng.random((int((~once).sum()), d)) * 1e-3
        return rows

    sum_ = vectors()
    types_ = np.array([f"t{i:06d}" for i in range(types)], dtype=object)
    sums = {"sum": sum_, "sum_sq": (sum_**2).sum(1), "sum_unit": vectors()}
    # any other sum a run with geometry.cosine keeps (ctxvar.stats.declarations), so that ctxvar reads the file
    others = [item for item in kept_sums({"cosine": True}) if item.name not in sums]
    sums |= {item.name: vectors() if item.vector else rng.random(types) for item in others}
    return LayerSums.of(0, types_, count, **sums)


def payload_bytes(shape: dict) -> int:
    return shape["types"] * shape["layers"] * (2 * shape["d"] + 2) * 8


# --- layout 1, the reference --------------------------------------------------------------------------------


def write_layout1(path, sums: LayerSums, n_layers: int) -> None:
    """The sums file as ctxvar wrote it before layout 2 (its LayerWriter and LayerSums.to_table)."""
    d = sums.sum.shape[1]
    fields = [("layer", pa.int16()), ("token", pa.string()), ("n", pa.int64()), ("sum_sq", pa.float64())]
    fields += [("sum", pa.list_(pa.float64(), d)), ("sum_unit", pa.list_(pa.float64(), d))]
    schema = tagged_schema(pa.schema(fields), METADATA)
    with (
        atomic_path(path) as tmp,
        pq.ParquetWriter(tmp, schema, write_page_checksum=True, use_dictionary=False) as writer,
    ):
        for layer in range(n_layers):
            columns = [
                pa.array(np.full(len(sums.types), layer, dtype=np.int16)),
                pa.array(sums.types, type=pa.string()),
                pa.array(sums.count, type=pa.int64()),
                pa.array(sums.sum_sq, type=pa.float64()),
                pa.FixedSizeListArray.from_arrays(pa.array(sums.sum.reshape(-1), type=pa.float64()), d),
                pa.FixedSizeListArray.from_arrays(pa.array(sums.sum_unit.reshape(-1), type=pa.float64()), d),
            ]
            table = pa.table(columns, schema=schema)
            writer.write_table(table, row_group_size=max(1, table.num_rows))


def read_layout1(path) -> list[LayerSums]:
    """Every layer of a layout-1 file, as ctxvar read it (SumsFile.layer: page checksums verified)."""
    source = pq.ParquetFile(str(path), pre_buffer=False, page_checksum_verification=True)
    d = source.schema_arrow.field("sum").type.list_size

    def matrix(column):
        return column.combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, d)

    layers = []
    for layer in range(source.num_row_groups):
        table = source.read_row_group(layer)
        layers.append(
            LayerSums.of(
                layer,
                table.column("token").to_numpy(zero_copy_only=False),
                table.column("n").to_numpy(),
                sum=matrix(table.column("sum")),
                sum_sq=table.column("sum_sq").to_numpy(),
                sum_unit=matrix(table.column("sum_unit")),
            )
        )
    return layers


# --- ctxvar and numpy -----------------------------------------------------------------------------------------


def write_ctxvar(path, sums: LayerSums, n_layers: int) -> None:
    layers = (LayerSums(layer, sums.types, sums.count, sums.sums) for layer in range(n_layers))
    write_sums(path, layers, sums.sum.shape[1], {**METADATA, "n_layers": n_layers})


def write_page_crc(path, sums: LayerSums, n_layers: int) -> None:
    """ctxvar's sums layout as it was written before value digests: the same columns and options, one row group
    per layer, a CRC-32 on every page, no digests in the footer."""
    schema = sums_schema(sums.sum.shape[1], {**METADATA, "n_layers": n_layers}, sums.sums)
    with (
        atomic_path(path) as tmp,
        pq.ParquetWriter(tmp, schema, write_page_checksum=True, **VECTOR_WRITE_OPTIONS) as writer,
    ):
        for layer in range(n_layers):
            table = LayerSums(layer, sums.types, sums.count, sums.sums).to_table(schema)
            writer.write_table(table, row_group_size=max(1, table.num_rows))


def read_ctxvar(path) -> list[LayerSums]:
    sums = SumsFile(path)
    return [sums.layer(layer) for layer in range(sums.n_layers)]


def write_numpy(path, sums: LayerSums, n_layers: int) -> None:
    with open(path, "wb") as out:
        for _ in range(n_layers):
            for array in sums.additive():
                array.tofile(out)


def read_numpy(path, template: LayerSums, n_layers: int) -> list[tuple[np.ndarray, ...]]:
    """The arrays :func:`write_numpy` wrote, per layer in the order of ``template.additive()``."""
    layers = []
    with open(path, "rb") as source:
        for _ in range(n_layers):
            layers.append(
                tuple(
                    np.fromfile(source, array.dtype, array.size).reshape(array.shape) for array in template.additive()
                )
            )
    return layers


def same_numbers(read, sums: LayerSums) -> bool:
    """Every layer read back equals the arrays written, bit for bit."""
    for layer in read:
        arrays = layer.additive() if isinstance(layer, LayerSums) else layer
        if not all(np.array_equal(got, want) for got, want in zip(arrays, sums.additive())):
            return False
    return True


def measure(variant: str, shape: dict, sums: LayerSums, folder: Path, check: bool) -> list[dict]:
    """Write then read one file of ``shape`` with ``variant``; two rows (write, read)."""
    path = folder / f"io-bench-{variant.replace(' ', '')}.{'npy' if variant == 'numpy' else 'parquet'}"
    write = {"layout 1": write_layout1, "page CRC": write_page_crc, "ctxvar": write_ctxvar, "numpy": write_numpy}[
        variant
    ]
    start = time.perf_counter()
    write(path, sums, shape["layers"])
    written = time.perf_counter() - start
    size = path.stat().st_size
    counted = PARQUET_READS.bytes
    start = time.perf_counter()
    if variant == "numpy":
        read = read_numpy(path, sums, shape["layers"])
    else:
        read = read_layout1(path) if variant == "layout 1" else read_ctxvar(path)
    seconds = time.perf_counter() - start
    counted = PARQUET_READS.bytes - counted
    equal = same_numbers(read, sums) if check else None
    del read
    path.unlink()
    payload = payload_bytes(shape)
    common = {"variant": variant, "file_bytes": size, "payload_bytes": payload, "read_back_equal": equal}
    return [
        {**common, "op": "write", "seconds": written, "gb_per_s": payload / written / 1e9},
        {**common, "op": "read", "seconds": seconds, "gb_per_s": payload / seconds / 1e9, "bytes_counted": counted},
    ]


# --- the paper on one H100, at these rates ---------------------------------------------------------------------

# (model, hidden states L, d, bare forward tokens/s on one H100: bert-base's and gpt2-medium's as measured on
# 2026-11-23, see docs/performance.md; the other base and large models have the same non-embedding shapes)
PAPER_MODELS = [
    ("bert-base-uncased", 13, 768, 190_000),
    ("bert-large-uncased", 25, 1024, 44_000),
    ("roberta-base", 13, 768, 190_000),
    ("roberta-large", 25, 1024, 44_000),
    ("gpt2", 13, 768, 190_000),
    ("gpt2-medium", 25, 1024, 44_000),
]
PAPER_TOKENS, PAPER_SHARDS = 12_300_000, 8
SHARD_TYPES, MERGED_TYPES = 17_500, 24_000  # types per shard and over the corpus (docs/performance.md: 15–20 k, 24 k)
SAMPLE_K = 4096


def paper_payload(n_layers: int, d: int, types: int) -> float:
    """Bytes of the numbers in one set of sums files (sums with Σ x/‖x‖, moments, sample) for ``types`` types:
    what the measured rates are rates of."""
    sums = types * n_layers * (2 * d + 2) * 8
    moments = n_layers * (d * d + d + 1) * 8
    sample = n_layers * SAMPLE_K * d * 4
    return sums + moments + sample


def project_paper(write_rate: float, read_rate: float, release: bool, incremental: bool) -> dict:
    """The paper run on one GPU, end to end, in seconds: extraction jobs back to back on the GPU in the workflow's
    order (shard 0 of every model first: the rule priority is −shard), each followed by the write of its partial
    (on the CPU once the job has ``release``\\ d its claim, else while it holds the GPU); merges on the CPU as soon
    as their inputs exist (``incremental``: one step per shard, else one per model), none waiting for a core.
    ``write_rate``, ``read_rate``: bytes of numbers per second (see :func:`paper_payload`). Model loading is left
    out, as it is from the bare forward passes it is compared with."""
    shard_tokens = PAPER_TOKENS / PAPER_SHARDS
    gpu_free, forward = 0.0, 0.0
    written = {}  # (model, shard) → when its partial is on disk
    for shard in range(PAPER_SHARDS):
        for model, layers, d, rate in PAPER_MODELS:
            seconds = shard_tokens / rate
            forward += seconds
            done = gpu_free + seconds
            write = paper_payload(layers, d, SHARD_TYPES) / write_rate
            written[model, shard] = done + write
            gpu_free = done if release else done + write
    ends = []
    for model, layers, d, _ in PAPER_MODELS:
        partial = paper_payload(layers, d, SHARD_TYPES)

        def merged(last: int) -> float:  # the sums of shards 0..last: types grow from one shard's to the corpus'
            types = SHARD_TYPES + (MERGED_TYPES - SHARD_TYPES) * last / (PAPER_SHARDS - 1)
            return paper_payload(layers, d, types)

        if incremental:
            end = written[model, 0]
            for shard in range(1, PAPER_SHARDS):
                start = max(end, written[model, shard])
                end = start + (merged(shard - 1) + partial) / read_rate + merged(shard) / write_rate
        else:
            start = max(written[model, shard] for shard in range(PAPER_SHARDS))
            end = start + PAPER_SHARDS * partial / read_rate + merged(PAPER_SHARDS - 1) / write_rate
        ends.append(end)
    total = max(ends)
    return {"forward_s": forward, "gpu_busy_until_s": gpu_free, "end_to_end_s": total, "over_forward": total / forward}


def projections(rows: pd.DataFrame) -> pd.DataFrame:
    """``project_paper`` at the bert-base partial's median rates, of layout 1 (the GPU held while writing, as
    before) and of ctxvar (without and with the claim released before the write)."""
    bert = rows[rows["shape"] == "bert-base partial"]
    out = []
    for variant, release in (("layout 1", False), ("ctxvar", False), ("ctxvar", True)):
        mine = bert[bert["variant"] == variant]
        rate = {op: 1e9 * mine.loc[mine["op"] == op, "gb_per_s"].median() for op in ("write", "read")}
        for incremental in (True, False):
            result = project_paper(rate["write"], rate["read"], release, incremental)
            out.append(
                {
                    "layout": variant,
                    "claim released before the write": release,
                    "incremental_merge": incremental,
                    "write GB/s": rate["write"] / 1e9,
                    "read GB/s": rate["read"] / 1e9,
                    **result,
                }
            )
    return pd.DataFrame(out)


# --- report -------------------------------------------------------------------------------------------------------


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per shape, variant and operation: median and range of GB/s over rounds; ratios to layout 1, to the page-CRC
    variant and to numpy, taken within each round."""
    keyed = rows.set_index(["round", "shape", "op", "variant"])["gb_per_s"]
    same_round = list(zip(rows["round"], rows["shape"], rows["op"]))
    ratios = {  # each row's GB/s over that of another variant in its round, shape and op
        f"over {variant}": rows["gb_per_s"].to_numpy() / keyed.loc[[(*key, variant) for key in same_round]].to_numpy()
        for variant in ("layout 1", "page CRC", "numpy")
    }
    after = {"file_bytes": ("file_bytes", "median")}
    table = spread(rows.assign(**ratios), ["shape", "op", "variant"], ["gb_per_s", *ratios], after=after)
    return pd.DataFrame(
        {
            "GB/s (median)": table["median_gb_per_s"],
            "GB/s range": ranges(table, "gb_per_s"),
            "× layout 1 (median)": table["median_over layout 1"],
            "× layout 1 range": ranges(table, "over layout 1"),
            "× page CRC (median)": table["median_over page CRC"],
            "× page CRC range": ranges(table, "over page CRC"),
            "× numpy (median)": table["median_over numpy"],
            "file MB": table["file_bytes"] / 1e6,
        }
    ).reset_index()


def report(rows: pd.DataFrame, projected: pd.DataFrame, shapes: dict, args) -> str:
    described = "; ".join(
        f"{name}: {s['types']:,} types × {s['layers']} layers × d = {s['d']}" for name, s in shapes.items()
    )
    counted = rows[(rows["variant"] == "ctxvar") & (rows["op"] == "read")]
    extra = (counted["bytes_counted"] - counted["file_bytes"]).max()
    return "\n".join(
        [
            "# Sums files on disk: write and verified read",
            "",
            f"`{command(__file__, *(['--quick'] if args.quick else []))}`: {time.strftime('%Y-%m-%d')}, {args.rounds} "
            f"round(s), files in {args.dir or tempfile.gettempdir()}. {described}; Σx and Σ x/‖x‖ in every layer. "
            "GB/s of the sums' numbers, U · L · (2d + 2) · 8 bytes; ratios within a round.",
            "",
            markdown(summary(rows)),
            "",
            f"Every array read back equal, bit for bit: {bool(rows['read_back_equal'].dropna().all())}. ctxvar's "
            f"reader counted at most {extra:,.0f} bytes more than the file's size (the footer, read again on "
            "opening).",
            "",
            "The paper on one H100 at the bert-base partial's median rates (`project_paper` in bench/sums_io.py: "
            "forward passes at the H100's measured rates, I/O on the CPU at these):",
            "",
            markdown(projected),
            "",
            "Every round:",
            "",
            markdown(rows),
            "",
        ]
    )


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--dir", default=None, help="where the files go (default: the temporary folder)")
    args = parser.parse_args(argv)
    use_system_allocator()  # as every job does
    shapes = QUICK_SHAPES if args.quick else SHAPES
    rows = []
    with tempfile.TemporaryDirectory(prefix="ctxvar-io-", dir=args.dir) as folder:
        for name, shape in shapes.items():
            sums = layer_arrays(shape["types"], shape["d"])
            for round_ in range(args.rounds):
                for variant in VARIANTS:
                    for row in measure(variant, shape, sums, Path(folder), check=round_ == 0):
                        rows.append({"round": round_, "shape": name, **row})
                        print(f"{name}, round {round_}, {variant} {row['op']}: {row['gb_per_s']:.3f} GB/s", flush=True)
            del sums
    rows = pd.DataFrame(rows)
    projected = projections(rows)
    write_results(
        args.out,
        {"sums_io.csv": rows, "sums_io_projection.csv": projected, "sums_io.md": report(rows, projected, shapes, args)},
    )


if __name__ == "__main__":
    sys.exit(main())
