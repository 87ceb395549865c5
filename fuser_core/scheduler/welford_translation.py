"""Welford as two passes, where the row stays in registers (nvFuser translates Welford
the same way for its persistent kernels).

Welford's one-pass update divides by the running count at every element. In an inner
persistent kernel the row is read once into registers anyway, so the mean can be summed
first and the squared deviations from it summed from the same registers: two cheap
block sums instead of a division per element. The result is as accurate (a two-pass
variance never loses more than Welford's). Only a Welford whose count is not used is
translated: the count of a translated one would be a tensor of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.ir.base import Expr, Val
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.op_types import BinaryOpType
from fuser_core.ir.tensor_exprs import WelfordOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.ops import arith
from fuser_core.ops.reductions import num_features, reduction
from fuser_core.ops.utils import broadcast


def translatable_in(exprs: Sequence[Expr], outputs: Sequence[Val]) -> list[WelfordOp]:
    """The Welfords among `exprs` whose count none of them reads and that is not among
    `outputs` (var_mean's, layer norm's), over axes that are not broadcasts."""
    members = {id(e) for e in exprs}
    leaving = {id(v) for v in outputs}
    found = []
    for expr in exprs:
        if not isinstance(expr, WelfordOp):
            continue
        count = expr.outputs[2]
        if id(count) in leaving or any(id(use) in members for use in count.uses):
            continue
        if _reduces_a_broadcast(expr):
            continue  # its sums would be scaled squeezes, not reductions to schedule from
        found.append(expr)
    return found


def _reduces_a_broadcast(expr: WelfordOp) -> bool:
    x, avg = expr.inputs[0], expr.outputs[0]
    assert isinstance(x, TensorView) and isinstance(avg, TensorView)
    dims = x.logical_no_reductions()
    return any(d.is_reduction and dims[pos].is_broadcast for pos, d in enumerate(avg.logical))


def translate_welfords(fusion: Fusion) -> dict[int, TensorView]:
    """Replace each translatable Welford by sum, mean, then the sum of squared
    deviations; returns {name of a replaced avg: the sum of its row}, the reduction a
    schedule that took the Welford as its reference starts from instead."""
    replaced: dict[int, TensorView] = {}
    for expr in translatable_in(fusion.exprs(), fusion.outputs):
        avg, var_sum, _count = expr.outputs
        x = expr.inputs[0]
        assert isinstance(avg, TensorView) and isinstance(var_sum, TensorView) and isinstance(x, TensorView)
        axes = [pos for pos, dim in enumerate(avg.logical) if dim.is_reduction]
        with fusion.guard():
            total = reduction(BinaryOpType.Add, x, axes)
            mean = arith.binary(BinaryOpType.Div, total, num_features(x, axes))
            if mean.dtype != x.dtype:  # type: ignore[union-attr]
                mean = arith.cast(mean, x.dtype)  # type: ignore[arg-type]
            flags = [pos in axes for pos in range(len(avg.logical))]
            centered = arith.binary(BinaryOpType.Sub, x, broadcast(mean, flags))  # type: ignore[arg-type]
            squares = arith.binary(BinaryOpType.Mul, centered, centered)
            deviations = reduction(BinaryOpType.Add, squares, axes)  # type: ignore[arg-type]
        reference = avg.name
        for old, new in ((avg, mean), (var_sum, deviations)):
            fusion.replace_val(old, new)  # type: ignore[arg-type]
            # The results keep the Welford outputs' names: a group's outputs are bound to
            # the complete fusion's tensors, and its dumps name them, by name.
            old.name, new.name = new.name, old.name  # type: ignore[union-attr]
        fusion.remove_expr(expr)
        replaced[reference] = total
    return replaced
