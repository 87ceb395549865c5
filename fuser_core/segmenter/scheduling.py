"""Scheduling the groups of a segmented fusion: each group becomes a fusion of its own
(a copy of its expressions that keeps their names), transformed by its scheduler."""

from __future__ import annotations

from typing import Any

from fuser_core.ir.base import Val
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import MemoryType, TensorView
from fuser_core.scheduler.candidates import ScheduleCandidate, heuristic_candidates
from fuser_core.scheduler.group_view import RuntimeInfo
from fuser_core.scheduler.registry import BY_TYPE
from fuser_core.segmenter.segmented_fusion import ScheduledCandidate, SegmentedFusion, SegmentedGroup


def schedule_groups(segmented: SegmentedFusion) -> None:
    for tv in segmented.intermediates():
        tv.memory_type = MemoryType.Global  # handed between kernels through global memory
    for group in segmented.groups:
        schedule_group(segmented, group)


def schedule_candidates(segmented: SegmentedFusion, info: RuntimeInfo) -> None:
    """For the kernel choice: each scheduled group's candidate schedules at these sizes,
    its own first (its fusion as scheduled), each alternative on a copy of its own."""
    for group in segmented.groups:
        if group.unscheduled is None or group.fusion is None:
            continue
        found = heuristic_candidates(group.scheduler, segmented.view(group), info, group.params)
        if not found:
            continue
        own = ScheduledCandidate(found[0].label, group.scheduler, group.params, group.fusion, group.record)
        group.candidates = (own, *(_scheduled(group.unscheduled, c) for c in found[1:]))


def _scheduled(unscheduled: Fusion, candidate: ScheduleCandidate) -> ScheduledCandidate:
    fusion, _ = unscheduled.clone()
    with fusion.guard():
        record = BY_TYPE[candidate.scheduler].schedule(fusion, candidate.params)
    return ScheduledCandidate(candidate.label, candidate.scheduler, candidate.params, fusion, record)


def schedule_group(segmented: SegmentedFusion, group: SegmentedGroup) -> None:
    inputs: list[Val] = list(group.inputs)
    outputs: list[Val] = list(group.outputs)
    group.unscheduled, mapping = segmented.complete.clone_subset(group.exprs, inputs, outputs)
    sources = _extent_sources(segmented.complete, group.unscheduled, mapping, inputs)
    if sources:
        # Its kernel reads those extents from these tensors' sizes, as nvFuser passes them.
        inputs += sources
        group.unscheduled, _ = segmented.complete.clone_subset(group.exprs, inputs, outputs)
    fusion, _ = group.unscheduled.clone()
    with fusion.guard():
        group.record = BY_TYPE[group.scheduler].schedule(fusion, group.params)
    group.fusion = fusion
    group.record.dropped_hints = group.dropped_hints or None


def _extent_sources(complete: Fusion, subset: Fusion, mapping: dict[int, Any], inputs: list[Val]) -> list[TensorView]:
    """Tensor inputs of the complete fusion whose sizes give the group extents none of its
    own inputs gives: a factory (`full`, `uniform`) or `expand` sized by another input's
    shape (`t0.shape()`) reads nothing of that input but its sizes."""
    given = {id(v) for v in subset.inputs if not isinstance(v, TensorView)}
    for tv in subset.inputs:
        if isinstance(tv, TensorView):
            given.update(id(d.maybe_expanded_extent) for d in tv.logical_no_reductions())
    copies = {id(copy): original for original, copy in _pairs(complete, mapping)}
    needed = {
        id(copies[id(s)])
        for s in subset.statements()
        if isinstance(s, Scalar) and not s.is_const and s.definition is None and id(s) not in given and id(s) in copies
    }
    sources = []
    for tv in complete.inputs:
        if not isinstance(tv, TensorView) or any(tv is v for v in inputs):
            continue
        extents = {id(d.maybe_expanded_extent) for d in tv.logical_no_reductions()}
        if extents & needed:
            sources.append(tv)
            needed -= extents
    return sources


def _pairs(complete: Fusion, mapping: dict[int, Any]) -> list[tuple[Any, Any]]:
    """(statement of `complete`, its copy) for each statement the copy kept."""
    return [(s, mapping[id(s)]) for s in complete.statements() if id(s) in mapping]
