"""Element-wise ops on tensors and scalars, with nvFuser's type promotion.

Operands are promoted to a common type (half types compute in float), the casts
this needs become explicit `UnaryOp` casts in the IR, and lower-rank tensors gain
leading broadcast axes.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType, complex_of, promote_type, real_of
from fuser_core.ir.elementwise import BinaryOp, TernaryOp, UnaryOp
from fuser_core.ir.op_types import BinaryOpType, TernaryOpType, UnaryOpType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import LoadStoreOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.ops.utils import cast_constant, maybe_broadcast, new_like, new_output_tv, require_castable, tv_name


def _is_tensor(v: Val) -> bool:
    return isinstance(v, TensorView)


def _combine(higher: DataType, lower: DataType) -> DataType:
    """Merge the type of a higher-priority operand group with a lower one
    (nvFuser's combineCategories)."""
    if higher.is_complex:
        return higher
    if lower.is_complex:  # a float keeps its precision: Float with 1j is ComplexFloat
        return complex_of(higher) if higher.is_floating else lower
    if higher.is_floating:
        return higher
    if higher == DataType.Bool or lower.is_floating:
        return promote_type(higher, lower)
    return higher if higher != DataType.Null else lower


def common_type(
    operands: Sequence[Val], promotion: str, *, half_to_float: bool = True, op: str | None = None
) -> DataType:
    """nvFuser's `computeTypes`: tensors with axes decide first (reduced axes count, as
    nvFuser counts the logical domain), then 0-D tensors, then scalars (a Double scalar
    does not promote a Float tensor). `op` names the op in a FuserError."""
    dtypes = [v.dtype for v in operands]
    common = dtypes[0]
    if any(d != common for d in dtypes):
        try:
            common = _common_of_mixed(operands)
        except FuserError as err:
            tensor = next((tv_name(v) for v in operands if isinstance(v, TensorView)), None)
            raise FuserError(err.message, op=op, tensor=tensor) from None
    if promotion == "float" and (common.is_integral or common.is_boolean):
        common = DataType.Float
    if half_to_float and common.is_reduced_float:
        common = DataType.Float
    return common


def _common_of_mixed(operands: Sequence[Val]) -> DataType:
    dim, zero, wrapped = DataType.Null, DataType.Null, DataType.Null
    for v in operands:
        if isinstance(v, TensorView):
            if v.domain.logical:
                dim = promote_type(dim, v.dtype)
            else:
                zero = promote_type(zero, v.dtype)
        else:
            wrapped = promote_type(wrapped, DataType.Float if v.dtype.is_reduced_float else v.dtype)
    return _combine(dim, _combine(zero, wrapped))


def cast(value: Val, dtype: DataType, op: str = "cast") -> Val:
    """An explicit conversion; a tensor cast to its own type becomes a copy."""
    if isinstance(value, Scalar):
        if value.is_const and value.dtype.is_floating and dtype.is_integral:  # C conversion truncates
            value = sm.unary(UnaryOpType.Trunc, value)
        return cast_constant(dtype, value, op)
    require_castable(value, dtype, op)
    tv: TensorView = value  # type: ignore[assignment]
    out = new_like(tv, dtype)
    if tv.dtype == dtype:
        LoadStoreOp(out, tv)
    else:
        UnaryOp(UnaryOpType.Cast, out, tv)
    return out


def _promote_operand(value: Val, dtype: DataType, op: str = "cast") -> Val:
    """Cast to `dtype`, except scalars already of its category (nvFuser's optionalCast)."""
    if value.dtype == dtype:
        return value
    if isinstance(value, Scalar):
        same_kind = (
            (dtype.is_floating and value.dtype.is_floating)
            or (dtype.is_integral and value.dtype.is_integral)
            or (dtype.is_complex and value.dtype.is_complex)
        )
        return value if same_kind else cast_constant(dtype, value, op)
    return cast(value, dtype, op)


# PyTorch (and NumPy) have no `-` on bools: rejected when defined, with the alternative.
_NO_BOOL_OPS: dict[UnaryOpType | BinaryOpType, str] = {
    UnaryOpType.Neg: "negation of Bool values is not supported; use logical_not",
    BinaryOpType.Sub: "subtraction of Bool values is not supported; use bitwise_xor",
}


def _check_bool_arithmetic(op: UnaryOpType | BinaryOpType, dtype: DataType, value: Val) -> None:
    if dtype.is_boolean and op in _NO_BOOL_OPS:
        raise FuserError(_NO_BOOL_OPS[op], op=op.rule.name, tensor=tv_name(value))


# nvFuser's int-only ops (shifts, gcd) take integers, not bools.
_INT_ONLY = frozenset({BinaryOpType.Lshift, BinaryOpType.Rshift, BinaryOpType.Gcd})


def _check_real(op: UnaryOpType | BinaryOpType, operands: Sequence[Val]) -> None:
    for value in operands:
        if op.rule.real_only and value.dtype.is_complex:
            raise FuserError(f"is not defined for complex {tv_name(value)} ({value.dtype!r})", op=op.rule.name)


def unary(op: UnaryOpType, value: Val) -> Val:
    rule = op.rule
    name = rule.name
    _check_bool_arithmetic(op, value.dtype, value)
    _check_real(op, [value])
    if rule.promotion == "floating":
        if not value.dtype.is_floating:
            raise FuserError(
                f"needs a floating-point operand, got {tv_name(value)} ({value.dtype!r})",
                op=name,
                tensor=tv_name(value),
            )
    elif rule.promotion == "bool":
        value = cast(value, DataType.Bool, name) if value.dtype != DataType.Bool else value
    elif rule.promotion == "integral":
        if value.dtype.is_boolean:
            return unary(UnaryOpType.LogicalNot, value)
        if not value.dtype.is_integral:
            raise FuserError(f"needs an integer or bool operand, got {value.dtype!r}", op=name, tensor=tv_name(value))
    elif rule.promotion != "none":
        value = _promote_operand(value, common_type([value], rule.promotion, op=name), name)
    out_dtype = DataType.Bool if rule.bool_output else value.dtype
    if op == UnaryOpType.Abs and value.dtype.is_complex:  # the magnitude is real
        out_dtype = real_of(value.dtype)
    if isinstance(value, Scalar):
        return sm.unary(op, value)
    out = new_like(value, out_dtype)  # type: ignore[arg-type]
    UnaryOp(op, out, value)
    return out


def binary(op: BinaryOpType, lhs: Val, rhs: Val, promotion: str | None = None) -> Val:
    """`promotion` overrides the op's own rule (truediv is Div with "float")."""
    rule = op.rule
    promotion = promotion or rule.promotion
    _check_real(op, [lhs, rhs])
    if op in _INT_ONLY and not (lhs.dtype.is_integral and rhs.dtype.is_integral):
        raise FuserError(f"needs integer operands, got {lhs.dtype!r} and {rhs.dtype!r}", op=rule.name)
    if promotion == "bool":
        lhs, rhs = (cast(v, DataType.Bool, rule.name) if v.dtype != DataType.Bool else v for v in (lhs, rhs))
        dtype = DataType.Bool
    else:
        dtype = common_type([lhs, rhs], promotion, op=rule.name)
        if promotion == "integral" and not (dtype.is_integral or dtype.is_boolean):
            raise FuserError(f"needs integer or bool operands, got {lhs.dtype!r} and {rhs.dtype!r}", op=rule.name)
        if promotion == "float_only" and dtype not in (DataType.Float, DataType.Double):
            raise FuserError(
                f"operands must promote to Float or Double, got {lhs.dtype!r} and {rhs.dtype!r} ({dtype!r})",
                op=rule.name,
            )
        _check_bool_arithmetic(op, dtype, lhs)
        lhs, rhs = _promote_operand(lhs, dtype, rule.name), _promote_operand(rhs, dtype, rule.name)
    out_dtype = DataType.Bool if rule.bool_output else dtype
    if not (_is_tensor(lhs) or _is_tensor(rhs)):
        return sm.binary(op, lhs, rhs)  # type: ignore[arg-type]
    lhs, rhs = maybe_broadcast([lhs, rhs])
    out = new_output_tv([lhs, rhs], out_dtype, rule.name)
    BinaryOp(op, out, lhs, rhs)
    return out


def _ternary(op: TernaryOpType, a: Val, b: Val, c: Val, out_dtype: DataType) -> Val:
    vals = maybe_broadcast([a, b, c])
    if not any(_is_tensor(v) for v in vals):
        out: Val = Scalar(out_dtype)
    else:
        out = new_output_tv(vals, out_dtype, op.rule.name)
    TernaryOp(op, out, *vals)
    return out


def where(cond: Val, a: Val, b: Val) -> Val:
    if cond.dtype != DataType.Bool:
        raise FuserError(f"the condition must be Bool, got {cond.dtype!r}", op="where", tensor=tv_name(cond))
    if isinstance(cond, Scalar) and cond.is_const and not (_is_tensor(a) or _is_tensor(b)):
        return sm.where(cond, a, b)  # type: ignore[arg-type]
    dtype = common_type([a, b], "default", half_to_float=False, op="where")
    a, b = _promote_operand(a, dtype, "where"), _promote_operand(b, dtype, "where")
    return _ternary(TernaryOpType.Where, cond, a, b, dtype)


def lerp(start: Val, end: Val, weight: Val) -> Val:
    dtype = common_type([start, end, weight], "default", op="lerp")
    start, end, weight = (_promote_operand(v, dtype, "lerp") for v in (start, end, weight))
    return _ternary(TernaryOpType.Lerp, start, end, weight, promote_type(start.dtype, end.dtype))


def clamp(value: Val, low: Val, high: Val) -> Val:
    for bound, arg in ((low, "min"), (high, "max")):
        if not isinstance(bound, Scalar):
            raise FuserError(f"{arg} must be a scalar", op="clamp", tensor=tv_name(value))
    low, high = (_promote_operand(v, value.dtype, "clamp") for v in (low, high))
    return _ternary(TernaryOpType.Clamp, value, low, high, value.dtype)


def threshold(value: Val, thresh: Val, replacement: Val) -> Val:
    thresh, replacement = (_promote_operand(v, value.dtype, "threshold") for v in (thresh, replacement))
    return _ternary(TernaryOpType.Threshold, value, thresh, replacement, value.dtype)


def set_(tv: TensorView, op_type: str = "Set") -> TensorView:
    out = new_like(tv, tv.dtype)
    LoadStoreOp(out, tv, op_type)
    return out


def real(value: Val) -> Val:
    """The real part of a complex value (a real dtype); other values are copied, as
    nvFuser's `real` does."""
    if not value.dtype.is_complex:
        return set_(value) if isinstance(value, TensorView) else value
    return _complex_part(UnaryOpType.Real, value)


def imag(value: Val) -> Val:
    if not value.dtype.is_complex:
        raise FuserError(
            f"is only for complex values, got {tv_name(value)} ({value.dtype!r})", op="imag", tensor=tv_name(value)
        )
    return _complex_part(UnaryOpType.Imag, value)


def _complex_part(op: UnaryOpType, value: Val) -> Val:
    dtype = real_of(value.dtype)
    out: Val = new_like(value, dtype) if isinstance(value, TensorView) else Scalar(dtype)
    UnaryOp(op, out, value)
    return out


def _alpha(alpha: Val, op: str) -> Val:
    if isinstance(alpha, TensorView):
        raise FuserError(f"alpha must be a scalar, not tensor {tv_name(alpha)}", op=op, tensor=tv_name(alpha))
    return alpha


def add_alpha(lhs: Val, rhs: Val, alpha: Val, op: BinaryOpType = BinaryOpType.Add) -> Val:
    """`lhs + rhs * alpha` (or `-` for sub_alpha), the operands promoted together first."""
    name = "add_alpha" if op == BinaryOpType.Add else "sub_alpha"
    alpha = _alpha(alpha, name)
    dtype = common_type([lhs, rhs], "default", op=name)
    lhs, rhs, alpha = (_promote_operand(v, dtype, name) for v in (lhs, rhs, alpha))
    return binary(op, lhs, binary(BinaryOpType.Mul, rhs, alpha))


def addcmul(base: Val, a: Val, b: Val, value: Val) -> Val:
    """`base + a * (b * value)`, in nvFuser's order of operations."""
    value = _alpha(value, "addcmul")
    dtype = common_type([base, a, b], "default", op="addcmul")
    base, a, b, value = (_promote_operand(v, dtype, "addcmul") for v in (base, a, b, value))
    return binary(BinaryOpType.Add, base, binary(BinaryOpType.Mul, a, binary(BinaryOpType.Mul, b, value)))


def logical_right_shift(x: Val, shift: Val) -> Val:
    """Shift right filling with zeros, as nvFuser composes it: the arithmetic shift,
    with the sign bits it copied cleared again by a mask."""
    for v in (x, shift):
        if not v.dtype.is_integral:
            raise FuserError(
                f"needs integer operands, got {tv_name(v)} ({v.dtype!r})", op="logical_right_shift", tensor=tv_name(v)
            )
    bits = sm.const(64 if x.dtype == DataType.Int else 32, DataType.Int)
    neg_one, one, two = (sm.const(v, DataType.Int) for v in (-1, 1, 2))
    mask = where(
        binary(BinaryOpType.GE, shift, bits),
        neg_one,
        binary(BinaryOpType.Sub, binary(BinaryOpType.Pow, two, shift), one),
    )
    shifted_mask = binary(BinaryOpType.Lshift, mask, binary(BinaryOpType.Sub, bits, shift))
    shifted = binary(BinaryOpType.Rshift, x, shift)
    return where(unary(UnaryOpType.Signbit, x), binary(BinaryOpType.BitwiseXor, shifted_mask, shifted), shifted)
