"""Reading tokens.parquet (ctxvar.stats.token_table): a layer at a time, its row group, with the columns token, n,
Q, M and V alone, the file's metadata beside; and the frequency filter of the per-layer statistics as a mask over a
layer's rows, both bounds inclusive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ctxvar.files.parquet import parquet_writer, tagged_schema
from ctxvar.stats.token_table import TokenStats, filtered


def layer_table(layer: int) -> pd.DataFrame:
    n = np.array([1, 9, 10, 100, 1000, 100_000, 100_001])
    q = np.arange(len(n), dtype=float) + 10 * layer
    return pd.DataFrame(
        {"token": [f"t{i}" for i in range(len(n))], "n": n, "Q": q, "M": q / 2, "V": q / 2, "sum_q": q * n}
    )


def test_each_layer_is_its_row_group_with_the_statistics_columns(tmp_path):
    layers = [layer_table(layer) for layer in range(3)]
    schema = pa.Schema.from_pandas(layers[0], preserve_index=False)
    with parquet_writer(tmp_path / "tokens.parquet", tagged_schema(schema, {"model_id": "m"})) as writer:
        for frame in layers:
            writer.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False))
    stats = TokenStats(tmp_path / "tokens.parquet")
    assert stats.n_layers == 3 and stats.metadata["model_id"] == "m"
    for layer, frame in enumerate(layers):
        pd.testing.assert_frame_equal(stats.layer(layer), frame[["token", "n", "Q", "M", "V"]])


def test_the_frequency_filter_keeps_the_types_within_both_bounds():
    frame = layer_table(0)
    mask = filtered(frame, {"min_log10_n": 1, "max_log10_n": 5})
    assert list(frame.loc[mask, "n"]) == [10, 100, 1000, 100_000]
    assert filtered(frame, {"min_log10_n": 0, "max_log10_n": 2}).tolist() == [True, True, True, True] + [False] * 3
