"""Propagating a reference tensor's schedule to every tensor of a group, and inlining.

A scheduler transforms one reference tensor; every other tensor gets the same
transforms by replay along producer/consumer edges, mapping IterDomains through each
op (nvFuser's TransformPropagator). Each replayed loop IterDomain remembers the one it
was replayed from, so every loop ID traces to a reference loop ID: that is what makes
loops shared and inlining legal. A tensor missing an axis (a bias before its broadcast)
forwards the merges that would involve it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fuser_core.ir.base import Expr
from fuser_core.ir.domain_map import root_pairs
from fuser_core.ir.iter_domain import IterDomain, ParallelType, Resize
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorView, transforms_between
from fuser_core.scheduler.tensor_ops import replay_transforms


class CannotPropagate(Exception):
    """The reference's transforms cannot reach a tensor of the group; the message says which."""


@dataclass(frozen=True)
class Step:
    target: TensorView
    source: TensorView
    expr: Expr
    producer_side: bool  # target is a producer of source (replay producer as consumer)


def propagation_steps(
    reference: TensorView, in_scope: Callable[[Expr], bool], scheduled: Sequence[TensorView] = ()
) -> list[Step]:
    """A spanning tree from `reference` over the group's edges (Prim's algorithm): each
    tensor is reached by the edge that maps the most of its axes, producers preferred,
    so a broadcast's new axis is reached from the consumer that iterates it. A consumer
    with reshape/resize transforms is reached from its producer only when no other path
    exists, and then cannot be: its loops would have to start from its logical domain,
    which the producer's transforms do not reach."""
    steps: list[Step] = []
    seen = {id(reference)} | {id(tv) for tv in scheduled}
    heap: list[tuple[int, int, int, Step]] = []
    counter = itertools.count()

    def offer(tv: TensorView) -> None:
        for step in _neighbours(tv, in_scope):
            if id(step.target) not in seen:
                heapq.heappush(heap, (*_cost(step), next(counter), step))

    for tv in (reference, *scheduled):
        offer(tv)
    while heap:
        *_, step = heapq.heappop(heap)
        if id(step.target) in seen:
            continue
        if _unreachable_consumer(step):
            raise CannotPropagate(
                f"{_name(step.target)} is a reshape/resize output after {_name(step.source)}, "
                "which the reference's schedule cannot reach"
            )
        seen.add(id(step.target))
        steps.append(step)
        offer(step.target)
    return steps


def narrowed_tensors(steps: Sequence[Step]) -> list[TensorView]:
    """Tensors whose replayed loops iterate only part of their logical domain: those
    reached from the reference back through a slice or a negative pad (their loops iterate the slice's
    window, not their whole extent), and every tensor reached from one of them. Such a
    tensor can be computed where it is used, but not written whole to global memory."""
    narrowed: dict[int, TensorView] = {}
    padded: set[int] = set()  # reached from the reference back through a pad or a cat
    for step in steps:  # in the order they are reached: a step's source comes first
        if id(step.source) in padded or (step.producer_side and _pads(step.source)):
            padded.add(id(step.target))
        # A window of an expanded axis narrows nothing (its one element is all the axis
        # holds), unless a pad or cat came first: then the window's first index is not the
        # loops' first valid one, where an expanded output is written once.
        expanded_too = id(step.source) in padded
        if id(step.source) in narrowed or (step.producer_side and _slices(step.source, expanded_too)):
            narrowed[id(step.target)] = step.target
    return list(narrowed.values())


def _slices(tv: TensorView, expanded_too: bool = False) -> bool:
    """Whether `tv` is made by a resize that may drop elements: a slice, or a pad by a
    negative or run-time width (of an expanded axis only if `expanded_too`)."""
    domain = tv.domain
    for expr in transforms_between(domain.maybe_root, domain.logical):
        if not isinstance(expr, Resize) or (expr.inputs[0].is_broadcast and not expanded_too):  # type: ignore[attr-defined]
            continue  # a window of an expanded axis holds the one element all of it stores
        if not all(_at_least_zero(w) for w in (expr.left, expr.right)):
            return True
    return False


