"""The reference backend: evaluates a Fusion with NumPy, op by op.

It is the ground truth every generated kernel is checked against, and the backend
that runs everything on a machine with no GPU. Narrow floats are computed in
float32 and rounded when stored; sums accumulate in 64 bits. Every result is checked
against the extents the IR gives its tensor, so the reference never silently agrees
with data the IR says cannot be, and intermediates are freed after their last use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.ir.base import Expr, Val
from fuser_core.ir.evaluator import ExpressionEvaluator
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.rng import bind_run_seed
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorView


def evaluate_fusion(fusion: Fusion, ev: ExpressionEvaluator, exprs: Sequence[Expr] | None = None) -> list[Any]:
    """Outputs of `fusion` with its inputs bound in `ev`. `exprs` is the fusion's
    topological order, when the caller has it already."""
    order = list(fusion.exprs()) if exprs is None else list(exprs)
    bind_run_seed(order, ev)  # unseeded random ops: a fresh seed per execution
    last_use = _last_uses(order)
    keep = {id(v) for v in (*fusion.inputs, *fusion.outputs)}
    for step, expr in enumerate(order):
        if all(ev.is_bound(out) for out in expr.outputs):
            continue
        values = [ev.evaluate(v) for v in expr.inputs]
        results = _run(expr, values, ev)
        for out, result in zip(expr.outputs, results, strict=True):
            if isinstance(out, TensorView):
                _check_shape(expr, out, result, values, ev)
            ev.bind(out, result)
        for val in expr.inputs:
            if isinstance(val, TensorView) and last_use.get(id(val)) == step and id(val) not in keep:
                ev.forget(val)
    return [_output_value(fusion, out, ev.evaluate(out)) for out in fusion.outputs]


def evaluate_groups(complete: Fusion, group_fusions: Sequence[Fusion], ev: ExpressionEvaluator) -> list[Any]:
    """Outputs of `complete`, computed kernel by kernel: each group's own fusion is
    evaluated alone, from its inputs only, and hands its outputs (by tensor name) to
    the groups after it. Proves the segmentation against the unsegmented fusion."""
    bind_run_seed(complete.exprs(), ev)  # before the leaves: every group sees one seed
    leaves = leaf_values(complete, ev)
    tensors: dict[int, Any] = {tv.name: ev.evaluate(tv) for tv in complete.inputs if isinstance(tv, TensorView)}
    for fusion in group_fusions:
        group_ev = bind_leaves(fusion, leaves)
        for val in fusion.inputs:
            if isinstance(val, TensorView):
                group_ev.bind(val, tensors[val.name])
        results = evaluate_fusion(fusion, group_ev)
        for out, value in zip(fusion.outputs, results, strict=True):
            tensors[out.name] = value
    return [
        _output_value(complete, out, tensors[out.name] if isinstance(out, TensorView) else ev.evaluate(out))
        for out in complete.outputs
    ]


def bind_leaves(fusion: Fusion, leaves: dict[int, Any]) -> ExpressionEvaluator:
    """An evaluator of `fusion` (a group's copy) with its leaf scalars bound by name."""
    ev = ExpressionEvaluator()
    for stmt in fusion.statements():
        if isinstance(stmt, Scalar) and not stmt.is_const and stmt.definition is None and stmt.name in leaves:
            ev.bind(stmt, leaves[stmt.name])
    return ev


def leaf_values(fusion: Fusion, ev: ExpressionEvaluator) -> dict[int, Any]:
    """Values of the fusion's symbolic leaf scalars (input extents, scalar inputs), by name."""
    found: dict[int, Any] = {}
    for stmt in fusion.statements():
        if isinstance(stmt, Scalar) and not stmt.is_const and stmt.definition is None and ev.is_bound(stmt):
            found[stmt.name] = ev.evaluate(stmt)
    return found


def _last_uses(order: Sequence[Expr]) -> dict[int, int]:
    last: dict[int, int] = {}
    for step, expr in enumerate(order):
        for val in expr.inputs:
            last[id(val)] = step
    return last


def _run(expr: Expr, values: list[Any], ev: ExpressionEvaluator) -> list[Any]:
    try:
        return expr.evaluate(values, ev)
    except FuserError:
        raise
    except (ValueError, IndexError, TypeError) as err:
        raise FuserError(
            f"cannot evaluate on inputs of shapes {_shapes(values)}: {err}",
            op=expr.user_name,
            tensor=str(expr.outputs[0]),
            location=expr.location,
        ) from err


def _shapes(values: Sequence[Any]) -> list[list[int]]:
    return [list(v.shape) for v in values if isinstance(v, np.ndarray)]


def _check_shape(expr: Expr, out: TensorView, result: Any, values: list[Any], ev: ExpressionEvaluator) -> None:
    """The data must have the shape the IR's extents give: anything else means the
    inputs contradict the fusion (e.g. a size-1 axis defined -1 meeting a larger one)."""
    expected = [int(ev.evaluate(d.maybe_expanded_extent)) for d in out.logical_no_reductions()]
    actual = list(np.shape(result))
    if actual == expected:
        return
    message = f"T{out.name} comes out with shape {actual}, but the fusion gives it extents {expected}"
    if len(_shapes(values)) > 1:
        message += (
            f": the operands' shapes {_shapes(values)} disagree (an axis defined with -1 is not "
            "broadcast even when its size is 1: define it with size 1 to broadcast)"
        )
    else:
        message += f": its input of shape {_shapes(values)[0] if _shapes(values) else []} does not fit them"
    raise FuserError(message, op=expr.user_name, tensor=f"T{out.name}", location=expr.location)


def _output_value(fusion: Fusion, out: Val, value: Any) -> Any:
    if not isinstance(out, TensorView):
        return value
    array = np.asarray(value).astype(out.dtype.numpy, copy=False)
    order = fusion.output_stride_order.get(out) or _allocation_order(out)
    # An output is laid out as its allocation domain says (a requirement, or a hint its
    # kernel kept); without one it is row-major, as nvFuser allocates it. An expanded
    # broadcast axis holds one element and has stride 0, as nvFuser returns it.
    expanded = expanded_axes(out)
    compact = array[compact_index(array.ndim, expanded)] if expanded else array
    laid = with_stride_order(compact, order) if order else np.array(compact, order="C", copy=True)
    return expanded_view(laid, array.shape) if expanded else laid


def expanded_axes(tv: TensorView) -> frozenset[int]:
    """The logical axes of `tv` that are broadcasts expanded to a size: an output holds one
    element along each (stride 0), as nvFuser allocates it, and a kernel indexes it so."""
    return frozenset(
        axis for axis, d in enumerate(tv.logical_no_reductions()) if d.is_broadcast and d.has_expanded_extent
    )


def compact_index(ndim: int, expanded: frozenset[int]) -> tuple[slice, ...]:
    """The index that keeps the first element along each expanded axis (a view)."""
    return tuple(slice(0, 1) if axis in expanded else slice(None) for axis in range(ndim))


def expanded_view(compact: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """`compact` (size 1 along the expanded axes) seen at `shape` with stride 0 along them:
    a writable view of the same memory, as torch's `expand` gives."""
    strides = [0 if c == 1 and n != 1 else st for c, n, st in zip(compact.shape, shape, compact.strides, strict=True)]
    return np.lib.stride_tricks.as_strided(compact, tuple(shape), tuple(strides))


def _allocation_order(tv: TensorView) -> list[int] | None:
    """The stride order of `tv`'s allocation domain, if it has one."""
    alloc = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
    logical = tv.logical_no_reductions()
    if tv.domain.allocation is None or alloc == logical:
        return None
    rank = len(alloc)
    return [rank - 1 - next(i for i, a in enumerate(alloc) if a is d) for d in logical]


def with_stride_order(array: np.ndarray, stride_order: Sequence[int]) -> np.ndarray:
    """A copy of `array` laid out so axis i has the `stride_order[i]`-th smallest stride."""
    rank = array.ndim
    outer_first = sorted(range(rank), key=lambda i: -stride_order[i])
    buffer = np.empty([array.shape[a] for a in outer_first], dtype=array.dtype)
    view = np.transpose(buffer, np.argsort(outer_first))
    view[...] = array
    return view
