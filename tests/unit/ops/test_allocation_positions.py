"""allocation_positions: where each logical axis sits in the allocation domain, given
nvFuser's stride order; define_tensor builds its allocation domain from it."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import FusionDefinition
from fuser_core.ir.layout import allocation_positions, describe_strides


@pytest.mark.parametrize(
    ("stride_order", "rank", "positions"),
    [
        ([], 3, [0, 1, 2]),  # no stride order: row-major
        ([2, 1, 0], 3, [0, 1, 2]),
        ([0, 1, 2], 3, [2, 1, 0]),  # column-major: axis 0 is innermost
        ([2, 0, 1], 3, [0, 2, 1]),
        ([], 0, []),
    ],
    ids=str,
)
def test_allocation_positions(stride_order: list[int], rank: int, positions: list[int]) -> None:
    assert allocation_positions(stride_order, rank) == positions


def test_positions_agree_with_the_stride_order_of_real_strides() -> None:
    """A transposed array's stride order puts each axis where its stride ranks."""
    x = np.empty((2, 3, 4), np.float32).transpose(1, 2, 0)
    sizes, strides = list(x.shape), [s // x.itemsize for s in x.strides]
    _, order = describe_strides(sizes, strides)
    positions = allocation_positions(order, 3)
    by_stride = sorted(range(3), key=lambda axis: -strides[axis])  # outermost first
    assert [by_stride.index(axis) for axis in range(3)] == positions


def test_define_tensor_allocation_domain_follows_the_positions() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, 1, -1], contiguity=[None, True, False], stride_order=[0, 2, 1])
    logical, allocation = t.tv.logical, t.tv.domain.allocation
    assert allocation is not None
    assert [allocation.index(d) for d in logical] == allocation_positions([0, 2, 1], 3) == [2, 0, 1]
    assert t.tv.domain.contiguity == [None, True, False]
