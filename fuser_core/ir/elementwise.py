"""Element-wise expressions (unary, binary, ternary) on tensors or scalars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.errors import InternalError
from fuser_core.ir.base import Expr, ScalarEvaluator, Val
from fuser_core.ir.dtype import FP8_MAX, DataType, real_of, saturate, to_storage
from fuser_core.ir.op_types import BinaryOpType, OpRule, TernaryOpType, UnaryOpType
from fuser_core.ir.scalar import normalize_value

# Line layout of a tensor op: the output, then `   = ...` with continuation lines
# indented by two spaces, as nvFuser prints them.
_TV_ASSIGN = "\n   = "
_TV_CONT = "\n  "


# C spellings of the cast targets that are converted with a C cast.
_C_CAST_TYPES = {
    DataType.Bool: "bool",
    DataType.Double: "double",
    DataType.Float: "float",
    DataType.Int: "int64_t",
    DataType.Int32: "int32_t",
    DataType.UInt64: "uint64_t",
    DataType.Index: "nvfuser_index_t",
    DataType.ComplexFloat: "std::complex<float>",
    DataType.ComplexDouble: "std::complex<double>",
}
_FP8 = frozenset({DataType.Float8_e4m3fn, DataType.Float8_e5m2})
# fp8 converts only to and from these (and nvFuser has no fp8 to fp8 conversion).
_FP8_PARTNERS = frozenset({DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16})


def _cast_rule(src: DataType, dst: DataType) -> str | None:
    """nvFuser's `supported_casts2string` (csrc/type.cpp, 2024) as a rule; None where
    nvFuser has no conversion (castOp refuses it)."""
    short_src, short_dst = src.value.short, dst.value.short
    if src == dst or DataType.Null in (src, dst):
        return None
    if not (src.is_reduced_float or dst.is_reduced_float):  # a C cast, of the real part of a complex
        real_part = "std::real" if src.is_complex and not dst.is_complex else ""
        return f"({_C_CAST_TYPES[dst]}){real_part}"
    if src in _FP8 or dst in _FP8:
        partner = dst if src in _FP8 else src
        return f"__{short_src}2{short_dst}" if partner in _FP8_PARTNERS else None
    if dst.is_complex:  # from Half or BFloat16: widen, then a C cast to complex
        return f"({_C_CAST_TYPES[dst]})__{short_src}2{real_of(dst).value.short}"
    if src.is_complex:
        return f"__real_then_2{short_dst}"
    if src.is_integral and dst.is_reduced_float:
        return f"__int2{short_dst}"
    return f"__{short_src}2{short_dst}"


CAST_NAMES: dict[tuple[DataType, DataType], str] = {
    (src, dst): name for src in DataType for dst in DataType if (name := _cast_rule(src, dst)) is not None
}


def is_supported_cast(src: DataType, dst: DataType) -> bool:
    """Whether nvFuser converts `src` to `dst` (a cast to the same type is a copy)."""
    return src == dst or (src, dst) in CAST_NAMES


def cast_name(src: DataType, dst: DataType) -> str:
    """nvFuser's name for a conversion: `__float2bfloat`, `(double)`, `(float)std::real`."""
    name = CAST_NAMES.get((src, dst))
    if name is None:
        raise InternalError(f"cast: nvFuser has no conversion from {src!r} to {dst!r}; the op builder must refuse it")
    return name


class ElementwiseOp(Expr):
    """Shared printing and evaluation of unary, binary and ternary ops."""

    op_type: UnaryOpType | BinaryOpType | TernaryOpType

    @property
    def rule(self) -> OpRule:
        return self.op_type.value

    @property
    def op_name(self) -> str:  # type: ignore[override]
        return self.rule.name

    def _func_name(self) -> str:
        suffix = "f" if self.output.dtype == DataType.Float and self.rule.float_suffix else ""
        return self.rule.name + suffix

    def _body(self, operands: list[str], tensor_layout: bool) -> str:
        raise NotImplementedError

    def to_string(self) -> str:
        tensor_layout = self.is_tensor_op()
        body = self._body([v.to_string() for v in self.inputs], tensor_layout)
        sep = _TV_ASSIGN if tensor_layout else " = "
        return f"{self.output.to_string()}{sep}{body};\n"

    def to_inline_string(self) -> str:
        return self._body([v.to_inline_string() for v in self.inputs], False)

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        out_dtype = self.output.dtype
        args = [_widen(v) for v in values]
        if out_dtype.is_integral and not self.rule.bool_output:
            # A kernel converts each integer operand to the result's type first (C's
            # conversion wraps): an int64 scalar mask 0xE0000000 xor an int32 tensor.
            args = [_wrap_integer(v, out_dtype) for v in args]
        with np.errstate(all="ignore"):
            result = self._compute(args)
        return [store(result, out_dtype, is_tensor=self.is_tensor_op())]

    def _compute(self, args: list[Any]) -> Any:
        return self.rule.numpy(*args)


