"""Fig. 1's PCA components file (ctxvar.stats.pca_components): rows pc1 and pc2, a column per dimension after
``component``, read back as the (2, d) float64 components written, bit for bit."""

from __future__ import annotations

import numpy as np

from ctxvar.files.atomic import read_csv, write_csv
from ctxvar.stats.pca_components import components_table, read_components


def test_components_are_written_as_rows_pc1_and_pc2_and_read_back_bit_for_bit(tmp_path):
    components = np.random.default_rng(0).normal(size=(2, 5))
    components[1, 3] = -1 / 3
    table = components_table(components)
    assert list(table.columns) == ["component", "0", "1", "2", "3", "4"]
    assert list(table["component"]) == ["pc1", "pc2"]
    write_csv(table, tmp_path / "components.csv")
    assert list(read_csv(tmp_path / "components.csv").columns) == list(table.columns)
    read = read_components(tmp_path / "components.csv")
    assert read.dtype == np.float64 and read.shape == (2, 5)
    np.testing.assert_array_equal(read, components)
