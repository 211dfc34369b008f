"""I(W) as Machina & Mercer's published code computes it.

Written from anemily-machina/isotropy_transformers at commit baf98c29bd62c0d6601690dbb7e95d66ca1985c6
(Machina & Mercer, "Anisotropy is Not Inherent to Transformers", NAACL 2024), src/partition_function.py,
not copied from it:

- ``compute_IW``: WᵀW = ``torch.mm(torch.t(W), W)``; its eigenvectors are the columns of
  ``torch.linalg.eigh(WᵀW)``, each with the one sign the solver returns; Z(c) = Σ_rows exp(W c) per column
  (``torch.exp`` of ``torch.mm(W, eigen_vectors)``, then ``torch.sum(…, dim=0)``); I(W) = min Z / max Z.
- ``calc_isotropy``: the centred value is ``compute_IW`` of W − ``torch.mean(W, dim=0)``.

Their code runs in the weights' dtype; here the points are a float64 tensor, so exp overflows past cᵀw ≈ 709
(float32: ≈ 88) and the value is then NaN or 0, as theirs.
"""

from __future__ import annotations

import numpy as np
import torch


def compute_iw(w: torch.Tensor) -> float:
    """``compute_IW``: min Z(c) / max Z(c) over the columns c of torch.linalg.eigh(WᵀW), exp then sum."""
    eigenvectors = torch.linalg.eigh(torch.mm(torch.t(w), w)).eigenvectors
    sums = torch.sum(torch.exp(torch.mm(w, eigenvectors)), dim=0)
    return (torch.min(sums) / torch.max(sums)).item()


def machina_mercer_isotropy(points: np.ndarray, centred: bool) -> float:
    """I(W) of the rows of ``points`` as ``calc_isotropy`` computes it (``centred``: of W − its mean row), in
    float64."""
    w = torch.from_numpy(np.array(points, dtype=np.float64))
    if centred:
        w = w - torch.mean(w, dim=0).unsqueeze(0)
    return compute_iw(w)
