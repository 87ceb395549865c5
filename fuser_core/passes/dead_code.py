"""Dead-code removal: tensor expressions no output needs leave their inputs' use lists,
so the segmenter's count of where a tensor is used sees only live uses (the `0.5 * T6`
of nvFuser #785 computes nothing that reaches an output). IterDomain transforms and
the scalar arithmetic of extents are not ops of the fusion and are left alone."""

from __future__ import annotations

from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView


def remove_dead_code(fusion: Fusion) -> bool:
    live = {id(e) for e in fusion.exprs()}
    dead: dict[int, Expr] = {}
    for tv in fusion.tensors():
        for use in tv.uses:
            if id(use) not in live and any(isinstance(o, TensorView) for o in use.outputs):
                dead[id(use)] = use
    for expr in dead.values():
        fusion.remove_expr(expr)
    return bool(dead)
