"""Values on lanes in C's types: storage typing (rounded, widened for arithmetic), what a
never-written slot holds, C's operators and their operand types, and the device functions
a `Call` names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fuser_core.codegen.kernel_ir import Bin
from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType, promote_type, to_storage
from fuser_core.ir.op_types import BinaryOpType, OpRule, TernaryOpType, UnaryOpType

ScalarValue = int | float | bool


def _typed(value: Any, dtype: DataType) -> np.ndarray:
    """A value stored as `dtype` (rounded, fp8 saturated), as an array."""
    return np.asarray(to_storage(value, dtype))


def _widen(value: np.ndarray) -> np.ndarray:
    """Half, bfloat16 and fp8 values compute in float."""
    if value.dtype.kind == "V" or value.dtype == np.float16:
        return value.astype(np.float32)
    return value


def _poison(dtype: DataType) -> Any:
    """What a never-written register or shared slot holds, so that tests see it."""
    if dtype.is_floating or dtype.is_complex:
        return np.nan
    if dtype.is_integral:
        return np.iinfo(dtype.numpy).min
    return True


# -- operators ------------------------------------------------------------------------

_ARITHMETIC: dict[str, Callable[..., Any]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "&": np.bitwise_and,
    "|": np.bitwise_or,
    "^": np.bitwise_xor,
    ">>": np.right_shift,
    "<<": np.left_shift,
}
_COMPARISONS: dict[str, Callable[..., Any]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
# C's `/` and `%`: integers truncate toward zero (the reference's own rules).
_DIVISIONS: dict[str, Callable[..., Any]] = {"/": BinaryOpType.Div.value.numpy, "%": BinaryOpType.Mod.value.numpy}
# Operators whose bool operands C promotes to int.
_INT_PROMOTING = frozenset({"+", "-", "*", "/", "%", ">>", "<<"})

# Device functions by printed name, from the op tables: a new op there works here; and
# the runtime header's own forms of an op, by the op whose values they compute.
_DEVICE_FUNCTIONS: dict[str, OpRule] = {
    **{rule.name: rule for kind in (UnaryOpType, BinaryOpType, TernaryOpType) for rule in (op.value for op in kind)},
    "fuser_div_invariant": BinaryOpType.Div.value,
}


def device_function(name: str) -> OpRule | None:
    """The rule of a `Call.fn`: an op's printed name, or it with the `f` of a float variant."""
    rule = _DEVICE_FUNCTIONS.get(name)
    if rule is None and name.endswith("f"):
        base = _DEVICE_FUNCTIONS.get(name[:-1])
        if base is not None and base.float_suffix:
            rule = base
    return rule


def _operand_type(node: Bin) -> np.dtype:
    """C's usual arithmetic conversions: the operands' common type (half types in float;
    bools of arithmetic become int)."""
    try:
        common = promote_type(node.a.dtype, node.b.dtype)
    except FuserError:  # e.g. uint64 with a signed type: C goes unsigned; trust the node
        common = node.dtype
    if common == DataType.Bool and node.op in _INT_PROMOTING:
        common = DataType.Int32
    return common.compute_numpy
