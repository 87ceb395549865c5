"""A check of a scheduled fusion's loop domains, run by the tests on every group:

1. every loop IterDomain traces back, through splits, merges and resizes, to the
   tensor's logical domain, and no iterating logical axis is lost on the way;
2. the loops cover the data: the product of the loop extents is at least the product
   of the logical extents (after the resizes the loop domain applies);
3. an inlined producer shares its consumers' outer loops: its first `ca_pos` loop IDs
   have counterparts, in order, in each consumer's loop domain.

It returns problems as sentences; an empty list means the schedule is consistent.
"""

from __future__ import annotations

from collections.abc import Callable

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, Merge, Resize, Split
from fuser_core.ir.tensor_view import TensorView, transforms_between
from fuser_core.scheduler.common import scheduled_tensors
from fuser_core.scheduler.propagation import matched_positions

Extent = Callable[[IterDomain], int]


def loop_domain_problems(fusion: Fusion, extent: Extent | None = None) -> list[str]:
    problems: list[str] = []
    for tv in scheduled_tensors(fusion):
        problems += _traces_to_logical(tv)
        if extent is not None:
            problems += _covers(tv, extent)
        problems += _shares_loops(tv)
    return problems


def _traces_to_logical(tv: TensorView) -> list[str]:
    logical = {id(d) for d in tv.logical}
    reached: set[int] = set()
    problems = []
    for dim in tv.loop:
        stack = [dim]
        while stack:
            current = stack.pop()
            if id(current) in logical:
                reached.add(id(current))
                continue
            definition = current.definition
            if not isinstance(definition, (Split, Merge, Resize)):
                problems.append(f"T{tv.name}: loop axis {dim} does not come from its logical domain")
                break
            stack.extend(v for v in definition.inputs if isinstance(v, IterDomain))
    lost = [d for d in tv.logical if id(d) not in reached and not d.is_broadcast]
    problems += [f"T{tv.name}: logical axis {d} is not iterated by any loop" for d in lost]
    return problems


def _covers(tv: TensorView, extent: Extent) -> list[str]:
    """Loop extents against the extents of what they iterate: logical axes, or the
    resized axes a producer of a pad or slice iterates instead."""
    frontier = {id(d): d for d in tv.logical if not d.is_broadcast}
    for expr in transforms_between(tv.logical, tv.loop):
        if isinstance(expr, Resize) and id(expr.inputs[0]) in frontier:
            del frontier[id(expr.inputs[0])]
            frontier[id(expr.output)] = expr.output  # type: ignore[assignment]
    needed = _product(extent, frontier.values())
    have = _product(extent, [d for d in tv.loop if not d.is_broadcast])
    if have < needed:
        return [f"T{tv.name}: its loops iterate {have} points but its data has {needed}"]
    return []


def _product(extent: Extent, dims: object) -> int:
    total = 1
    for dim in dims:  # type: ignore[attr-defined]
        total *= extent(dim)
    return total


def _shares_loops(tv: TensorView) -> list[str]:
    problems = []
    consumers = [o for use in tv.uses for o in use.outputs if isinstance(o, TensorView)]
    for consumer in consumers:
        shared = matched_positions(tv, consumer)
        if shared < tv.compute_at_pos:
            problems.append(
                f"T{tv.name} is inlined at {tv.compute_at_pos} but shares only {shared} "
                f"outer loops with T{consumer.name}"
            )
    return problems
