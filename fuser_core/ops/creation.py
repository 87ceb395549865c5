"""Tensors that come from nowhere: fusion inputs, full() and iota()."""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import current_fusion
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain, IterType
from fuser_core.ir.layout import allocation_positions
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import FullOp, IotaOp
from fuser_core.ir.tensor_view import Contiguity, TensorDomain, TensorView
from fuser_core.ops.utils import cast_constant, check_rank


def factory_id(extent: Scalar) -> IterDomain:
    """An output axis of a factory: Symbolic until its size is known."""
    extent = sm.cast(DataType.Index, extent)
    if extent.is_const:
        if int(extent.value) == 1:  # type: ignore[arg-type]
            return IterDomain(extent, iter_type=IterType.Broadcast)
        return IterDomain(extent, iter_type=IterType.Iteration)
    return IterDomain(extent, iter_type=IterType.Symbolic)


def full(shape: Sequence[Scalar], fill: Scalar, dtype: DataType) -> TensorView:
    check_rank(len(shape), "full")
    extents = [sm.cast(DataType.Index, s) for s in shape]
    for s in extents:
        if s.is_const and int(s.value) < 0:  # type: ignore[arg-type]
            raise FuserError(f"negative size {s.value} in shape", op="full")
    out = TensorView(TensorDomain([factory_id(s) for s in extents]), dtype)
    FullOp(out, extents, cast_constant(dtype, fill, "full"))
    return out


def iota(length: Scalar, start: Scalar | None, step: Scalar | None, dtype: DataType) -> TensorView:
    if not length.dtype.is_integral:
        raise FuserError(f"length must be an integer, got {length.dtype!r}", op="iota")
    if not (dtype.is_integral or dtype.is_floating):
        raise FuserError(f"dtype must be integral or floating, got {dtype!r}", op="iota")
    start = cast_constant(dtype, start if start is not None else sm.const(0, dtype), "iota")
    step = cast_constant(dtype, step if step is not None else sm.const(1, dtype), "iota")
    if step.is_const and step.value == 0:
        raise FuserError("step must not be zero", op="iota")
    extent = sm.cast(DataType.Index, length)
    out = TensorView(TensorDomain([factory_id(extent)]), dtype)
    IotaOp(out, extent, start, step)
    return out


def tensor_input(
    shape: Sequence[int],
    contiguity: Sequence[Contiguity],
    dtype: DataType,
    stride_order: Sequence[int] = (),
) -> TensorView:
    """A fusion input as nvFuser's frontend builds it: -1 is a symbolic size, 1 a
    broadcast, other numbers static; a symbolic size with contiguity None is an
    expanded broadcast. Contiguity is given in allocation order."""
    check_rank(len(shape), "define_tensor")
    fusion = current_fusion()
    rank = len(shape)
    alloc_pos = allocation_positions(stride_order, rank)
    extents: list[Scalar] = []
    for size in shape:  # sizes first, then axes: this is what fixes the names
        if size == -1:
            extents.append(Scalar(DataType.Index))
        elif size in (0, 1):
            extents.append(fusion.zero_val() if size == 0 else fusion.one_val())
        else:
            extents.append(Scalar(DataType.Index, size))
    ids = []
    for pos, (size, extent) in enumerate(zip(shape, extents, strict=True)):
        is_broadcast = contiguity[alloc_pos[pos]] is None
        if is_broadcast and size != 1:
            ids.append(IterDomain(fusion.one_val(), iter_type=IterType.Broadcast, expanded_extent=extent))
        elif size == 1:
            ids.append(IterDomain(extent, iter_type=IterType.Broadcast))
        else:
            ids.append(IterDomain(extent))
    allocation = None
    if stride_order and list(stride_order) != sorted(stride_order, reverse=True):
        allocation = [ids[0]] * rank
        for pos, a in enumerate(alloc_pos):
            allocation[a] = ids[pos]
    return TensorView(TensorDomain(ids, allocation=allocation, contiguity=list(contiguity)), dtype)
