"""Scheduling the groups of a segmented fusion: each group becomes a fusion of its own
(a copy of its expressions that keeps their names), transformed by its scheduler."""

from __future__ import annotations

from fuser_core.ir.base import Val
from fuser_core.ir.tensor_view import MemoryType
from fuser_core.scheduler.registry import BY_TYPE
from fuser_core.segmenter.segmented_fusion import SegmentedFusion, SegmentedGroup


def schedule_groups(segmented: SegmentedFusion) -> None:
    for tv in segmented.intermediates():
        tv.memory_type = MemoryType.Global  # handed between kernels through global memory
    for group in segmented.groups:
        schedule_group(segmented, group)


def schedule_group(segmented: SegmentedFusion, group: SegmentedGroup) -> None:
    inputs: list[Val] = list(group.inputs)
    outputs: list[Val] = list(group.outputs)
    group.unscheduled, _ = segmented.complete.clone_subset(group.exprs, inputs, outputs)
    fusion, _ = group.unscheduled.clone()
    with fusion.guard():
        group.record = BY_TYPE[group.scheduler].schedule(fusion, group.params)
    group.fusion = fusion
    group.record.dropped_hints = group.dropped_hints or None
