"""Fig. 1's points collected in the extraction's pass (ctxvar.extraction.type_points): exactly the selected rows of
their layer, in batch order, and a batch left out refused."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ctxvar.extraction.type_points import TypePoints


def test_type_points_keep_exactly_the_selected_rows_of_their_layer_in_batch_order():
    torch.manual_seed(0)
    hidden = [[torch.randn(2, 5, 6) for _ in range(3)] for _ in range(2)]  # per batch, per layer: (B, T, d)
    positions = [torch.tensor([0, 1, 2, 5, 6, 7]), torch.tensor([0, 1, 5])]
    type_index = np.array([0, 1, 2, 1, 3, 1, 3, 0, 1])  # the batches' tokens, in batch order
    batches = SimpleNamespace(
        type_index=type_index, tokens=np.array([4, 5, 6, 7, 8, 0, 1, 2, 3]), real=np.array([0, 6, 9])
    )
    points = TypePoints(1, np.array([False, True, False, True]), batches, 6, torch.device("cpu"))
    assert points.device_bytes() == 4 * 6 * 6
    for batch in range(2):
        for layer in range(3):
            points.add(layer, hidden[batch][layer].reshape(-1, 6), positions[batch])
    kept, batch_of, rows = points.to_numpy()
    expected = [hidden[0][1].reshape(-1, 6)[positions[0][[1, 3, 4, 5]]], hidden[1][1].reshape(-1, 6)[[0, 5]]]
    np.testing.assert_array_equal(kept, [1, 1, 3, 1, 3, 1])
    np.testing.assert_array_equal(batch_of, [0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(rows, torch.cat(expected).numpy())


def test_type_points_refuse_a_batch_left_out():
    batches = SimpleNamespace(type_index=np.array([0, 1]), tokens=np.array([0, 1]), real=np.array([0, 1, 2]))
    points = TypePoints(0, np.array([True, True]), batches, 2, torch.device("cpu"))
    points.add(0, torch.zeros(1, 2), torch.tensor([0]))
    with pytest.raises(RuntimeError, match="1 of 2 batches"):
        points.to_numpy()
