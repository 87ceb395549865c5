"""Replacing IterDomains and substituting scalars inside a (cloned) fusion.

IterDomains are immutable in spirit: one whose extent changes is replaced by a new
IterDomain (with a new name), in every domain list and transform that refers to it.
A `DomainIndex` knows which tensor domains hold each IterDomain, so a replacement
touches only those and concretization stays linear in the size of the fusion.
"""

from __future__ import annotations

from fuser_core.errors import InternalError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorDomain, TensorView


class DomainIndex:
    """Which TensorDomains hold each IterDomain (by id), kept up to date as tensors
    are created and IterDomains replaced."""

    def __init__(self, fusion: Fusion) -> None:
        self.fusion = fusion
        self.owners: dict[int, list[TensorDomain]] = {}
        self._indexed = 0  # statements of the fusion indexed so far

    def _refresh(self) -> None:
        for stmt in self.fusion.statements_since(self._indexed):
            if isinstance(stmt, TensorView):
                for dim in stmt.domain.all_ids():
                    self.owners.setdefault(id(dim), []).append(stmt.domain)
        self._indexed = self.fusion.statement_count()

    def replace(self, old: IterDomain, new: IterDomain) -> None:
        """Put `new` wherever `old` is: tensor domains and the transforms between them."""
        self._refresh()
        domains = self.owners.pop(id(old), [])
        for domain in domains:
            domain.replace_id(old, new)
        self.owners.setdefault(id(new), []).extend(domains)
        expr = old.definition
        if expr is not None:
            self.fusion.invalidate()
            expr.outputs = [new if o is old else o for o in expr.outputs]
            new.definition = expr
            old.definition = None
        for use in list(old.uses):
            use.replace_input(old, new)


class _ScalarRebuilder:
    """Scalars with the substitutions applied, transitively, rebuilt (and so folded)
    where an input changed."""

    def __init__(self, mapping: dict[int, Scalar]) -> None:
        self.mapping = mapping
        self.memo: dict[int, Scalar] = {}
        self._active: set[int] = set()

    def __call__(self, val: Scalar) -> Scalar:
        key = id(val)
        if key in self.memo:
            return self.memo[key]
        if key in self._active:
            raise InternalError(f"substitution cycle through {val}")
        self._active.add(key)
        try:
            result = self._rebuild(val)
        finally:
            self._active.discard(key)
        self.memo[key] = result
        return result

    def _rebuild(self, val: Scalar) -> Scalar:
        if id(val) in self.mapping:
            target = self.mapping[id(val)]
            return target if target is val else self(target)
        expr = val.definition
        if expr is None:
            return val
        inputs = [self(v) for v in expr.inputs]  # type: ignore[arg-type]
        changed = any(a is not b for a, b in zip(inputs, expr.inputs, strict=True))
        return sm.rebuild(expr, inputs) if changed else val


def substitute_scalars(fusion: Fusion, mapping: dict[int, Scalar], index: DomainIndex) -> None:
    """Replace scalars (keyed by `id`) everywhere: IterDomain extents, transform
    widths and the scalar operands of tensor ops. Scalar expressions are rebuilt, not
    edited, so constants fold and the old expressions fall out of the fusion."""
    rebuild = _ScalarRebuilder(mapping)
    all_ids: dict[int, IterDomain] = {}
    # Every output of a used op, not only the used ones: an unused sibling of a
    # multi-output op (Welford's count beside its variance) is still in the op's
    # group and is sized from the same extents.
    tensors = {id(tv): tv for tv in fusion.used_tensors()}
    for op in fusion.exprs():
        tensors.update((id(o), o) for o in op.outputs if isinstance(o, TensorView))
    for tv in tensors.values():
        for dim in tv.domain.all_ids():
            all_ids.setdefault(id(dim), dim)
    id_exprs: dict[int, Expr] = {}
    for dim in all_ids.values():
        for expr in [dim.definition, *dim.uses]:
            if expr is not None:
                id_exprs.setdefault(id(expr), expr)
    for dim in all_ids.values():
        start, extent = rebuild(dim.start), rebuild(dim.extent)
        expanded = rebuild(dim.expanded_extent) if dim.expanded_extent is not None else None
        if start is not dim.start or extent is not dim.extent or expanded is not dim.expanded_extent:
            index.replace(dim, dim.clone_with(start=start, extent=extent, expanded_extent=expanded))
    tensor_exprs = [e for e in fusion.exprs() if e.is_tensor_op()]
    for expr in [*id_exprs.values(), *tensor_exprs]:
        _substitute_inputs(expr, rebuild)


def _substitute_inputs(expr: Expr, rebuild: _ScalarRebuilder) -> None:
    for inp in list(expr.inputs):
        if isinstance(inp, Scalar):
            new = rebuild(inp)
            if new is not inp:
                expr.replace_input(inp, new)
