"""Memory layout of concrete tensors as define_tensor describes it: contiguity per
allocation axis and nvFuser's stride order."""

from __future__ import annotations

from collections.abc import Sequence


def allocation_positions(stride_order: Sequence[int], rank: int) -> list[int]:
    """For each logical axis, its position in the allocation domain (0 = outermost).
    Stride order entry i is the rank of axis i's stride (0 = fastest), so an axis of
    stride order o sits at rank - 1 - o; no stride order means row-major."""
    if not stride_order:
        return list(range(rank))
    return [rank - 1 - o for o in stride_order]


def stride_order_of(sizes: list[int], strides: list[int]) -> list[int]:
    """nvFuser's stride order: entry i is the rank of axis i's stride (0 = fastest).
    Ties keep the outer axis outer, so a plain row-major array gives [n-1, ..., 0]."""
    rank = len(sizes)
    fastest_first = sorted(range(rank), key=lambda i: (strides[i], -i))
    order = [0] * rank
    for rank_pos, axis in enumerate(fastest_first):
        order[axis] = rank_pos
    return order


def describe_strides(sizes: list[int], strides: list[int]) -> tuple[list[bool | None], list[int]]:
    """Contiguity (allocation order; None for size-1 axes and for expanded ones, whose
    stride is 0) and stride order."""
    rank = len(sizes)
    order = stride_order_of(sizes, strides)
    alloc = sorted(range(rank), key=lambda i: -order[i])  # outermost first
    contiguity: list[bool | None] = [None] * rank
    expected = 1
    for k in reversed(range(rank)):
        axis = alloc[k]
        if sizes[axis] == 1 or strides[axis] == 0:
            continue
        contiguity[k] = strides[axis] == expected
        expected = strides[axis] * sizes[axis]
    if order == list(reversed(range(rank))):
        order = []
    return contiguity, order
