"""Candidate schedules of one group, for the kernel choice at run time (Inductor's
multi-kernel; the enable option `kernel_choice`).

Where the best schedule of a group depends on sizes that the heuristic can only guess
at, it names the alternatives worth timing besides its own choice:

- an inner normalization: the persistent schedule (a row held in registers, read once)
  and the non-persistent one (the reduction schedule: every pass over the row re-reads
  the inputs, so nothing is held across the reductions, and no grid split, which a row
  broadcast back to its own blocks cannot have), whichever the heuristic did not pick
  (scheduler.rereading);
- a plain reduction with too few rows or columns to fill the GPU: with a grid split
  (blockIdx.y along the reduction, partial results combined through a global work
  buffer) and without one, whichever the heuristic did not pick.

The heuristic's own schedule comes first: it is what runs wherever nothing is timed.
Each candidate is a scheduler and a params object, scheduled, lowered and compiled
separately; the backend times them and keeps the fastest.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuser_core.scheduler.base import HeuristicParams, SchedulerType
from fuser_core.scheduler.checks import needs_persistence
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.reduction import InnerPersistentScheduler, ReductionParams, ReductionScheduler, _pow2_floor

MAX_GRID = 65535


@dataclass(frozen=True)
class ScheduleCandidate:
    label: str  # what sets it apart: "persistent", "non-persistent", "grid split 4", "no grid split"
    scheduler: SchedulerType
    params: HeuristicParams


def heuristic_candidates(
    scheduler: SchedulerType, group: GroupView, info: RuntimeInfo, params: HeuristicParams
) -> tuple[ScheduleCandidate, ...]:
    """The heuristic's schedule (`params`) first, then each alternative worth timing at
    these sizes; empty where the group has only one schedule worth having."""
    if not isinstance(params, ReductionParams):
        return ()
    alternatives = _alternatives(scheduler, group, info, params)
    if not alternatives:
        return ()
    own = "non-persistent" if not params.persistent and needs_persistence(group) else label(params)
    return (ScheduleCandidate(own, scheduler, params), *alternatives)


def label(params: ReductionParams) -> str:
    if params.persistent:
        return "persistent"
    if params.grid_reduction > 1:
        return f"grid split {params.grid_reduction}"
    return "no grid split"


def _alternatives(
    scheduler: SchedulerType, group: GroupView, info: RuntimeInfo, params: ReductionParams
) -> list[ScheduleCandidate]:
    reduction = ReductionScheduler()
    if scheduler == SchedulerType.inner_persistent:
        looped = reduction.with_grid_split(group, info, 1)
        return [ScheduleCandidate("non-persistent", SchedulerType.reduction, looped)]
    if scheduler != SchedulerType.reduction:
        return []  # outer persistent: its non-persistent form is not generated yet
    if needs_persistence(group):  # an inner normalization that re-reads its row (rereading)
        held = InnerPersistentScheduler()
        if held.run_time_check(group, info) is not None:
            return []
        return [ScheduleCandidate("persistent", SchedulerType.inner_persistent, held.heuristics(group, info))]
    grid = 1 if params.grid_reduction > 1 else grid_split_to_try(params, info.device.sm_count)
    if grid == params.grid_reduction:
        return []
    other = reduction.with_grid_split(group, info, grid)
    return [ScheduleCandidate(label(other), SchedulerType.reduction, other)]


def grid_split_to_try(params: ReductionParams, sm_count: int) -> int:
    """Blocks along the reduction worth timing against a reduction the heuristic did not
    split (1: none). The heuristic splits only when too few blocks fill the GPU and each
    would still reduce a long stretch (more than 8 serial steps per thread along a row,
    16 down a column); nearer those thresholds the answer depends on the device, so the
    candidate splits as far as each thread keeps a step or two of its own."""
    if params.inner:
        batch = _ceil_div(_ceil_div(params.row_length, params.vectorize), params.threads_reduction)
        if params.rows >= sm_count or batch < 2:
            return 1
        return min(_pow2_floor(batch), 4 * sm_count // params.rows, MAX_GRID)
    blocks = _ceil_div(_ceil_div(params.rows, params.vectorize), params.threads_iteration)
    batch = _ceil_div(params.row_length, params.threads_reduction)
    if blocks >= sm_count or batch < 2:
        return 1
    return max(1, min(2 * sm_count // blocks, max(2, batch // 4), MAX_GRID))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // max(b, 1))
