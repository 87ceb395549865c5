"""The result of segmentation, as data: groups, edges, every merge tried and why
neighbours stayed apart. Printers and the workbench read it; nothing here decides."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from fuser_core.ir.base import Expr
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.base import (
    HeuristicParams,
    HintDrop,
    RejectCategory,
    Rejection,
    ScheduleRecord,
    SchedulerType,
)
from fuser_core.scheduler.candidates import heuristic_candidates
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.id_map import IdMap
from fuser_core.scheduler.registry import BY_TYPE


@dataclass
class ScheduledCandidate:
    """One schedule of a group that the kernel choice may time (the `kernel_choice` option):
    the heuristic's own first, then the alternatives, each with its own scheduled fusion."""

    label: str  # "persistent", "non-persistent", "grid split 4", "no grid split"
    scheduler: SchedulerType
    params: HeuristicParams
    fusion: Fusion | None = None
    record: ScheduleRecord | None = None


@dataclass
class SegmentedGroup:
    id: int  # position in run order
    exprs: list[Expr]  # of the complete fusion, producers first
    inputs: list[TensorView]
    outputs: list[TensorView]
    scheduler: SchedulerType
    params: HeuristicParams
    merged: bool = False
    dropped_hints: list[HintDrop] = field(default_factory=list)  # inferred layouts of its outputs it does not follow
    # Filled when the group is scheduled: its own fusion before and after its transforms.
    unscheduled: Fusion | None = None
    fusion: Fusion | None = None
    record: ScheduleRecord | None = None
    # With kernel_choice: its candidate schedules, its own (this group's fusion) first.
    candidates: tuple[ScheduledCandidate, ...] = ()

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
    stage: str = "merge"  # "whole fusion", "merge", "final merge", "horizontal merge"
    note: str = ""

    def lines(self) -> list[str]:
        head = f"[{self.stage}] {self.first} + {self.second}: "
        if self.accepted:
            return [head + f"***Accepted*** as: {self.scheduler.value if self.scheduler else '?'}"]
        category = f" ({self.category.value})" if self.category else ""
        out = [head + "rejected" + category + (f": {self.note}" if self.note else "")]
        out += [f"  {r.line()}" for r in self.rejections]
        return out


def format_bytes(count: int) -> str:
    """`256 MiB`, `128.1 MiB`, `64 KiB`, `12 B`."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{count} B"


@dataclass(frozen=True)
class Recompute:
    """A tensor crossing a cut that the segmenter offered to recompute in its reader from
    fusion inputs (recompute.py): the groups, as labels, the inputs the recomputation
    reads, the bytes the reader would newly read against the tensor's, and the verdict."""

    tensor: str  # "T9"
    producer: str  # group labels at the time
    consumer: str
    sources: tuple[str, ...]  # fusion inputs the recomputation reads
    new_bytes: int  # of those, the ones the reader did not read already
    crossing_bytes: int  # the tensor's, written once and read back
    accepted: bool = False
    scheduler: SchedulerType | None = None  # the reader's, with the recomputation
    rejections: tuple[Rejection, ...] = ()
    note: str = ""  # why not: "not cheaper", "no scheduler accepts the reader with it"
    clone: TensorView | None = field(default=None, compare=False)  # the reader's copy
    stage: str = "recompute"

    def rejected(self, note: str, rejections: list[Rejection] | tuple[Rejection, ...] = ()) -> Recompute:
        return replace(self, accepted=False, note=note, rejections=tuple(rejections))

    def accepted_as(self, scheduler: SchedulerType | None, clone: TensorView) -> Recompute:
        return replace(self, accepted=True, scheduler=scheduler, clone=clone)

    def bytes_text(self) -> str:
        return f"reads {format_bytes(self.new_bytes)} of new inputs instead of {format_bytes(self.crossing_bytes)}"

    def summary(self, group: int) -> str:
        """`T9 in g1 from T1, T2, T3 as T39: reads ...` for an accepted one, by final group id."""
        clone = f" as T{self.clone.name}" if self.clone is not None else ""
        return f"{self.tensor} in g{group} from {', '.join(self.sources)}{clone}: {self.bytes_text()}"

    def lines(self) -> list[str]:
        head = f"[{self.stage}] {self.tensor} of {self.producer} read by {self.consumer}: "
        sources = ", ".join(self.sources)
        if self.accepted and self.clone is not None:
            sched = self.scheduler.value if self.scheduler else "?"
            text = f"recomputed from {sources} as T{self.clone.name}: {self.bytes_text()}: ***Accepted*** as: {sched}"
            return [head + text]
        out = [head + f"not recomputed from {sources} ({self.note}): {self.bytes_text()}"]
        return out + [f"  {r.line()}" for r in self.rejections]


SegmenterStep = MergeAttempt | Recompute  # one entry of the segmenter log


@dataclass(frozen=True)
class NeighbourReason:
    """Why two final groups are separate kernels."""

    first: int
    second: int
    category: RejectCategory
    summary: str  # one line for the legend
    rejections: tuple[Rejection, ...] = ()


def param_changes(old: HeuristicParams, new: HeuristicParams) -> str:
    """`vectorize 4 -> 1, grid_reduction 1 -> 8`: the compared parameters that differ."""
    changed = [
        f"{f.name} {getattr(old, f.name)} -> {getattr(new, f.name)}"
        for f in fields(old)
        if f.compare and f.name != "scheduler" and getattr(old, f.name) != getattr(new, f.name)
    ]
    return ", ".join(changed)


def _candidates_now(
    group: SegmentedGroup, view: GroupView, info: RuntimeInfo, params: HeuristicParams
) -> list[HeuristicParams]:
    """The group's candidates at the sizes of `info`, where the heuristic gives `params`."""
    return [c.params for c in heuristic_candidates(group.scheduler, view, info, params)]


@dataclass
class SegmentedFusion:
    complete: Fusion
    groups: list[SegmentedGroup]
    edges: list[SegmentedEdge]
    attempts: list[SegmenterStep] = field(default_factory=list)
    whole_fusion_rejections: tuple[Rejection, ...] = ()
    reasons: list[NeighbourReason] = field(default_factory=list)
    id_maps: dict[int, IdMap] = field(default_factory=dict)  # each group's own, by group id

    def refusal(self, info: RuntimeInfo) -> str | None:
        """Whether every group's scheduler takes new sizes with the same parameters
        (nvFuser's getMaybeHeuristicsFor); a sentence naming the first that does not."""
        for group in self.groups:
            scheduler = BY_TYPE[group.scheduler]
            view = self.view(group)
            rejection = scheduler.run_time_check(view, info)
            if rejection is not None:
                return f"g{group.id} {group.scheduler.value} rejects the new sizes: {rejection.reason}"
            params = scheduler.heuristics(view, info)
            if params != group.params:
                return f"g{group.id} {group.scheduler.value} heuristics changed: {param_changes(group.params, params)}"
            if group.candidates and _candidates_now(group, view, info, params) != [c.params for c in group.candidates]:
                return f"g{group.id} {group.scheduler.value} kernel choice candidates changed"
        return None

    @property
    def recomputes(self) -> list[Recompute]:
        """The tensors recomputed in their readers instead of crossing a cut."""
        return [a for a in self.attempts if isinstance(a, Recompute) and a.accepted]

    def view(self, group: SegmentedGroup) -> GroupView:
        """The group as its scheduler sees it."""
        return GroupView(group.exprs, group.inputs, group.outputs, self.id_maps[group.id])

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