class UnaryOp(ElementwiseOp):
    def __init__(self, op_type: UnaryOpType, out: Val, inp: Val) -> None:
        self.op_type = op_type
        super().__init__([inp], [out])

    def _body(self, operands: list[str], tensor_layout: bool) -> str:
        (operand,) = operands
        if self.rule.inline:
            return f"{self.rule.inline}{operand}"
        if self.op_type == UnaryOpType.Cast:
            return f"{cast_name(self.input.dtype, self.output.dtype)}({operand})"
        return f"{self._func_name()}({operand})"

    def _compute(self, args: list[Any]) -> Any:
        if self.op_type == UnaryOpType.Cast:
            return _convert(args[0], self.input.dtype, self.output.dtype)
        return self.rule.numpy(*args)


class BinaryOp(ElementwiseOp):
    def __init__(self, op_type: BinaryOpType, out: Val, lhs: Val, rhs: Val) -> None:
        self.op_type = op_type
        super().__init__([lhs, rhs], [out])

    @property
    def lhs(self) -> Val:
        return self.inputs[0]

    @property
    def rhs(self) -> Val:
        return self.inputs[1]

    def _body(self, operands: list[str], tensor_layout: bool) -> str:
        lhs, rhs = operands
        cont = _TV_CONT if tensor_layout else ""
        if self.rule.inline:
            return f"{lhs}{cont} {self.rule.inline} {rhs}"
        return f"{self._func_name()}({lhs}{cont}, {rhs})"


class TernaryOp(ElementwiseOp):
    def __init__(self, op_type: TernaryOpType, out: Val, a: Val, b: Val, c: Val) -> None:
        self.op_type = op_type
        super().__init__([a, b, c], [out])

    def _body(self, operands: list[str], tensor_layout: bool) -> str:
        a, b, c = operands
        cont = _TV_CONT if tensor_layout else ""
        return f"{self.rule.name}({a}{cont}, {b}{cont}, {c})"


_NARROW_FLOATS = frozenset(dt.numpy for dt in DataType if dt.is_reduced_float)


def _widen(value: Any) -> Any:
    """Narrow float arrays are computed in float32, as nvFuser's kernels do."""
    if isinstance(value, np.ndarray) and value.dtype in _NARROW_FLOATS:
        return value.astype(np.float32)
    return value


def _wrap_integer(value: Any, dtype: DataType) -> Any:
    """An integer operand as `dtype` holds it, wrapped modulo its width as C converts it;
    other operands (bools, floats) unchanged."""
    if isinstance(value, bool | np.bool_):
        return value
    if isinstance(value, int | np.integer):
        return np.array(int(value) & ((1 << (8 * dtype.itemsize)) - 1), dtype=np.uint64).astype(dtype.numpy)[()]
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.dtype != dtype.numpy:
        return value.astype(dtype.numpy)
    return value


def _convert(value: Any, src: DataType, dst: DataType) -> Any:
    """The value a cast computes, before it is stored as `dst`."""
    if src.is_complex and not dst.is_complex:  # `std::real`: the imaginary part is dropped
        value = np.real(value)
    if dst.is_integral and not (src.is_integral or src.is_boolean):
        return _float_to_integer(value, dst)
    if src == DataType.Double and dst in FP8_MAX:  # __double2e4m3 rounds to half first
        return np.asarray(value).astype(np.float16)
    return value


def _float_to_integer(value: Any, dst: DataType) -> np.ndarray:
    """A float converted to an integer type as a kernel converts it on the GPU (PTX
    `cvt.rzi`, what a C cast compiles to, and what torch computes on CUDA): toward zero,
    saturated to the type's range (+-inf too), NaN to 0. NumPy's own conversion gives the
    x86 answer, the smallest integer, for NaN and for anything out of range."""
    info = np.iinfo(dst.numpy)
    with np.errstate(invalid="ignore"):
        wide = np.trunc(np.asarray(value, dtype=np.float64))
        # float(info.max) may round up past it (2**63 - 1 -> 2**63): compare, then place
        above, below = wide >= float(info.max), wide <= float(info.min)
        inside = np.where(np.isnan(wide) | above | below, 0, wide).astype(dst.numpy)
    return np.where(above, info.max, np.where(below, info.min, inside)).astype(dst.numpy)


def store(result: Any, dtype: DataType, *, is_tensor: bool) -> Any:
    """Round a computed result to the type it is stored in (fp8 saturates)."""
    if not is_tensor:
        return normalize_value(np.asarray(saturate(result, dtype)).item(), dtype)
    return to_storage(result, dtype)