def _pads(tv: TensorView) -> bool:
    """Whether `tv` is made by a resize that may add elements before its input's: a pad
    or a cat's piece (a left width not known to be at most zero)."""
    domain = tv.domain
    for expr in transforms_between(domain.maybe_root, domain.logical):
        if isinstance(expr, Resize):
            left = expr.left
            if not (left.is_const and isinstance(left.value, int) and left.value <= 0):
                return True
    return False


def _at_least_zero(width: Scalar) -> bool:
    return width.is_const and isinstance(width.value, int) and width.value >= 0


def _unreachable_consumer(step: Step) -> bool:
    domain = step.target.domain
    return not step.producer_side and bool(transforms_between(domain.maybe_root, domain.logical))


def _cost(step: Step) -> tuple[int, int]:
    """(axes of the target left unmapped, 0 for a producer step): lower is better. A
    target axis that iterates is not mapped by a source broadcast: the broadcast holds
    no transforms of its own, only those replayed onto it from whatever iterates it
    elsewhere (an input broadcast to different axes of two outputs would carry one
    output's reduction axis into the other's iteration axis)."""
    if _unreachable_consumer(step):
        return (1 << 30, 1)
    if step.producer_side:
        pairs = [(c, p) for p, c in root_pairs(step.expr, step.target, step.source)]
    else:
        pairs = list(root_pairs(step.expr, step.source, step.target))
    mapped = sum(1 for source, target in pairs if target.is_broadcast or not source.is_broadcast)
    return (len(step.target.logical) - mapped, 0 if step.producer_side else 1)


def _neighbours(tv: TensorView, in_scope: Callable[[Expr], bool]) -> list[Step]:
    found: list[Step] = []
    expr = tv.definition
    if expr is not None and in_scope(expr):
        found += [Step(p, tv, expr, True) for p in expr.inputs if isinstance(p, TensorView)]
    for use in tv.uses:
        if in_scope(use):
            found += [Step(c, tv, use, False) for c in use.outputs if isinstance(c, TensorView)]
    return found


def _name(tv: TensorView) -> str:
    return f"T{tv.name}"


def propagate(reference: TensorView, steps: Sequence[Step]) -> None:
    for step in steps:
        _replay(step)


def _replay(step: Step) -> None:
    target, source = step.target, step.source
    if step.producer_side:
        pairs = root_pairs(step.expr, target, source)
        mapped = {id(c): p for p, c in pairs}
        start = source.domain.maybe_root
    else:
        pairs = root_pairs(step.expr, source, target)
        mapped = {id(p): c for p, c in pairs}
        start = source.logical
    replay_transforms(transforms_between(start, source.loop), mapped)
    loop: list[IterDomain] = []
    placed: set[int] = set()
    for dim in source.loop:
        new = mapped.get(id(dim))
        if new is not None and id(new) not in placed and _is_leaf(new):
            new.replayed_from = origin(dim)  # straight to the reference: no chains to walk
            loop.append(new)
            placed.add(id(new))
    loop += [d for d in _leaves(target) if id(d) not in placed]
    target.domain.loop = loop


def _is_leaf(dim: IterDomain) -> bool:
    return not any(type(u).__name__ in ("Split", "Merge", "Resize") for u in dim.uses)


def _leaves(tv: TensorView) -> list[IterDomain]:
    """The tensor's IterDomains that no transform consumes, logical order first."""
    found: list[IterDomain] = []
    stack = list(reversed(tv.logical))
    seen: set[int] = set()
    while stack:
        dim = stack.pop()
        if id(dim) in seen:
            continue
        seen.add(id(dim))
        outputs = [o for u in dim.uses if type(u).__name__ in ("Split", "Merge", "Resize") for o in u.outputs]
        if not outputs:
            found.append(dim)
        stack.extend(reversed([o for o in outputs if isinstance(o, IterDomain)]))
    return found


def origin(dim: IterDomain) -> IterDomain:
    """The reference loop IterDomain `dim` was (transitively) replayed from."""
    while dim.replayed_from is not None:
        dim = dim.replayed_from
    return dim


