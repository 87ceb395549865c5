"""Allocation order: requirements and hints (nvFuser #2425).

A user's `add_output(..., stride_order=...)` is a requirement: it becomes the output's
allocation domain with hint=False, which no scheduler may change, row-major ones
included (so that "row-major because the user said so" is told apart from "row-major
because nobody said anything"). A reduction output keeps its reduction axes, outermost
last: an allocation domain is a permutation of the logical one. So is the output of
the `stride_order` op, required when it is made: inference leaves it alone.

Every other output and intermediate may get a hint, which a scheduler may drop. The
reference is the fusion input of the highest rank among those whose axes map onto the
tensor's. When it maps *every* iterating axis of the tensor, the tensor is proposed in
the reference's memory order (an element-wise result of a column-major input is best
written column-major; a permuted copy of an input is best written as a plain copy),
unless that order is the logical one anyway. When the reference maps only some axes,
nothing is proposed: nvFuser's first rule kept the mapped axes in the reference's order
and pushed the others outside, which permuted linear's output against what its caller
expects. Fusion inputs are never changed: their data arrives laid out as they say.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuser_core.ir.base import Expr
from fuser_core.ir.domain_map import root_pairs
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, Resize
from fuser_core.ir.layout import allocation_positions
from fuser_core.ir.tensor_view import TensorView, filled_contiguity


@dataclass(frozen=True)
class Source:
    """Where an axis comes from: the best-ranked input it maps to and the axis's
    position in that input's memory order (0 = outermost)."""

    key: tuple[int, int]  # (-rank, index among the fusion inputs): smaller is better
    position: int


def require_output_stride_orders(fusion: Fusion) -> bool:
    """Each user stride_order becomes its output's required allocation domain."""
    inputs = {id(v) for v in fusion.inputs}
    changed = False
    for tv, order in fusion.output_stride_order.items():
        if id(tv) not in inputs:  # an input's layout is the data's: never rewritten
            changed |= _set_allocation(tv, _required_order(tv, order), hint=False)
    return changed


def _required_order(tv: TensorView, stride_order: list[int]) -> list[IterDomain]:
    dims = tv.logical_no_reductions()
    alloc = list(dims)
    for axis, position in enumerate(allocation_positions(stride_order, len(dims))):
        alloc[position] = dims[axis]
    return alloc + [d for d in tv.logical if d.is_reduction]


def infer_allocation_hints(fusion: Fusion) -> bool:
    """Propose a hint for every tensor without a requirement (see the module doc)."""
    sources = input_sources(fusion)
    skip = {id(v) for v in fusion.inputs} | {id(tv) for tv in fusion.output_stride_order}
    changed = False
    for tv in fusion.used_tensors():
        required = tv.domain.allocation is not None and not tv.domain.allocation_is_hint  # the stride_order op
        order = None if id(tv) in skip or required else proposed_order(tv, sources)
        if order is not None:
            changed |= _set_allocation(tv, order, hint=True)
    return changed


def _set_allocation(tv: TensorView, alloc: list[IterDomain], *, hint: bool) -> bool:
    domain = tv.domain
    if domain.allocation == alloc and domain.allocation_is_hint == hint:
        return False
    domain.set_allocation(alloc, filled_contiguity(alloc, True), hint=hint)
    return True


def input_sources(fusion: Fusion) -> dict[int, Source]:
    """One forward pass in topological order: for each IterDomain (by id), the best
    input axis it maps to. Keeping only the best is enough: the best input of a tensor
    is the best over its axes, and it maps an axis exactly when it is that axis's best
    (inputs are totally ordered), so the work is constant per axis of every op."""
    found: dict[int, Source] = {}
    for index, tv in enumerate(fusion.inputs):
        if isinstance(tv, TensorView):
            _seed(tv, index, found)
    for expr in fusion.exprs():
        _forward(expr, found)
    return found


def _seed(tv: TensorView, index: int, found: dict[int, Source]) -> None:
    memory = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
    iterating = [d for d in memory if not d.is_broadcast]
    for position, dim in enumerate(memory):
        if not dim.is_broadcast:  # a broadcast axis says nothing of the layout
            found[id(dim)] = Source((-len(iterating), index), position)


def _forward(expr: Expr, found: dict[int, Source]) -> None:
    for consumer in expr.outputs:
        if not isinstance(consumer, TensorView):
            continue
        for producer in expr.inputs:
            if isinstance(producer, TensorView):
                for p, c in root_pairs(expr, producer, consumer):
                    _offer(found, c, found.get(id(p)))
        for dim in consumer.logical:
            # A resized axis keeps its place in memory; a reshaped one has none of its
            # own (its Split/Merge ends the mapping).
            if isinstance(dim.definition, Resize):
                _offer(found, dim, found.get(id(dim.definition.inputs[0])))


def _offer(found: dict[int, Source], dim: IterDomain, source: Source | None) -> None:
    if source is None or dim.is_broadcast:
        return
    current = found.get(id(dim))
    if current is None or source.key < current.key:
        found[id(dim)] = source


def proposed_order(tv: TensorView, sources: dict[int, Source]) -> list[IterDomain] | None:
    """The tensor's logical axes in its reference input's memory order (reduction axes
    last), or None: no reference, one that misses an axis, or logical order anyway."""
    dims = tv.logical_no_reductions()
    iterating = [d for d in dims if not d.is_broadcast]
    found = [sources.get(id(d)) for d in iterating]
    if not iterating or any(s is None for s in found):
        return None  # an axis no input maps: the best input cannot map every axis
    reference = min(s.key for s in found if s is not None)
    if any(s is None or s.key != reference for s in found):
        return None  # the reference misses an axis: propose nothing (#2425)
    order = sorted(dims, key=_position_keys(dims, sources).__getitem__)
    return None if order == dims else order + [d for d in tv.logical if d.is_reduction]


def _position_keys(dims: list[IterDomain], sources: dict[int, Source]) -> dict[IterDomain, tuple[int, int]]:
    """Sort keys: an iterating axis at its reference position, a broadcast axis right
    after the axis before it (outermost when it comes first)."""
    keys: dict[IterDomain, tuple[int, int]] = {}
    last, offset = -1, 0
    for dim in dims:
        source = sources.get(id(dim))
        if source is not None and not dim.is_broadcast:
            last, offset = source.position, 0
        offset += 1
        keys[dim] = (last, offset if source is None or dim.is_broadcast else 0)
    return keys
