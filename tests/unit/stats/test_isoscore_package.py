"""``isoscore`` against the IsoScore package (Rudman et al., Findings of ACL 2022; PyPI IsoScore 2.0.1) on the
same points: ctxvar's closed form (PR − 1)/(d − 1) from the per-layer sums equals the package's algorithm."""

from __future__ import annotations

import numpy as np
import pytest
from IsoScore.IsoScore import IsoScore

from ctxvar.stats.geometry import covariance, spectrum_metrics


@pytest.mark.parametrize("seed, offset", [(0, 0.0), (1, 50.0), (2, 1e4)])
def test_isoscore_equals_the_isoscore_package(seed, offset):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(3000, 24)) * np.geomspace(10, 0.1, 24) @ np.linalg.qr(rng.normal(size=(24, 24)))[0]
    points += offset
    ours = spectrum_metrics(covariance(len(points), points.sum(0), points.T @ points), 1)["isoscore"]
    assert ours == pytest.approx(float(IsoScore(points)), rel=1e-6)
