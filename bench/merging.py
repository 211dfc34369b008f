"""(d) The merge and the layer statistics on synthetic partials, each run as its own process as in the
workflow (and, like its jobs, without torch and with the system allocator):
``python bench/merging.py merge|layers OUT PARTIAL...`` prints the result as JSON."""

from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np

from ctxvar.files.atomic import use_system_allocator
from ctxvar.stats.declarations import kept_sums
from ctxvar.stats.layers import layers_table
from ctxvar.stats.merge import merge_partials
from ctxvar.stats.sums import LayerSums, write_sums


def synthetic_partials(
    folder, n_shards: int, vocabulary: int, types_per_shard: int, n_layers: int, d: int
) -> list[str]:
    """Partial sums files shaped like real ones: each shard holds a random subset of the vocabulary."""
    rng = np.random.default_rng(0)
    words = np.array([f"w{i:06d}" for i in range(vocabulary)], dtype=object)
    paths = []
    for shard in range(n_shards):
        types = np.sort(rng.choice(words, types_per_shard, replace=False))
        count = rng.integers(1, 1000, types_per_shard)

        def layers():
            for layer in range(n_layers):
                total = rng.normal(size=(types_per_shard, d)) * count[:, None]
                sums = {"sum": total, "sum_sq": np.einsum("ud,ud->u", total, total) / count + count}
                others = [item for item in kept_sums({}) if item.name not in sums]  # any other sum a run keeps
                sums |= {
                    item.name: rng.normal(size=(types_per_shard, d) if item.vector else types_per_shard)
                    for item in others
                }
                yield LayerSums.of(layer, types, count, **sums)

        metadata = {
            "model_id": "bench",
            "model_name": "bench",
            "revision": "main",
            "dtype": "float32",
            "n_layers": n_layers,
            "d": d,
            "tokenizer_sha256": "0",
            "weights_sha256": "0",
            "merge_markers": True,
            "config_hash": "bench",
            "shard": shard,
            "n_tokens": int(count.sum()),  # a merge of no token stops (merge.check_has_tokens)
        }
        path = f"{folder}/partial{shard}.parquet"
        write_sums(path, layers(), d, metadata)
        paths.append(path)
    return paths


def merge(partials: list[str], folder: str) -> dict:
    """The merge_statistics job: sums.parquet and tokens.parquet from the partials."""
    start = time.perf_counter()
    merge_partials(partials, f"{folder}/sums.parquet", f"{folder}/tokens.parquet")
    return {
        "seconds": time.perf_counter() - start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def layers(folder: str) -> dict:
    """The layer_statistics job: layers.csv from sums.parquet."""
    start = time.perf_counter()
    layers_table(f"{folder}/sums.parquet", 1, 5)
    return {
        "seconds": time.perf_counter() - start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


if __name__ == "__main__":
    use_system_allocator()
    step, folder, *paths = sys.argv[1:]
    print(json.dumps(merge(paths, folder) if step == "merge" else layers(folder)))
