"""Reading tokens.parquet (per-type n, Q, M, V) one layer at a time, and its frequency filter."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.files.parquet import ParquetInput
from ctxvar.stats.layers import frequency_filter


class TokenStats:
    """Per-type n, Q, M, V of one model (``tokens.parquet``), read one layer at a time."""

    def __init__(self, path):
        self._file = ParquetInput(path)
        self.n_layers = self._file.num_row_groups
        self.metadata = self._file.metadata

    def layer(self, layer: int) -> pd.DataFrame:
        """Columns token, n, Q, M, V of ``layer``."""
        return self._file.row_group(layer, ["token", "n", "Q", "M", "V"], what="layer").to_pandas()


def filtered(frame: pd.DataFrame, analysis: dict) -> np.ndarray:
    """The frequency filter of the per-layer statistics, as a mask over ``frame``'s rows."""
    return frequency_filter(frame["n"].to_numpy(), analysis["min_log10_n"], analysis["max_log10_n"])
