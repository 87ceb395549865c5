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
    """Contiguity (allocation order) and stride order of a strided tensor, as
    `compute_tensor_descriptor`, with an empty stride order for row-major."""
    contiguity, order = compute_tensor_descriptor(sizes, strides)
    if order == list(reversed(range(len(sizes)))):
        order = []
    return contiguity, order


def _is_broadcast(size: int, stride: int) -> bool:
    return size == 1 or stride == 0


def compute_tensor_descriptor(sizes: Sequence[int], strides: Sequence[int]) -> tuple[list[bool | None], list[int]]:
    """nvFuser's (contiguity, stride_order) of a strided tensor.

    The allocation order sorts axes by stride, largest first, ties keeping the logical
    order; an axis of stride 0 (an expanded one) keeps its logical position instead,
    so an expand never makes a permuted layout. Contiguity is per allocation axis: a
    broadcast (size 1 or stride 0) is None; another axis is contiguous when its stride
    is the next inner non-broadcast axis's stride times its size (1 for the innermost).
    Stride order entry i is the rank of axis i in that order (0 = innermost)."""
    if len(sizes) != len(strides):
        raise ValueError("compute_tensor_descriptor: sizes and strides must have the same number of dimensions")
    if any(s < 0 for s in strides):
        raise ValueError(f"negative strides are not supported: {list(strides)}")
    rank = len(sizes)
    alloc = sorted((i for i in range(rank) if strides[i] != 0), key=lambda i: -strides[i])
    for i in range(rank):
        if strides[i] == 0:
            alloc.insert(i, i)
    contiguity: list[bool | None] = [None] * rank
    expected = 1
    for k in reversed(range(rank)):
        axis = alloc[k]
        if _is_broadcast(sizes[axis], strides[axis]):
            continue
        contiguity[k] = strides[axis] == expected
        expected = strides[axis] * sizes[axis]
    order = [0] * rank
    for k, axis in enumerate(alloc):
        order[axis] = rank - 1 - k
    return contiguity, order


def compute_contiguity(sizes: Sequence[int], strides: Sequence[int]) -> list[bool | None]:
    """nvFuser's contiguity in logical order: None for a broadcast (size 1 or stride 0),
    else whether the axis's stride is the next inner non-broadcast axis's stride times
    its size (1 for the innermost)."""
    if len(sizes) != len(strides):
        raise ValueError("compute_contiguity: sizes and strides must have the same number of dimensions")
    contiguity: list[bool | None] = [None] * len(sizes)
    expected = 1
    for axis in reversed(range(len(sizes))):
        if _is_broadcast(sizes[axis], strides[axis]):
            continue
        contiguity[axis] = strides[axis] == expected
        expected = strides[axis] * sizes[axis]
    return contiguity
