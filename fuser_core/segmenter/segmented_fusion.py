"""The result of segmentation, as data: groups, edges, every merge tried and why
neighbours stayed apart. Printers and the workbench read it; nothing here decides."""

from __future__ import annotations

from dataclasses import dataclass, field

from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.base import HeuristicParams, RejectCategory, Rejection, ScheduleRecord, SchedulerType


@dataclass
class SegmentedGroup:
    id: int  # position in run order
    exprs: list[Expr]  # of the complete fusion, producers first
    inputs: list[TensorView]
    outputs: list[TensorView]
    scheduler: SchedulerType
    params: HeuristicParams
    merged: bool = False
    # Filled when the group is scheduled: its own fusion before and after its transforms.
    unscheduled: Fusion | None = None
    fusion: Fusion | None = None
    record: ScheduleRecord | None = None

    def label(self) -> str:
        ids = ", ".join(str(e.name) for e in sorted(self.exprs, key=lambda e: e.name))
        return f"{self.scheduler.value}{{{ids}}}" + (" (merged)" if self.merged else "")


@dataclass(frozen=True)
class SegmentedEdge:
    producer: int  # group id
    consumer: int
    val: TensorView


@dataclass(frozen=True)
class MergeAttempt:
    """One merge the segmenter tried (or a final pair it explains): the two groups, as
    labels of their expression ids, and each scheduler's verdict."""

    first: str
    second: str
    accepted: bool
    scheduler: SchedulerType | None = None
    rejections: tuple[Rejection, ...] = ()
    category: RejectCategory | None = None
    stage: str = "merge"  # "whole fusion", "merge", "final merge", "neighbours"
    note: str = ""

    def lines(self) -> list[str]:
        head = f"[{self.stage}] {self.first} + {self.second}: "
        if self.accepted:
            return [head + f"***Accepted*** as: {self.scheduler.value if self.scheduler else '?'}"]
        category = f" ({self.category.value})" if self.category else ""
        out = [head + "rejected" + category + (f": {self.note}" if self.note else "")]
        out += [f"  {r.line()}" for r in self.rejections]
        return out


@dataclass(frozen=True)
class NeighbourReason:
    """Why two final groups are separate kernels."""

    first: int
    second: int
    category: RejectCategory
    summary: str  # one line for the legend
    rejections: tuple[Rejection, ...] = ()


@dataclass
class SegmentedFusion:
    complete: Fusion
    groups: list[SegmentedGroup]
    edges: list[SegmentedEdge]
    attempts: list[MergeAttempt] = field(default_factory=list)
    whole_fusion_rejections: tuple[Rejection, ...] = ()
    reasons: list[NeighbourReason] = field(default_factory=list)

    @property
    def is_segmented(self) -> bool:
        return len(self.groups) > 1

    def group_of(self, expr: Expr) -> SegmentedGroup | None:
        for group in self.groups:
            if any(e is expr for e in group.exprs):
                return group
        return None

    def reasons_for(self, group_id: int) -> list[NeighbourReason]:
        return [r for r in self.reasons if group_id in (r.first, r.second)]

    def intermediates(self) -> list[TensorView]:
        """Tensors handed from one kernel to another through global memory."""
        seen: dict[int, TensorView] = {}
        for edge in self.edges:
            seen.setdefault(id(edge.val), edge.val)
        return list(seen.values())
