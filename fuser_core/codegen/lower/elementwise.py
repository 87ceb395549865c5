"""Element-wise ops as kernel expressions, typed as C computes them: the compute dtype of
an op (half types in float, comparisons in their operands' widest type), casts of nodes and
constants."""

from __future__ import annotations

from fuser_core.codegen import kernel_ir as k
from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType
from fuser_core.ir.elementwise import BinaryOp, TernaryOp, UnaryOp
from fuser_core.ir.op_types import UnaryOpType
from fuser_core.ir.tensor_exprs import BroadcastOp, ExpandOp
from fuser_core.ir.tensor_view import TensorView


def _elementwise(expr: UnaryOp | BinaryOp | TernaryOp, operands: list[k.Node]) -> k.Node:
    out = expr.output
    out_dtype = out.dtype
    if isinstance(expr, UnaryOp) and expr.op_type == UnaryOpType.Cast:
        return k.Cast(out_dtype, operands[0])
    rule = expr.rule
    # A scalar operand of a tensor op is the tensor's type at run time (nvFuser's
    # optionalCast keeps a Double scalar beside a Float tensor): only tensors set the type.
    tensors = [v.dtype for v in expr.inputs if isinstance(v, TensorView)]
    compute = _compute_dtype(out_dtype, tensors or [v.dtype for v in expr.inputs], rule.bool_output)
    args = [a if a.dtype == compute else _cast(compute, a) for a in operands]
    if isinstance(expr, TernaryOp) and rule.name == "where":
        args[0] = operands[0] if operands[0].dtype == DataType.Bool else _cast(DataType.Bool, operands[0])
    result_dtype = DataType.Bool if rule.bool_output else (compute if out_dtype.is_reduced_float else out_dtype)
    if rule.bool_output:
        result_dtype = DataType.Bool
    node: k.Node
    if rule.inline and len(args) == 2:
        op = rule.inline
        if op == "%" and compute.is_floating:
            node = k.Call(result_dtype, "fmod", tuple(args))
        elif op == "/" and _divides_by_a_row_value_into_a_narrow_output(expr, compute):
            node = _times_reciprocal(result_dtype, args[0], args[1])
        elif op == "/" and compute == DataType.Float and _divisor_is_the_same_along_a_row(expr, args[1]):
            node = k.Call(result_dtype, "fuser_div_invariant", (args[0], args[1]))
        else:
            node = k.Bin(result_dtype, op, args[0], args[1])
    elif rule.inline and len(args) == 1:
        node = k.Un(result_dtype, rule.inline, args[0])
    elif rule.name == "pow" and (product := _small_power(result_dtype, args)) is not None:
        node = product
    else:
        node = k.Call(result_dtype, rule.name, tuple(args))
    return node if node.dtype == out_dtype else _cast(out_dtype, node)


# A floating pow by one of these literal exponents is spelled as multiplications (as
# Inductor does): powf is dozens of instructions and makes GeLU's backward compute-bound.
_MULTIPLIED_EXPONENTS = (2, 3, 4)


def _small_power(dtype: DataType, args: list[k.Node]) -> k.Node | None:
    base, exponent = args
    if not dtype.is_floating or not isinstance(exponent, k.Const) or isinstance(exponent.value, bool | complex):
        return None
    if exponent.value not in _MULTIPLIED_EXPONENTS:
        return None
    square = k.Bin(dtype, "*", base, base)
    if exponent.value == 2:
        return square
    if exponent.value == 3:
        return k.Bin(dtype, "*", square, base)
    return k.Bin(dtype, "*", square, square)  # two roundings, as for the cube


def _divisor_is_the_same_along_a_row(expr: UnaryOp | BinaryOp | TernaryOp, divisor: k.Node) -> bool:
    """Whether a division of the elements of a row is by a run-time scalar or by a value
    broadcast along the innermost axis (a row's sum or max): then the divisor's reciprocal
    is computed once per row (runtime header's fuser_div_invariant, the bits of IEEE
    division). A literal divisor is left to the compiler; a reduction's result (a mean's
    sum over N), a row value itself, is divided once per row anyway."""
    numerator, value = expr.inputs[0], expr.inputs[1]
    if not isinstance(numerator, TensorView) or any(i.is_reduction for i in numerator.logical):
        return False
    if _broadcast_along_rows(numerator):  # a keepdim mean: itself a row value
        return False
    if not isinstance(value, TensorView):
        return not isinstance(divisor, k.Const)
    return _broadcast_along_rows(value)


