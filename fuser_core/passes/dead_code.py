"""Dead-code removal: expressions no output needs leave their inputs' use lists, so
the segmenter's count of where a tensor is used sees only live uses (the `0.5 * T6`
of nvFuser #785 computes nothing that reaches an output)."""

from __future__ import annotations

from fuser_core.ir.fusion import Fusion


def remove_dead_code(fusion: Fusion) -> bool:
    live = {id(e) for e in fusion.exprs()}
    dead = {
        id(use): use
        for val in fusion.statements()
        for use in getattr(val, "uses", [])
        if id(use) not in live and not any(id(o) in _live_vals(fusion) for o in use.outputs)
    }
    for expr in dead.values():
        fusion.remove_expr(expr)
    return bool(dead)


def _live_vals(fusion: Fusion) -> set[int]:
    return {id(v) for v in fusion.used_vals()}
