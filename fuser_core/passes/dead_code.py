"""Dead-code removal: tensor expressions that no output needs leave their inputs' use
lists.

`Fusion.exprs()` already walks only what reaches an output, but a dead expression (the
`T8 = 0.5 * T6` of nvFuser #785) still sits in `T6.uses`, and the segmenter counts uses
to decide which tensors must leave a group. IterDomain transforms and the scalar
arithmetic of extents are not reached from the outputs either, yet tensors need them:
only expressions that produce a tensor are removed.
"""

from __future__ import annotations

from fuser_core.ir.base import Expr, Val
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView


def remove_dead_code(fusion: Fusion) -> bool:
    """Remove every tensor expression not reached from an output; True if any was.
    A multi-output expression (Welford) with one output in use is reached, so it stays."""
    live = {id(e) for e in fusion.exprs()}
    dead: dict[int, Expr] = {}
    # Every value, not only tensors: a dead `full` or `iota` is a use of scalars only.
    for val in fusion.statements():
        if isinstance(val, Val):
            dead.update((id(use), use) for use in val.uses if id(use) not in live and _makes_tensor(use))
    for expr in dead.values():
        fusion.remove_expr(expr)
    return bool(dead)


def _makes_tensor(expr: Expr) -> bool:
    return any(isinstance(out, TensorView) for out in expr.outputs)