def _broadcast_along_rows(value: TensorView) -> bool:
    """Whether a tensor is a broadcast whose innermost axis is new (after the expands of
    broadcast_in_dim to the full shape), so it is the same all along a row."""
    broadcast = value.definition
    while isinstance(broadcast, ExpandOp):
        broadcast = broadcast.inputs[0].definition
    return isinstance(broadcast, BroadcastOp) and bool(broadcast.flags) and broadcast.flags[-1]


def _divides_by_a_row_value_into_a_narrow_output(expr: UnaryOp | BinaryOp | TernaryOp, compute: DataType) -> bool:
    """Whether a float division is by a value broadcast along the innermost axis (softmax's
    row sum), into a quotient only ever cast to a 16-bit float: then it is spelled as a
    multiplication by the reciprocal, which the compiler computes once per row instead of
    an IEEE division per element (softmax 125 -> 114 us on the H100). The product is
    within 1.5 float ulp of the quotient (_times_reciprocal), far inside the narrow
    type's rounding."""
    divisor, quotient = expr.inputs[1], expr.output
    if compute != DataType.Float or not isinstance(divisor, TensorView) or not _broadcast_along_rows(divisor):
        return False
    if not quotient.uses or quotient in quotient.fusion.outputs:
        return False
    return all(
        isinstance(use, UnaryOp) and use.op_type == UnaryOpType.Cast and use.output.dtype.is_reduced_float
        for use in quotient.uses
    )


# |b| outside [2^-100, 2^100] is scaled by a power of two before its reciprocal: 1 / b
# would overflow to inf (|b| < 2^-128) or lose bits as a subnormal (|b| > 2^126).
_RECIPROCAL_RANGE = 2.0**100


def _times_reciprocal(dtype: DataType, a: k.Node, b: k.Node) -> k.Node:
    """a / b as (a * s) * (1 / (b * s)), s a power of two that is 1 unless |b| is extreme:
    everything but the two products depends on b alone, so the compiler computes it once
    per row. The same as a / b at zeros, infinities and NaNs; within 1.5 ulp elsewhere."""
    tiny, huge = k.Const(dtype, 1.0 / _RECIPROCAL_RANGE), k.Const(dtype, _RECIPROCAL_RANGE)
    small = k.Bin(
        DataType.Bool, "&&", k.Bin(DataType.Bool, "<", b, tiny), k.Bin(DataType.Bool, ">", b, k.Un(dtype, "-", tiny))
    )
    large = k.Bin(
        DataType.Bool, "||", k.Bin(DataType.Bool, ">", b, huge), k.Bin(DataType.Bool, "<", b, k.Un(dtype, "-", huge))
    )
    scale = k.Call(dtype, "where", (small, huge, k.Call(dtype, "where", (large, tiny, k.Const(dtype, 1.0)))))
    reciprocal = k.Bin(dtype, "/", k.Const(dtype, 1.0), k.Bin(dtype, "*", b, scale))
    return k.Bin(dtype, "*", k.Bin(dtype, "*", a, scale), reciprocal)


def _cast(dtype: DataType, node: k.Node) -> k.Node:
    if isinstance(node, k.Const):
        return k.Const(dtype, _convert_const(node.value, dtype))
    return k.Cast(dtype, node)


def _convert_const(value: int | float | bool | complex, dtype: DataType) -> int | float | bool:
    if dtype.is_complex:  # a refusal, so the group runs on the host (the printer has no complex types)
        raise FuserError(f"{dtype!r} has no CUDA code generation yet", op="codegen")
    if isinstance(value, complex):  # a cast to a real type keeps the real part, as std::real
        value = value.real
    if dtype.is_boolean:
        return bool(value)
    if dtype.is_integral:
        return int(value)
    return float(value)


def _compute_dtype(out: DataType, inputs: list[DataType], bool_output: bool) -> DataType:
    if not bool_output:
        return DataType.Float if out.is_reduced_float else out
    tensor_types = [t for t in inputs if t != DataType.Null]
    best = tensor_types[0]
    for t in tensor_types[1:]:
        if _rank(t) > _rank(best):
            best = t
    return DataType.Float if best.is_reduced_float else best


def _rank(dtype: DataType) -> int:
    order = [
        DataType.Bool,
        DataType.Int32,
        DataType.Int,
        DataType.Index,
        DataType.Half,
        DataType.BFloat16,
        DataType.Float,
        DataType.Double,
    ]
    return order.index(dtype) if dtype in order else 0
