"""The schedulers in nvFuser's priority order (2024): the first whose checks accept a
group takes it. A list, not an if/elif chain: adding a scheduler is one line."""

from __future__ import annotations

from dataclasses import replace

from fuser_core.scheduler.base import RejectCategory, Rejection, Scheduler, SchedulerType
from fuser_core.scheduler.expr_eval import ExprEvalScheduler
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.inner_outer import InnerOuterPersistentScheduler
from fuser_core.scheduler.no_op import NoOpScheduler
from fuser_core.scheduler.pointwise import PointwiseScheduler
from fuser_core.scheduler.reduction import InnerPersistentScheduler, OuterPersistentScheduler, ReductionScheduler
from fuser_core.scheduler.transpose import TransposeScheduler
from fuser_core.scheduler.user import UserScheduler

SCHEDULERS: tuple[Scheduler, ...] = (
    ExprEvalScheduler(),
    NoOpScheduler(),
    ReductionScheduler(),
    TransposeScheduler(),
    PointwiseScheduler(),
    InnerPersistentScheduler(),
    OuterPersistentScheduler(),
    InnerOuterPersistentScheduler(),
)

# The user scheduler is never proposed: a user-scheduled fusion goes to it whole.
BY_TYPE: dict[SchedulerType, Scheduler] = {s.type: s for s in (*SCHEDULERS, UserScheduler())}


def propose(
    group: GroupView, info: RuntimeInfo | None, schedulers: tuple[Scheduler, ...] = SCHEDULERS
) -> tuple[Scheduler | None, list[Rejection]]:
    """The first of `schedulers` that accepts `group`, and every rejection before it.
    With no `info`, only compile-time checks run (an optimistic answer)."""
    rejections: list[Rejection] = []
    for scheduler in schedulers:
        rejection = verdict(scheduler, group, info)
        if rejection is None:
            return scheduler, rejections
        rejections.append(rejection)
    return None, rejections


def verdict(scheduler: Scheduler, group: GroupView, info: RuntimeInfo | None) -> Rejection | None:
    """One scheduler's answer for `group`: None if it takes it, else why not."""
    if group.self_mapping is not None:  # nvFuser's generic check, before any scheduler's own
        return Rejection(scheduler.type, group.self_mapping, RejectCategory.self_mapping)
    rejection = scheduler.compile_time_check(group)
    if rejection is None and info is not None:
        rejection = scheduler.run_time_check(group, info)
        rejection = replace(rejection, at_run_time=True) if rejection is not None else None
    return rejection
