"""Helpers shared by the op builders: output domains, axis checks, error messages."""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import FP8_MAX, DataType, saturate
from fuser_core.ir.elementwise import is_supported_cast
from fuser_core.ir.iter_domain import IterDomain, IterType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import BroadcastOp
from fuser_core.ir.tensor_view import MAX_TENSOR_RANK, TensorDomain, TensorView


def tv_name(tv: Val) -> str:
    return f"T{tv.name}" if isinstance(tv, TensorView) else str(tv)


def normalize_axis(axis: int, ndim: int, op: str, tv: TensorView, arg: str = "dim") -> int:
    """`axis` in [-ndim, ndim), as a non-negative position; a FuserError otherwise."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise FuserError(f"{arg} must be an int, got {axis!r}", op=op, tensor=tv_name(tv))
    if not -ndim <= axis < max(ndim, 1):
        valid = f"{-ndim}..{ndim - 1}" if ndim else "none (0-D tensor)"
        raise FuserError(
            f"{arg} {axis} is out of range for {ndim}-D tensor {tv_name(tv)} (valid: {valid})",
            op=op,
            tensor=tv_name(tv),
        )
    return axis % ndim if ndim else 0


def normalize_axes(axes: Sequence[int], ndim: int, op: str, tv: TensorView, arg: str = "dims") -> list[int]:
    result = [normalize_axis(a, ndim, op, tv, arg) for a in axes]
    if len(set(result)) != len(result):
        raise FuserError(f"{arg} {list(axes)} names an axis twice", op=op, tensor=tv_name(tv))
    return sorted(result)


def require_castable(value: Val, dtype: DataType, op: str) -> None:
    """nvFuser's castOp refuses conversions it has no function for (fp8 from or to
    an integer, Bool, complex or the other fp8 type)."""
    if not is_supported_cast(value.dtype, dtype):
        raise FuserError(
            f"illegal cast of {tv_name(value)} from {value.dtype!r} to {dtype!r}: nvFuser has no such conversion",
            op=op,
            tensor=tv_name(value) if isinstance(value, TensorView) else None,
        )


def cast_constant(dtype: DataType, value: Scalar, op: str, tv: Val | None = None) -> Scalar:
    """`value` as `dtype`; a constant the type cannot hold (2.5 as an Int) is the user's error.
    A constant is converted now, as the kernels would (the real part of a complex, fp8
    saturated); a symbolic scalar gets a cast, which must be one nvFuser has."""
    if not value.is_const:
        require_castable(value, dtype, op)
        return sm.cast(dtype, value)
    converted: Scalar | float = value
    if value.dtype != dtype:
        raw = value.value
        if isinstance(raw, complex) and not dtype.is_complex:
            converted = raw = raw.real
        if dtype in FP8_MAX and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            converted = float(saturate(float(raw), dtype))
    try:
        return sm.cast(dtype, converted)
    except ValueError as err:
        tensor = tv_name(tv) if tv is not None else None
        raise FuserError(f"{value} cannot be converted to {dtype!r}: {err}", op=op, tensor=tensor) from None


def check_rank(rank: int, op: str, tv: TensorView | None = None) -> None:
    """Refuse an output of more than MAX_TENSOR_RANK axes, before anything is built."""
    if rank > MAX_TENSOR_RANK:
        raise FuserError(
            f"the result would have {rank} axes; tensors may have at most {MAX_TENSOR_RANK}",
            op=op,
            tensor=tv_name(tv) if tv is not None else None,
        )


def require_tensor(value: Val, op: str, arg: str = "arg") -> TensorView:
    if not isinstance(value, TensorView):
        raise FuserError(f"{arg} must be a tensor, got scalar {value}", op=op)
    return value


def broadcast_to_rank(tv: TensorView, rank: int) -> TensorView:
    """Prepend broadcast axes so `tv` has `rank` axes (NumPy's implicit broadcasting)."""
    missing = rank - tv.ndim
    if missing <= 0:
        return tv
    return broadcast(tv, [True] * missing + [False] * tv.ndim)


def broadcast(tv: TensorView, flags: Sequence[bool], op: str = "broadcast") -> TensorView:
    """Insert broadcast axes where `flags` is True (flags cover the output axes)."""
    check_rank(len(flags), op, tv)
    inputs = iter(tv.logical_no_reductions())
    out_ids = []
    for flag in flags:
        if flag:
            out_ids.append(IterDomain(tv.fusion.one_val(), iter_type=IterType.Broadcast))
        else:
            out_ids.append(next(inputs).clone_with(is_rfactor_product=False))
    out = TensorView(TensorDomain(out_ids), tv.dtype)
    BroadcastOp(out, tv, flags)
    return out


def maybe_broadcast(vals: Sequence[Val]) -> list[Val]:
    rank = max((v.ndim for v in vals if isinstance(v, TensorView)), default=0)
    aligned = [broadcast_to_rank(v, rank) if isinstance(v, TensorView) else v for v in vals]
    for before, after in zip(vals, aligned, strict=True):
        if after is not before and isinstance(after.definition, BroadcastOp):
            after.definition.rank_alignment = True
    return aligned


def _prefer_extent(ids: list[IterDomain]) -> Scalar:
    concrete = [i for i in ids if not i.is_symbolic] or ids
    for i in concrete:
        if i.extent.is_const:
            return i.extent
    return concrete[0].extent


def new_output_id(ids: Sequence[IterDomain], iter_type: IterType | None = None) -> IterDomain:
    """The output axis of an element-wise op whose operands have axes `ids`;
    `iter_type` forces the type of an axis that is not a broadcast (matmul's rK)."""
    data = [i for i in ids if not i.is_broadcast]
    if not data:
        expanded = next((i.expanded_extent for i in ids if i.expanded_extent is not None), None)
        return IterDomain(ids[0].fusion.one_val(), iter_type=IterType.Broadcast, expanded_extent=expanded)
    if iter_type is None:
        iter_type = IterType.Iteration if any(i.is_iteration for i in data) else IterType.Symbolic
    return IterDomain(_prefer_extent(data), iter_type=iter_type)


def check_same_static_size(ids: Sequence[tuple[TensorView, IterDomain]], what: str, op: str) -> None:
    """Static sizes of one output axis that disagree where neither is a broadcast."""
    seen: tuple[TensorView, int] | None = None
    for tv, dim in ids:
        if dim.is_broadcast or not dim.extent.is_const:
            continue
        size = int(dim.extent.value)  # type: ignore[arg-type]
        if seen is not None and seen[1] != size:
            raise FuserError(
                f"{what} has size {seen[1]} in {tv_name(seen[0])} but {size} in {tv_name(tv)}",
                op=op,
                tensor=tv_name(tv),
            )
        seen = seen or (tv, size)


def check_compatible_sizes(tvs: Sequence[TensorView], op: str) -> None:
    """Static sizes that disagree on an axis where neither is a broadcast."""
    logicals = [tv.logical_no_reductions() for tv in tvs]  # once per tensor: ranks may be large
    for pos in range(tvs[0].ndim):
        check_same_static_size([(tv, ids[pos]) for tv, ids in zip(tvs, logicals, strict=True)], f"axis {pos}", op)


def new_output_tv(vals: Sequence[Val], dtype: DataType, op: str) -> TensorView:
    tvs = [v for v in vals if isinstance(v, TensorView)]
    ranks = {tv.ndim for tv in tvs}
    if len(ranks) != 1:
        raise FuserError(f"operands have ranks {sorted(ranks)} after broadcasting", op=op)
    check_compatible_sizes(tvs, op)
    logicals = [tv.logical_no_reductions() for tv in tvs]
    ids = [new_output_id([ids[pos] for ids in logicals]) for pos in range(tvs[0].ndim)]
    return TensorView(TensorDomain(ids), dtype)


def new_like(tv: TensorView, dtype: DataType) -> TensorView:
    ids = [new_output_id([i]) for i in tv.logical_no_reductions()]
    return TensorView(TensorDomain(ids), dtype)
