"""Replacing IterDomains and substituting scalars inside a (cloned) fusion.

IterDomains are immutable in spirit: one whose extent changes is replaced by a new
IterDomain (with a new name), in every domain list and transform that refers to it.
"""

from __future__ import annotations

from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.scalar import Scalar


def replace_id(fusion: Fusion, old: IterDomain, new: IterDomain) -> None:
    """Put `new` wherever `old` is: tensor domains and the transforms between them."""
    for tv in fusion.used_tensors():
        tv.domain.replace_id(old, new)
    expr = old.definition
    if expr is not None:
        expr.outputs = [new if o is old else o for o in expr.outputs]
        new.definition = expr
        old.definition = None
    for use in list(old.uses):
        use.replace_input(old, new)


class _ScalarRebuilder:
    """Scalars with the substitutions applied, rebuilt (and folded) where needed."""

    def __init__(self, mapping: dict[int, Scalar]) -> None:
        self.mapping = mapping
        self.memo: dict[int, Scalar] = {}

    def __call__(self, val: Scalar) -> Scalar:
        if id(val) in self.mapping:
            return self.mapping[id(val)]
        if val.definition is None:
            return val
        if id(val) not in self.memo:
            expr = val.definition
            inputs = [self(v) for v in expr.inputs]  # type: ignore[arg-type]
            changed = any(a is not b for a, b in zip(inputs, expr.inputs, strict=True))
            self.memo[id(val)] = sm.rebuild(expr, inputs) if changed else val
        return self.memo[id(val)]


def substitute_scalars(fusion: Fusion, mapping: dict[int, Scalar]) -> None:
    """Replace scalars (keyed by `id`) by constants or other scalars everywhere:
    IterDomain extents, transform widths and the scalar operands of tensor ops."""
    rebuild = _ScalarRebuilder(mapping)
    all_ids: dict[int, IterDomain] = {}
    for tv in fusion.used_tensors():
        for dim in tv.domain.all_ids():
            all_ids.setdefault(id(dim), dim)
    id_exprs: dict[int, Expr] = {}
    for dim in all_ids.values():
        for expr in [dim.definition, *dim.uses]:
            if expr is not None:
                id_exprs.setdefault(id(expr), expr)
    for dim in list(all_ids.values()):
        start, extent = rebuild(dim.start), rebuild(dim.extent)
        expanded = rebuild(dim.expanded_extent) if dim.expanded_extent is not None else None
        if start is not dim.start or extent is not dim.extent or expanded is not dim.expanded_extent:
            replace_id(fusion, dim, dim.clone_with(start=start, extent=extent, expanded_extent=expanded))
    for expr in [*id_exprs.values(), *fusion.exprs()]:
        _substitute_inputs(expr, rebuild)


def _substitute_inputs(expr: Expr, rebuild: _ScalarRebuilder) -> None:
    for inp in list(expr.inputs):
        if isinstance(inp, Scalar):
            new = rebuild(inp)
            if new is not inp:
                expr.replace_input(inp, new)
