"""Consecutive-cast folding: `cast(cast(x, A), B)` becomes `cast(x, B)` when that cannot
change a single value.

That holds when A represents every value of x's type exactly: the first cast then loses
nothing, and converting the same value from A or straight from x's type rounds (or
truncates, or saturates) once, the same way. Two conversions are exceptions:

- Double to fp8 rounds through Half (`__double2e4m3`), so the value must already be a
  Half for the fold to keep the result;
- `x -> A -> x` is a copy (no-op removal then drops it where it may), except where the
  way back saturates what x holds: fp8 conversions clamp infinity (e5m2 has one).

A first cast with other uses stays and only this use is rewired; one left without uses
is removed, so no later pass sees a dead use. Only nvFuser's own direct conversions are
made (`is_supported_cast`).
"""

from __future__ import annotations

from fuser_core.ir.base import Expr
from fuser_core.ir.dtype import FP8_MAX, DataType
from fuser_core.ir.elementwise import UnaryOp, is_supported_cast
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.op_types import UnaryOpType
from fuser_core.ir.tensor_exprs import LoadStoreOp
from fuser_core.ir.tensor_view import TensorView

_FP8 = tuple(FP8_MAX)
# Which types hold every value of a type exactly (besides the type itself and Bool,
# which every integer and float type holds).
_EXACT_IN: dict[DataType, tuple[DataType, ...]] = {
    **{fp8: (DataType.Half, DataType.BFloat16, DataType.Float, DataType.Double) for fp8 in _FP8},
    DataType.Half: (DataType.Float, DataType.Double),
    DataType.BFloat16: (DataType.Float, DataType.Double),
    DataType.Float: (DataType.Double,),
    DataType.Int32: (DataType.Int, DataType.Double),
}
# Types whose infinities a saturating (fp8) conversion would clamp.
_HAS_INFINITY = frozenset(dt for dt in DataType if dt.is_floating and dt != DataType.Float8_e4m3fn)


def holds_exactly(wide: DataType, narrow: DataType) -> bool:
    """Whether every value of `narrow` is a value of `wide`."""
    if narrow == wide:
        return True
    if narrow == DataType.Bool:
        return wide.is_integral or wide.is_floating
    return wide in _EXACT_IN.get(narrow, ())


def folds(source: DataType, middle: DataType, target: DataType) -> bool:
    """Whether `source -> middle -> target` gives what `source -> target` gives."""
    if not holds_exactly(middle, source) or not is_supported_cast(source, target):
        return False
    if middle == DataType.Double and target in FP8_MAX and not holds_exactly(DataType.Half, source):
        return False  # __double2e4m3/__double2e5m2 round to Half first
    return not (target == source and target in FP8_MAX and source in _HAS_INFINITY)


def fold_consecutive_casts(fusion: Fusion) -> bool:
    outputs = {id(v) for v in fusion.outputs}
    changed = False
    # Producers first: a folded cast is the next one's inner cast, so chains fold whole.
    for outer in fusion.exprs():
        inner = outer.input.definition if _is_tensor_cast(outer) else None
        if inner is None or not _is_tensor_cast(inner):
            continue
        if folds(inner.input.dtype, inner.output.dtype, outer.output.dtype):
            _fold(fusion, inner, outer, keep=id(inner.output) in outputs)
            changed = True
    return changed


def _is_tensor_cast(expr: Expr) -> bool:
    return isinstance(expr, UnaryOp) and expr.op_type == UnaryOpType.Cast and isinstance(expr.output, TensorView)


def _fold(fusion: Fusion, inner: Expr, outer: Expr, *, keep: bool) -> None:
    """Make `outer` read `inner`'s source; drop `inner` if that was its last use and it
    is not an output (`keep`)."""
    source, out = inner.input, outer.output
    if out.dtype == source.dtype:
        fusion.remove_expr(outer)  # a cast to the same type does not exist: a copy
        with fusion.guard():
            LoadStoreOp(out, source)  # type: ignore[arg-type]
    else:
        outer.replace_input(inner.output, source)
    if not inner.output.uses and not keep:
        fusion.remove_expr(inner)  # now dead: keep the use lists live-only
