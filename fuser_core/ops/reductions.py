"""Reductions: sum, prod, max, min, and the composites mean, var and var_mean."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain, IterType
from fuser_core.ir.op_types import BinaryOpType, UnaryOpType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import ReductionOp, WelfordOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops import arith
from fuser_core.ops.shape import squeeze
from fuser_core.ops.utils import broadcast, new_output_id, normalize_axes, tv_name


def _init_value(op: BinaryOpType, dtype: DataType) -> Scalar:
    if op == BinaryOpType.Add:
        return sm.const(False if dtype.is_boolean else 0, dtype)
    if op == BinaryOpType.Mul:
        return sm.const(True if dtype.is_boolean else 1, dtype)
    lowest = op == BinaryOpType.Max
    if dtype.is_floating:
        return sm.const(float("-inf") if lowest else float("inf"), dtype)
    if dtype.is_boolean:
        return sm.const(not lowest, dtype)
    info = np.iinfo(dtype.numpy)
    return sm.const(int(info.min if lowest else info.max), dtype)


def _reduced_domain(tv: TensorView, axes: Sequence[int]) -> list[IterDomain]:
    ids = []
    for pos, dim in enumerate(tv.logical_no_reductions()):
        if pos in axes:
            ids.append(IterDomain(dim.maybe_expanded_extent, iter_type=IterType.Reduction))
        else:
            ids.append(new_output_id([dim]))
    return ids


def reduction(
    op: BinaryOpType,
    tv: TensorView,
    dims: Sequence[int],
    keepdim: bool = False,
    dtype: DataType = DataType.Null,
    op_name: str = "sum",
) -> TensorView:
    ndim = tv.ndim
    if ndim == 0:
        return arith.set_(tv)
    axes = normalize_axes(list(dims), ndim, op_name, tv)
    if not axes:
        raise FuserError("no reduction axis given", op=op_name, tensor=tv_name(tv))
    sums_integers = tv.dtype.is_integral or tv.dtype.is_boolean
    if dtype == DataType.Null and op in (BinaryOpType.Add, BinaryOpType.Mul) and sums_integers:
        dtype = DataType.Int
    if dtype != DataType.Null and dtype != tv.dtype:
        tv = arith.cast(tv, dtype)  # type: ignore[assignment]
    logical = tv.logical_no_reductions()
    # Reducing a broadcast axis only removes it; an expanded one scales a sum.
    trivial = [pos for pos in axes if logical[pos].is_broadcast]
    scale = [logical[pos].expanded_extent for pos in trivial if logical[pos].expanded_extent is not None]
    squeezed = tv
    if trivial:
        squeezed = squeeze(tv, trivial, squeeze_expanded=True)
    real_axes = [pos - sum(t < pos for t in trivial) for pos in axes if pos not in trivial]
    out: TensorView = squeezed
    if real_axes:
        out = TensorView(TensorDomain(_reduced_domain(squeezed, real_axes)), squeezed.dtype)
        ReductionOp(op, out, squeezed, _init_value(op, squeezed.dtype))
    if scale and op in (BinaryOpType.Add, BinaryOpType.Mul):
        factor = sm.product(scale)  # type: ignore[arg-type]
        kind = BinaryOpType.Mul if op == BinaryOpType.Add else BinaryOpType.Pow
        out = arith.binary(kind, out, factor)  # type: ignore[assignment]
        if out.dtype != squeezed.dtype:  # half types scale in Float: keep the reduction's type
            out = arith.cast(out, squeezed.dtype)  # type: ignore[assignment]
    if keepdim:
        out = broadcast(out, [pos in axes for pos in range(ndim)])
    if out is tv:
        out = arith.set_(tv)
    return out


def num_features(tv: TensorView, axes: Sequence[int]) -> Scalar:
    logical = tv.logical_no_reductions()
    return sm.product([logical[a].maybe_expanded_extent for a in axes])


def mean(tv: TensorView, dims: Sequence[int], keepdim: bool = False) -> TensorView:
    axes = normalize_axes(list(dims), tv.ndim, "mean", tv)
    total = reduction(BinaryOpType.Add, tv, axes, keepdim, op_name="mean")
    return arith.binary(BinaryOpType.Div, total, num_features(tv, axes))  # type: ignore[return-value]


def _denominator(tv: TensorView, axes: Sequence[int], correction: int, op: str) -> Scalar:
    if correction < 0:
        raise FuserError(f"correction must be non-negative, got {correction}", op=op, tensor=tv_name(tv))
    denom = sm.sub(num_features(tv, axes), sm.const(correction, DataType.Index))
    clamped = sm.where(sm.ge(denom, 0), denom, sm.const(0, DataType.Index))
    # A Double, as nvFuser's numFeatures: its reciprocal must not round to Float.
    return sm.cast(DataType.Double, clamped)


def var(tv: TensorView, dims: Sequence[int], correction: int = 1, keepdim: bool = False) -> TensorView:
    axes = normalize_axes(list(dims), tv.ndim, "var", tv)
    denom = _denominator(tv, axes, correction, "var")
    if tv.dtype.is_integral or tv.dtype.is_boolean:  # as var_mean: an integer mean must not truncate
        tv = arith.cast(tv, DataType.Float)  # type: ignore[assignment]
    centered = arith.binary(BinaryOpType.Sub, tv, mean(tv, axes, keepdim=True))
    squares = arith.binary(BinaryOpType.Mul, centered, centered)
    total = reduction(BinaryOpType.Add, squares, axes, keepdim, op_name="var")  # type: ignore[arg-type]
    inverse = arith.unary(UnaryOpType.Reciprocal, denom)
    return arith.binary(BinaryOpType.Mul, total, inverse)  # type: ignore[return-value]


def var_mean(
    tv: TensorView, dims: Sequence[int], correction: int = 1, keepdim: bool = False
) -> tuple[TensorView, TensorView]:
    if tv.dtype.is_reduced_float:
        raise FuserError(
            f"not supported for {tv.dtype!r} input {tv_name(tv)}; cast it to Float first",
            op="var_mean",
            tensor=tv_name(tv),
        )
    axes = normalize_axes(list(dims), tv.ndim, "var_mean", tv)
    denom = _denominator(tv, axes, correction, "var_mean")
    if tv.dtype.is_integral or tv.dtype.is_boolean:
        tv = arith.cast(tv, DataType.Float)  # type: ignore[assignment]
    avg = TensorView(TensorDomain(_reduced_domain(tv, axes)), tv.dtype)
    var_sum = TensorView(TensorDomain(_reduced_domain(tv, axes)), tv.dtype)
    count = TensorView(TensorDomain(_reduced_domain(tv, axes)), DataType.Index)
    WelfordOp(avg, var_sum, count, tv)
    variance: TensorView = arith.binary(  # type: ignore[assignment]
        BinaryOpType.Mul, var_sum, arith.unary(UnaryOpType.Reciprocal, denom)
    )
    result_mean = avg
    if keepdim:
        flags = [pos in axes for pos in range(tv.ndim)]
        variance, result_mean = broadcast(variance, flags), broadcast(avg, flags)
    return variance, result_mean


def welford(tv: TensorView, dims: Sequence[int]) -> tuple[TensorView, TensorView, TensorView]:
    """nvFuser's Welford: the mean, the sum of squared deviations (M2) and the count
    over `dims`, in one pass; avg and var_sum keep the input's dtype, n is Index."""
    op = "welford"
    if not tv.dtype.is_floating or tv.dtype.is_reduced_float:
        hint = "; cast it to Float first" if tv.dtype.is_reduced_float or tv.dtype.is_integral else ""
        raise FuserError(
            f"takes a Float or Double tensor, got {tv.dtype!r} input {tv_name(tv)}{hint}", op=op, tensor=tv_name(tv)
        )
    if tv.ndim == 0:
        raise FuserError(f"{tv_name(tv)} has no axis to reduce", op=op, tensor=tv_name(tv))
    axes = normalize_axes(list(dims), tv.ndim, op, tv)
    if not axes:
        raise FuserError("no reduction axis given", op=op, tensor=tv_name(tv))
    avg = TensorView(TensorDomain(_reduced_domain(tv, axes)), tv.dtype)
    var_sum = TensorView(TensorDomain(_reduced_domain(tv, axes)), tv.dtype)
    count = TensorView(TensorDomain(_reduced_domain(tv, axes)), DataType.Index)
    WelfordOp(avg, var_sum, count, tv)
    return avg, var_sum, count
