"""Arithmetic on scalar Vals that simplifies as it builds.

Constants fold (`2 * 3` is `6`), identities vanish (`x + 0` is `x`, `x * 1` is `x`)
and a value is never cast to the type it already has. Extents, pad widths and slice
bounds are built with these, so static shapes stay literal constants in the IR.
"""

from __future__ import annotations

import numpy as np

from fuser_core.ir.base import current_fusion
from fuser_core.ir.dtype import DataType, promote_type
from fuser_core.ir.elementwise import BinaryOp, TernaryOp, UnaryOp
from fuser_core.ir.op_types import BinaryOpType, TernaryOpType, UnaryOpType
from fuser_core.ir.scalar import Scalar, normalize_value

ScalarLike = Scalar | int | float | bool


def const(value: int | float | bool, dtype: DataType | None = None) -> Scalar:
    """A constant of the current fusion (the shared 0 and 1 for Index)."""
    fusion = current_fusion()
    if dtype is None:
        dtype = (
            DataType.Bool
            if isinstance(value, bool)
            else (DataType.Index if isinstance(value, int) else DataType.Double)
        )
    if dtype == DataType.Index and value in (0, 1) and not isinstance(value, bool):
        return fusion.zero_val() if value == 0 else fusion.one_val()
    return Scalar(dtype, value)


def as_scalar(value: ScalarLike, dtype: DataType = DataType.Index) -> Scalar:
    return value if isinstance(value, Scalar) else const(value, dtype)


def cast(dtype: DataType, value: ScalarLike) -> Scalar:
    v = as_scalar(value, dtype)
    if v.dtype == dtype:
        return v
    if v.is_const:
        return const(normalize_value(v.value, dtype), dtype)  # type: ignore[arg-type]
    out = Scalar(dtype)
    UnaryOp(UnaryOpType.Cast, out, v)
    return out


def _fold(rule_fn: object, *values: object) -> object:
    with np.errstate(all="ignore"):
        return np.asarray(rule_fn(*values)).item()  # type: ignore[operator]


def unary(op: UnaryOpType, value: ScalarLike) -> Scalar:
    v = as_scalar(value)
    out_dtype = DataType.Bool if op.rule.bool_output else v.dtype
    if v.is_const:
        return const(normalize_value(_fold(op.rule.numpy, v.value), out_dtype), out_dtype)  # type: ignore[arg-type]
    out = Scalar(out_dtype)
    UnaryOp(op, out, v)
    return out


def binary(op: BinaryOpType, lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    a, b = _pair(lhs, rhs)
    operand_dtype = promote_type(a.dtype, b.dtype)
    out_dtype = DataType.Bool if op.rule.bool_output else operand_dtype
    if a.is_const and b.is_const:
        folded = _fold(op.rule.numpy, a.value, b.value)
        return const(normalize_value(folded, out_dtype), out_dtype)  # type: ignore[arg-type]
    out = Scalar(out_dtype)
    BinaryOp(op, out, cast(operand_dtype, a), cast(operand_dtype, b))
    return out


def _pair(lhs: ScalarLike, rhs: ScalarLike) -> tuple[Scalar, Scalar]:
    """Literals take the type of the other operand."""
    if isinstance(lhs, Scalar) and not isinstance(rhs, Scalar):
        return lhs, const(rhs, lhs.dtype if not isinstance(rhs, float) else DataType.Double)
    if isinstance(rhs, Scalar) and not isinstance(lhs, Scalar):
        return const(lhs, rhs.dtype if not isinstance(lhs, float) else DataType.Double), rhs
    return as_scalar(lhs), as_scalar(rhs)


def add(lhs: ScalarLike | None, rhs: ScalarLike) -> Scalar:
    if lhs is None:
        return as_scalar(rhs)
    a, b = _pair(lhs, rhs)
    if a.is_zero_int():
        return b
    if b.is_zero_int():
        return a
    return binary(BinaryOpType.Add, a, b)


def sub(lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    a, b = _pair(lhs, rhs)
    if b.is_zero_int():
        return a
    if a is b:
        return const(0, a.dtype)
    return binary(BinaryOpType.Sub, a, b)


def mul(lhs: ScalarLike | None, rhs: ScalarLike) -> Scalar:
    if lhs is None:
        return as_scalar(rhs)
    a, b = _pair(lhs, rhs)
    if a.is_one_int():
        return b
    if b.is_one_int():
        return a
    if a.is_zero_int() or b.is_zero_int():
        return const(0, promote_type(a.dtype, b.dtype))
    return binary(BinaryOpType.Mul, a, b)


def div(lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    a, b = _pair(lhs, rhs)
    if b.is_one_int():
        return a
    return binary(BinaryOpType.Div, a, b)


def ceil_div(lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    a, b = _pair(lhs, rhs)
    if b.is_one_int():
        return a
    return binary(BinaryOpType.CeilDiv, a, b)


def neg(value: ScalarLike) -> Scalar:
    return unary(UnaryOpType.Neg, value)


def maximum(lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    return binary(BinaryOpType.Max, lhs, rhs)


def minimum(lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    return binary(BinaryOpType.Min, lhs, rhs)


def lt(lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    return binary(BinaryOpType.LT, lhs, rhs)


def ge(lhs: ScalarLike, rhs: ScalarLike) -> Scalar:
    return binary(BinaryOpType.GE, lhs, rhs)


def where(cond: ScalarLike, a: ScalarLike, b: ScalarLike) -> Scalar:
    c = as_scalar(cond, DataType.Bool)
    if c.is_const:
        return as_scalar(a if c.value else b)
    x, y = _pair(a, b)
    out_dtype = promote_type(x.dtype, y.dtype)
    out = Scalar(out_dtype)
    TernaryOp(TernaryOpType.Where, out, c, cast(out_dtype, x), cast(out_dtype, y))
    return out


def product(values: list[Scalar]) -> Scalar:
    total: Scalar | None = None
    for v in values:
        total = mul(total, v)
    return total if total is not None else current_fusion().one_val()


def rebuild(expr: object, inputs: list[Scalar]) -> Scalar:
    """The scalar `expr` computes, recomputed from new `inputs` (folding constants)."""
    op = getattr(expr, "op_type", None)
    if op == UnaryOpType.Cast:
        return cast(expr.output.dtype, inputs[0])  # type: ignore[attr-defined]
    if isinstance(op, UnaryOpType):
        return unary(op, inputs[0])
    if isinstance(op, BinaryOpType):
        return binary(op, inputs[0], inputs[1])
    if op == TernaryOpType.Where:
        return where(inputs[0], inputs[1], inputs[2])
    if isinstance(op, TernaryOpType):
        out = Scalar(expr.output.dtype)  # type: ignore[attr-defined]
        TernaryOp(op, out, *inputs)
        return out
    raise TypeError(f"cannot rebuild scalar expression {expr}")
