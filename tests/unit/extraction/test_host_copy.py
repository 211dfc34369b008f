"""Sums leave the device (ctxvar.extraction.host_copy) checked and unchanged: through a small staging buffer, with no
copy on a CPU; a NaN or an infinity anywhere is found by one read, and finite sums whose total overflows are not
mistaken for infinite ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ctxvar.extraction.host_copy import finite


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_one_non_finite_element_anywhere_is_found(bad):
    values = torch.randn(1000, 7, dtype=torch.float64)
    assert finite(values)
    values[613, 5] = bad
    assert not finite(values)


def test_infinities_of_both_signs_are_found():
    values = torch.zeros(10, dtype=torch.float64)
    values[2], values[7] = math.inf, -math.inf
    assert not finite(values)


def test_finite_values_whose_total_overflows_are_finite():
    values = torch.full((4,), 1e308, dtype=torch.float64)
    assert math.isinf(values.sum().item()) and finite(values)


def test_sums_leave_the_device_through_a_small_staging_buffer_unchanged():
    from ctxvar.extraction.host_copy import staged_copy, to_host

    sums = torch.randn(7, 13, 5, dtype=torch.float64)
    waits = []
    copied = staged_copy(sums, torch.empty(16, dtype=torch.float64), lambda: waits.append(1))
    np.testing.assert_array_equal(copied, sums.numpy())
    assert copied.shape == (7, 13, 5) and len(waits) == -(-sums.numel() // 16)
    counts = torch.arange(10, dtype=torch.int64)
    np.testing.assert_array_equal(staged_copy(counts, torch.empty(3, dtype=torch.int64)), counts.numpy())
    assert to_host(sums) is not None and np.shares_memory(to_host(sums), sums.numpy()), "no copy on a CPU"
