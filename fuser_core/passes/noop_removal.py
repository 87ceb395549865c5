"""Removal of ops that compute nothing: a plain `Set` with no permutation (never a
`SegmenterSet`: that is a user's segmentation hint), a reshape to the same shape, a
squeeze or a broadcast of no axis, an expand that expands nothing. Their uses, and the
output list, read the op's input instead; names are kept, nothing is renumbered.

An output must be a buffer of its own: the op stays when its output is a fusion output
and its input is a fusion input (the output would alias the caller's data) or already a
fusion output (two outputs would share one buffer).
"""

from __future__ import annotations

from fuser_core.ir.base import Expr, Val
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import BroadcastOp, ExpandOp, LoadStoreOp, SqueezeOp, ViewOp
from fuser_core.ir.tensor_view import TensorView

# How deep extents are compared through their defining arithmetic: enough for the
# extents ops build, and a bound that keeps the pass linear in the fusion.
_EXTENT_DEPTH = 4


def remove_noop_ops(fusion: Fusion) -> bool:
    inputs = {id(v) for v in fusion.inputs}
    outputs = {id(v) for v in fusion.outputs}  # kept in step with the rewiring below
    changed = False
    for expr in fusion.exprs():  # producers first: a chain of no-ops collapses whole
        if _is_noop(expr) and not _must_stay(expr, inputs, outputs):
            _bypass(fusion, expr, outputs)
            changed = True
    return changed


def _must_stay(expr: Expr, inputs: set[int], outputs: set[int]) -> bool:
    """An output must be a buffer of its own: not the caller's input, not another output."""
    return id(expr.output) in outputs and (id(expr.input) in inputs or id(expr.input) in outputs)


def _bypass(fusion: Fusion, expr: Expr, outputs: set[int]) -> None:
    """Uses of the op's output (and the output list) read its input; the op goes."""
    inp, out = expr.input, expr.output
    fusion.replace_val(out, inp)
    fusion.remove_expr(expr)
    if id(out) in outputs:
        outputs.discard(id(out))
        outputs.add(id(inp))


def _is_noop(expr: Expr) -> bool:
    if not isinstance(expr.output, TensorView):
        return False
    if isinstance(expr, LoadStoreOp):  # a Set to a required layout (stride_order) is a real copy
        return expr.op_type == "Set" and expr.permutation() is None and not _required_layout(expr.output)
    if isinstance(expr, (SqueezeOp, BroadcastOp)):
        return not any(expr.flags)
    if isinstance(expr, (ViewOp, ExpandOp)):
        return _same_shape(expr.input, expr.output)  # type: ignore[arg-type]
    return False


def _required_layout(tv: TensorView) -> bool:
    return tv.domain.allocation is not None and not tv.domain.allocation_is_hint


def _same_shape(inp: TensorView, out: TensorView) -> bool:
    before, after = inp.logical_no_reductions(), out.logical_no_reductions()
    return len(before) == len(after) and all(
        a.iter_type == b.iter_type and same_extent(a.maybe_expanded_extent, b.maybe_expanded_extent)
        for a, b in zip(before, after, strict=True)
    )


def same_extent(a: Val, b: Val, depth: int = _EXTENT_DEPTH) -> bool:
    """Whether two extents are provably equal: the same value, equal constants, or the
    same operation of provably equal operands."""
    if a is b:
        return True
    if isinstance(a, Scalar) and isinstance(b, Scalar) and a.is_const and b.is_const:
        return a.value == b.value
    da, db = a.definition, b.definition
    if da is None or db is None or depth == 0 or type(da) is not type(db):
        return False
    if getattr(da, "op_type", None) != getattr(db, "op_type", None) or len(da.inputs) != len(db.inputs):
        return False
    return all(same_extent(x, y, depth - 1) for x, y in zip(da.inputs, db.inputs, strict=True))
