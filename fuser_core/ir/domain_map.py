"""Which producer axis each consumer root axis comes from, op by op.

Element-wise ops, copies, reductions, reshapes and resizes map axes by position
(a permute's root is in producer order, a reduction keeps its reduced axes as `r`
axes); a broadcast's new axes and a squeeze's removed axes have no partner.
Concretization uses this to resolve Symbolic axes; schedulers will use it to
propagate transforms.
"""

from __future__ import annotations

from fuser_core.ir.base import Expr
from fuser_core.ir.indexing import LibraryOp
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.tensor_exprs import BroadcastOp, FullOp, IotaOp, MatmulOp, SqueezeOp
from fuser_core.ir.tensor_view import TensorView


def root_pairs(expr: Expr, producer: TensorView, consumer: TensorView) -> list[tuple[IterDomain, IterDomain]]:
    """(producer logical axis, consumer root axis) pairs that `expr` ties together."""
    if isinstance(expr, (FullOp, IotaOp)):
        return []
    if isinstance(expr, LibraryOp):
        return expr.axis_pairs(producer, consumer)
    if isinstance(expr, MatmulOp):
        return expr.axis_pairs(producer)
    p_ids = producer.logical_no_reductions()
    c_ids = consumer.domain.maybe_root
    if isinstance(expr, BroadcastOp):
        c_ids = [c for c, flag in zip(c_ids, expr.flags, strict=True) if not flag]
    elif isinstance(expr, SqueezeOp):
        p_ids = [p for p, flag in zip(p_ids, expr.flags, strict=True) if not flag]
    return list(zip(p_ids, c_ids, strict=True))


def producers_of(expr: Expr, consumer: TensorView) -> dict[int, list[IterDomain]]:
    """For each consumer root axis (by id), the producer axes mapped to it."""
    mapped: dict[int, list[IterDomain]] = {}
    for producer in expr.inputs:
        if isinstance(producer, TensorView):
            for p, c in root_pairs(expr, producer, consumer):
                mapped.setdefault(id(c), []).append(p)
    return mapped
