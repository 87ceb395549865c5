"""The protocol every scheduler follows, and the data it returns.

A scheduler answers three questions about a candidate group, cheapest first:
can it ever take this kind of group (compile time), can it take it at these sizes
(run time), and with which parameters (heuristics, a frozen params object). Then it
schedules a copy of the group's fusion by IterDomain transforms. A rejection is data:
the scheduler, the reason, and a category the segmenter's legend groups them by.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fuser_core.ir.fusion import Fusion
    from fuser_core.scheduler.group_view import GroupView, RuntimeInfo


class SchedulerType(enum.Enum):
    """nvFuser's scheduler names (csrc/scheduler/scheduler_types.cpp)."""

    no_op = "no_op"
    expr_eval = "expr_eval"
    transpose = "transpose"
    pointwise = "pointwise"
    reduction = "reduction"
    inner_persistent = "inner_persistent"
    outer_persistent = "outer_persistent"
    inner_outer_persistent = "inner_outer_persistent"
    user = "user"  # a definition's own schedule(): one kernel, as the user scheduled it


class RejectCategory(enum.Enum):
    """Why two groups stay apart, in the spirit of Inductor's fusion-failure categories."""

    expr_eval_op = "expr-eval op"
    segment_set = "segment_set hint"
    persistent_buffer_too_large = "persistent buffer too large"
    reduction_axes_mismatch = "reduction axes do not match"
    disjoint_domains = "disjoint iteration domains"
    self_mapping = "two axes of a tensor mapped together"
    would_create_cycle = "would create a cycle"
    level_constraint = "level constraint"
    unsupported = "not supported by the scheduler"


# When several schedulers reject a merge, the category of the most telling reason
# names it: an op no kernel can hold beats a size limit, which beats a shape mismatch.
CATEGORY_PRECEDENCE = list(RejectCategory)


@dataclass(frozen=True)
class Rejection:
    scheduler: SchedulerType
    reason: str
    category: RejectCategory
    at_run_time: bool = False  # rejected for these sizes, not for the kind of group
    # The figures behind the reason, as (what, value): bytes against a budget, the
    # domains that disagree. Not part of equality: the reason already names the decision.
    numbers: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def line(self) -> str:
        return f"Scheduler _{self.scheduler.value}_ ***rejected*** because : {self.reason}"


def reject(
    scheduler: SchedulerType,
    reason: str,
    category: RejectCategory = RejectCategory.unsupported,
    numbers: tuple[tuple[str, str], ...] = (),
) -> Rejection:
    return Rejection(scheduler, reason, category, numbers=numbers)


def main_category(rejections: list[Rejection]) -> RejectCategory:
    if not rejections:
        return RejectCategory.unsupported
    return min((r.category for r in rejections), key=CATEGORY_PRECEDENCE.index)


@dataclass(frozen=True)
class HeuristicParams:
    """Base of every scheduler's parameters: frozen, plain numbers and names, so a
    runtime can compare them and a dump can print them."""

    scheduler: SchedulerType

    def shown(self) -> list[tuple[str, object]]:
        """(name, value) of every parameter the dumps and the workbench show."""
        return [(f.name, getattr(self, f.name)) for f in fields(self) if f.name != "scheduler"]

    def describe(self) -> str:
        lines = [f"===== {self.scheduler.value} parameters ====="]
        lines += [f"  {name}: {value}" for name, value in self.shown()]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class HintDrop:
    """An inferred allocation domain a scheduler chose not to follow, and why."""

    tensor: str
    reason: str


@dataclass
class ScheduleRecord:
    """What a schedule did besides its transforms (which live in the fusion)."""

    reference: str | None = None  # the tensor the transforms were made on, e.g. "T4"
    dropped_hints: list[HintDrop] | None = None
    notes: list[str] | None = None


class Scheduler(Protocol):
    type: SchedulerType
    drops_output_hints: bool  # writes its outputs in logical order, whatever was inferred

    def compile_time_check(self, group: GroupView) -> Rejection | None: ...

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None: ...

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> HeuristicParams: ...

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord: ...
