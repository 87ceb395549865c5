"""Consecutive-cast folding: `cast(cast(x, A), B)` becomes `cast(x, B)` when A holds
every value of x's type exactly, so the first cast loses nothing and the result is the
same single rounding. x -> A -> x with such an A is a copy (no-op removal then drops it
where it may). A first cast with other uses stays; only this use is rewired."""

from __future__ import annotations

from fuser_core.ir.dtype import DataType
from fuser_core.ir.elementwise import UnaryOp, is_supported_cast
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.op_types import UnaryOpType
from fuser_core.ir.tensor_exprs import LoadStoreOp
from fuser_core.ir.tensor_view import TensorView

_FP8 = (DataType.Float8_e4m3fn, DataType.Float8_e5m2)
# Which types hold every value of a type exactly (besides the type itself).
_EXACT_IN: dict[DataType, tuple[DataType, ...]] = {
    **{fp8: (DataType.Half, DataType.BFloat16, DataType.Float, DataType.Double) for fp8 in _FP8},
    DataType.Half: (DataType.Float, DataType.Double),
    DataType.BFloat16: (DataType.Float, DataType.Double),
    DataType.Float: (DataType.Double,),
    DataType.Int32: (DataType.Int, DataType.Double),
}


def holds_exactly(wide: DataType, narrow: DataType) -> bool:
    if narrow == wide:
        return True
    if narrow == DataType.Bool:
        return wide.is_integral or wide.is_floating
    return wide in _EXACT_IN.get(narrow, ())


def _is_cast(expr: object) -> bool:
    return isinstance(expr, UnaryOp) and expr.op_type == UnaryOpType.Cast


def fold_consecutive_casts(fusion: Fusion) -> bool:
    changed = False
    for outer in fusion.exprs():
        if not _is_cast(outer) or not isinstance(outer.output, TensorView):
            continue
        inner = outer.input.definition
        if not _is_cast(inner):
            continue
        source = inner.input  # type: ignore[union-attr]
        middle, target = outer.input.dtype, outer.output.dtype
        if not holds_exactly(middle, source.dtype):
            continue
        if target == source.dtype:
            out = outer.output
            fusion.remove_expr(outer)
            with fusion.guard():
                LoadStoreOp(out, source)  # type: ignore[arg-type]
            changed = True
        elif is_supported_cast(source.dtype, target):
            outer.replace_input(outer.input, source)
            changed = True
    return changed
