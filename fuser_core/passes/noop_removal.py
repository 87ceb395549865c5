"""Removal of ops that compute nothing: a plain `Set` (never a `SegmenterSet`, which is a
user's segmentation hint), a reshape to the same shape, a squeeze or broadcast of no
axis, an expand that expands nothing. Their uses read the input instead. An op whose
output is a fusion output stays: an output must be a buffer of its own."""

from __future__ import annotations

from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_exprs import BroadcastOp, ExpandOp, LoadStoreOp, SqueezeOp, ViewOp
from fuser_core.ir.tensor_view import TensorView


def remove_noop_ops(fusion: Fusion) -> bool:
    outputs = {id(v) for v in fusion.outputs}
    changed = False
    for expr in fusion.exprs():
        out = expr.outputs[0] if expr.outputs else None
        if not isinstance(out, TensorView) or id(out) in outputs or not _is_noop(expr):
            continue
        fusion.replace_val(out, expr.inputs[0])
        fusion.remove_expr(expr)
        changed = True
    return changed


def _is_noop(expr: Expr) -> bool:
    if isinstance(expr, LoadStoreOp):
        return expr.op_type == "Set" and expr.permutation() is None
    if isinstance(expr, (SqueezeOp, BroadcastOp)):
        return not any(expr.flags)
    if isinstance(expr, (ViewOp, ExpandOp)):
        return _same_shape(expr.inputs[0], expr.outputs[0])  # type: ignore[arg-type]
    return False


def _same_shape(inp: TensorView, out: TensorView) -> bool:
    before, after = inp.logical_no_reductions(), out.logical_no_reductions()
    if len(before) != len(after):
        return False
    return all(
        a.iter_type == b.iter_type and _same_extent(a.maybe_expanded_extent, b.maybe_expanded_extent)
        for a, b in zip(before, after, strict=True)
    )


def _same_extent(a: object, b: object) -> bool:
    if a is b:
        return True
    return bool(a.is_const and b.is_const and a.value == b.value)  # type: ignore[attr-defined]
