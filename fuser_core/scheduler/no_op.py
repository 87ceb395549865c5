"""The no_op scheduler: a group whose outputs hold no element needs no kernel."""

from __future__ import annotations

from fuser_core.ir.fusion import Fusion
from fuser_core.scheduler.base import HeuristicParams, RejectCategory, Rejection, ScheduleRecord, SchedulerType, reject
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo


class NoOpScheduler:
    type = SchedulerType.no_op
    drops_output_hints = False

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        if group.expr_eval_ops:
            return reject(self.type, "has an expr-eval op", RejectCategory.expr_eval_op)
        return None

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        for tv in group.outputs:
            if info.numel(tv) != 0:
                return reject(self.type, f"output has a concrete dimension: T{tv.name} has {info.numel(tv)} elements")
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> HeuristicParams:
        return HeuristicParams(self.type)

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        return ScheduleRecord(notes=["every output is empty: nothing to compute"])
