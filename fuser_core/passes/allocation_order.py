"""Allocation order: requirements and hints (nvFuser #2425).

A user's `add_output(..., stride_order=...)` is a requirement: it becomes the output's
allocation domain with hint=False, which no scheduler may change. For every other
output and intermediate, inference may propose a hint: the memory order of the
highest-rank input whose axes map onto *every* iterating axis of the tensor (an
element-wise result of a column-major input is best written column-major). When the
input maps only some axes, nothing is proposed: nvFuser's first rule kept the mapped
axes in the input's order and pushed the others outside, which permuted linear's
output against what its caller expects. Inputs are never changed: their data arrives
laid out as they say.
"""

from __future__ import annotations

from fuser_core.ir.base import Expr
from fuser_core.ir.domain_map import root_pairs
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, Resize
from fuser_core.ir.layout import allocation_positions
from fuser_core.ir.tensor_view import TensorView, filled_contiguity

# For one IterDomain: input tensor name -> (that input's rank, the axis's position in
# the input's memory order, outermost first).
Sources = dict[int, tuple[int, int]]


def require_output_stride_orders(fusion: Fusion) -> bool:
    changed = False
    for tv, order in fusion.output_stride_order.items():
        if any(d.is_reduction for d in tv.logical):
            continue  # the layout of a reduction output is set when it is cached (cache_before)
        dims = tv.logical_no_reductions()
        alloc = [dims[0]] * len(dims)
        for axis, position in enumerate(allocation_positions(order, len(dims))):
            alloc[position] = dims[axis]
        tv.domain.set_allocation(alloc, filled_contiguity(alloc, True), hint=False)
        changed = True
    return changed


def infer_allocation_hints(fusion: Fusion) -> bool:
    sources = _input_sources(fusion)
    inputs = {id(v) for v in fusion.inputs}
    required = {id(tv) for tv in fusion.output_stride_order}
    changed = False
    for tv in fusion.used_tensors():
        if id(tv) in inputs or id(tv) in required:
            continue
        order = _proposed_order(tv, sources)
        if order is not None:
            alloc = order + [d for d in tv.logical if d.is_reduction]
            tv.domain.set_allocation(alloc, filled_contiguity(alloc, True), hint=True)
            changed = True
    return changed


def _input_sources(fusion: Fusion) -> dict[int, Sources]:
    """One forward pass: which input axes each IterDomain comes from, one to one."""
    found: dict[int, Sources] = {}
    for tv in fusion.inputs:
        if isinstance(tv, TensorView):
            memory = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
            for position, dim in enumerate(memory):
                found[id(dim)] = {tv.name: (len(memory), position)}
    for expr in fusion.exprs():
        _forward(expr, found)
    return found


def _forward(expr: Expr, found: dict[int, Sources]) -> None:
    for consumer in expr.outputs:
        if not isinstance(consumer, TensorView):
            continue
        for producer in expr.inputs:
            if isinstance(producer, TensorView):
                for p, c in root_pairs(expr, producer, consumer):
                    if id(p) in found and not c.is_broadcast:
                        found.setdefault(id(c), {}).update(found[id(p)])
        for dim in consumer.logical:
            # A resized axis keeps its place in memory; a reshaped one has none of its own.
            if isinstance(dim.definition, Resize) and id(dim.definition.inputs[0]) in found:
                found[id(dim)] = found[id(dim.definition.inputs[0])]


def _proposed_order(tv: TensorView, sources: dict[int, Sources]) -> list[IterDomain] | None:
    dims = tv.logical_no_reductions()
    iterating = [d for d in dims if not d.is_broadcast]
    if not iterating:
        return None
    candidates = set.intersection(*(set(sources.get(id(d), {})) for d in iterating))
    if not candidates:
        return None  # no input maps every axis: propose nothing (#2425)
    reference = max(candidates, key=lambda name: (sources[id(iterating[0])][name][0], -name))
    order = sorted(dims, key=lambda d: _position(d, dims, sources, reference))
    return order if order != dims else None


def _position(dim: IterDomain, dims: list[IterDomain], sources: dict[int, Sources], reference: int) -> float:
    """Where the reference input keeps this axis; a broadcast axis stays next to the
    axis before it."""
    if id(dim) in sources and reference in sources[id(dim)]:
        return float(sources[id(dim)][reference][1])
    before = dims[: dims.index(dim)]
    return _position(before[-1], dims, sources, reference) + 0.5 if before else -1.0
