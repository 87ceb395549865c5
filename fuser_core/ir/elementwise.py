"""Element-wise expressions (unary, binary, ternary) on tensors or scalars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.ir.base import Expr, ScalarEvaluator, Val
from fuser_core.ir.dtype import DataType
from fuser_core.ir.op_types import BinaryOpType, OpRule, TernaryOpType, UnaryOpType
from fuser_core.ir.scalar import normalize_value

# Line layout of a tensor op: the output, then `   = ...` with continuation lines
# indented by two spaces, as nvFuser prints them.
_TV_ASSIGN = "\n   = "
_TV_CONT = "\n  "


def cast_name(src: DataType, dst: DataType) -> str:
    """nvFuser's name for a conversion: `__float2bfloat`, `(double)`, `(nvfuser_index_t)`."""
    if src.is_reduced_float or dst.is_reduced_float:
        src_short = "int" if src.is_integral and dst.is_reduced_float else src.value.short
        return f"__{src_short}2{dst.value.short}"
    return f"({dst.cuda})"


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
            if self.output.dtype.is_integral and self.input.dtype.is_floating:
                return np.trunc(args[0])  # C conversion; scalars would otherwise refuse fractions
            return args[0]
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


def store(result: Any, dtype: DataType, *, is_tensor: bool) -> Any:
    """Round a computed result to the type it is stored in."""
    if not is_tensor:
        return normalize_value(np.asarray(result).item(), dtype)
    return np.asarray(result).astype(dtype.numpy, copy=False)
