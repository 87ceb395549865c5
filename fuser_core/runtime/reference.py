"""The reference backend: evaluates a Fusion with NumPy, op by op.

It is the ground truth every generated kernel is checked against, and the backend
that runs everything on a machine with no GPU. Narrow floats are computed in
float32 and rounded when stored; sums accumulate in 64 bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.ir.evaluator import ExpressionEvaluator
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView


def evaluate_fusion(fusion: Fusion, ev: ExpressionEvaluator) -> list[Any]:
    """Outputs of `fusion` with its inputs bound in `ev`."""
    for expr in fusion.exprs():
        if all(ev.is_bound(out) for out in expr.outputs):
            continue
        values = [ev.evaluate(v) for v in expr.inputs]
        try:
            results = expr.evaluate(values, ev)
        except FuserError:
            raise
        except (ValueError, IndexError, TypeError) as err:
            shapes = [list(v.shape) for v in values if isinstance(v, np.ndarray)]
            raise FuserError(
                f"cannot evaluate on inputs of shapes {shapes}: {err}",
                op=expr.op_name,
                tensor=str(expr.outputs[0]),
                location=expr.location,
            ) from err
        for out, result in zip(expr.outputs, results, strict=True):
            ev.bind(out, result)
    return [_output_value(fusion, out, ev.evaluate(out)) for out in fusion.outputs]


def _output_value(fusion: Fusion, out: Any, value: Any) -> Any:
    if not isinstance(out, TensorView):
        return value
    array = np.asarray(value).astype(out.dtype.numpy, copy=False)
    order = fusion.output_stride_order.get(out)
    # Without a required stride order an output is row-major, as nvFuser allocates it.
    return with_stride_order(array, order) if order else np.array(array, order="C", copy=True)


def with_stride_order(array: np.ndarray, stride_order: Sequence[int]) -> np.ndarray:
    """A copy of `array` laid out so axis i has the `stride_order[i]`-th smallest stride."""
    rank = array.ndim
    outer_first = sorted(range(rank), key=lambda i: -stride_order[i])
    buffer = np.empty([array.shape[a] for a in outer_first], dtype=array.dtype)
    view = np.transpose(buffer, np.argsort(outer_first))
    view[...] = array
    return view
