"""Fig. 1's PCA components file, components.csv: rows pc1 and pc2, column ``component`` then one column per
dimension. :mod:`ctxvar.figures.pca_selection` writes it; the points that the
extraction's pass keeps (:mod:`ctxvar.extraction.pca_points`) are projected on it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxvar.files.atomic import read_csv


def components_table(components: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame(components, columns=[str(i) for i in range(components.shape[1])])
    frame.insert(0, "component", ["pc1", "pc2"])
    return frame


def read_components(path) -> np.ndarray:
    """(2, d) components from components.csv."""
    return read_csv(path).set_index("component").to_numpy(dtype=np.float64)
