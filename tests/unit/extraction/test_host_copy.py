"""Sums leave the device checked: a NaN or an infinity anywhere is found by one read, and finite sums whose total
overflows are not mistaken for infinite ones."""

from __future__ import annotations

import math

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
