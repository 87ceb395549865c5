"""Outputs that are views of an input (nvFuser's alias analysis, its simplest case).

A chain of reshapes, squeezes and broadcasts of a dense input laid out in its logical
order moves no element in memory, so its result is the input's storage seen with
another shape: nvFuser returns such an output as a view of the input and launches no
kernel (the no_op scheduler's "pointer arithmetic" outputs, test_mark_alias_pass).
Permutes, slices and expands are left to kernels here.
"""

from __future__ import annotations

from collections.abc import Collection

from fuser_core.ir.tensor_exprs import BroadcastOp, SqueezeOp, ViewOp
from fuser_core.ir.tensor_view import TensorView, no_reductions

_VIEW_OPS = (ViewOp, SqueezeOp, BroadcastOp)


def aliased_input(tv: TensorView, inputs: Collection[TensorView]) -> TensorView | None:
    """The tensor of `inputs` whose storage `tv` is a view of, or None."""
    current = tv
    while current.definition is not None and current not in inputs:
        expr = current.definition
        if not isinstance(expr, _VIEW_OPS) or not _in_logical_order(current):
            return None
        source = expr.inputs[0]
        assert isinstance(source, TensorView)
        current = source
    if current is tv or current not in inputs or not _in_logical_order(current) or not _dense(current):
        return None
    return current


def _in_logical_order(tv: TensorView) -> bool:
    alloc = no_reductions(tv.domain.maybe_allocation)
    return [id(d) for d in alloc] == [id(d) for d in no_reductions(tv.domain.logical)]


def _dense(tv: TensorView) -> bool:
    """Every axis that holds elements is contiguous with the next, and none is expanded."""
    domain = tv.domain
    for dim, contiguous in zip(domain.maybe_allocation, domain.contiguity, strict=True):
        if dim.is_reduction:
            continue
        if dim.is_broadcast:
            if dim.has_expanded_extent:
                return False
            continue
        if contiguous is not True:
            return False
    return True