def parallelize_like_reference(tensors: Sequence[TensorView], vectorized: set[int]) -> None:
    """Every loop ID takes its reference ID's parallel type; Vectorize only on the
    tensors in `vectorized` (the cached global loads and stores), serial elsewhere, the
    reference included: its vector axis says how wide the accesses are, not that its
    own math is a vector access."""
    kinds = {id(dim): origin(dim).parallel_type for tv in tensors for dim in tv.loop}
    for tv in tensors:
        for dim in tv.loop:
            kind = kinds[id(dim)]
            if kind == ParallelType.Vectorize and tv.name not in vectorized:
                kind = ParallelType.Serial
            dim.parallel_type = kind


def matched_positions(producer: TensorView, consumer: TensorView) -> int:
    """How many outer loop IDs of `producer` have a counterpart, in order, in
    `consumer`'s loop domain (`matched_positions_prefix` gives the consumer position they
    reach). Broadcast loops one side lacks are stepped over: the consumer's (the producer
    is computed inside them), and the producer's size-1 ones a squeeze dropped (the
    consumer is emitted inside them); those count only before a shared loop."""
    j = count = 0
    for position, dim in enumerate(producer.loop):
        target = origin(dim)
        while j < len(consumer.loop) and origin(consumer.loop[j]) is not target and consumer.loop[j].is_broadcast:
            j += 1
        if j < len(consumer.loop) and origin(consumer.loop[j]) is target:
            j += 1
            count = position + 1
        elif not _squeezed_away(dim, consumer):
            break
    return count


def _squeezed_away(dim: IterDomain, consumer: TensorView) -> bool:
    """A size-1 broadcast loop of the producer with no counterpart anywhere in the
    consumer's loops (a squeeze's input axis): one iteration, or one block or thread
    index, that the consumer's loops can sit inside."""
    if not dim.is_broadcast or dim.has_expanded_extent:
        return False
    target = origin(dim)
    return all(origin(c) is not target for c in consumer.loop)


def inline_most(tensors: Sequence[TensorView], limits: dict[int, int], fusion_inputs: set[int]) -> None:
    """Set ca_pos (and consumers' produce_pos) as deep as the loops allow: no deeper
    than the producer's own reduction loops or a scheduler's limit (`limits`, by
    tensor name: cached I/O at the unswitch position, persistent buffers before the
    reduced axes)."""
    for tv in tensors:
        tv.compute_at_pos = 0
        tv.max_producer_pos = 0
    for tv in tensors:
        if tv.name in fusion_inputs:
            continue
        consumers = [o for use in tv.uses for o in use.outputs if isinstance(o, TensorView)]
        if not consumers:
            continue
        limit = min(limits.get(tv.name, len(tv.loop)), _own_reduction_limit(tv))
        position = min([limit] + [matched_positions(tv, c) for c in consumers])
        tv.compute_at_pos = position
        for consumer in consumers:
            produced_at = matched_positions_prefix(tv, consumer, position)
            consumer.max_producer_pos = max(consumer.max_producer_pos, produced_at)
    for tv in tensors:
        has_consumer = any(isinstance(o, TensorView) for use in tv.uses for o in use.outputs)
        if not has_consumer and tv.name not in fusion_inputs:
            # Never past its own reduction loops: its accumulator lives outside them.
            tv.compute_at_pos = min(tv.max_producer_pos, _own_reduction_limit(tv))
    _share_sibling_positions(tensors)


def _share_sibling_positions(tensors: Sequence[TensorView]) -> None:
    """The outputs of one multi-output op (Welford's avg, M2 and N) are computed by one
    loop nest: they share the shallowest of their positions."""
    names = {tv.name for tv in tensors}
    for tv in tensors:
        expr = tv.definition
        siblings = [o for o in (expr.outputs if expr else []) if isinstance(o, TensorView) and o.name in names]
        if len(siblings) > 1 and siblings[0] is tv:
            position = min(o.compute_at_pos for o in siblings)
            for sibling in siblings:
                sibling.compute_at_pos = position


def matched_positions_prefix(producer: TensorView, consumer: TensorView, count: int) -> int:
    """The consumer position that the producer's first `count` loop IDs reach."""
    j = 0
    for dim in producer.loop[:count]:
        target = origin(dim)
        if _squeezed_away(dim, consumer):
            continue
        while origin(consumer.loop[j]) is not target:
            j += 1
        j += 1
    return j


def _own_reduction_limit(tv: TensorView) -> int:
    for position, dim in enumerate(tv.loop):
        if dim.is_reduction:
            return position
    return len(tv.loop)
