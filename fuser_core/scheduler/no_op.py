"""The no_op scheduler: a group needs no kernel when its outputs hold no element, or
when each output is a view of a group input's storage (a reshape, squeeze or
broadcast of a dense input: nvFuser's aliased outputs, computed by pointer arithmetic).
The input may be the fusion's or a result another group wrote: a reshape after a
normalization is a view of the normalization kernel's output, not a copy kernel."""

from __future__ import annotations

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.aliases import aliased_input
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
        if group.outputs and all(aliased_input(tv, group.inputs) is not None for tv in group.outputs):
            return None
        for tv in group.outputs:
            if info.numel(tv) != 0:
                return reject(self.type, f"output has a concrete dimension: T{tv.name} has {info.numel(tv)} elements")
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> HeuristicParams:
        return HeuristicParams(self.type)

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        inputs = [tv for tv in fusion.inputs if isinstance(tv, TensorView)]
        views = [(out, aliased_input(out, inputs)) for out in fusion.outputs if isinstance(out, TensorView)]
        if views and all(source is not None for _, source in views):
            return ScheduleRecord(notes=[f"T{out.name} is a view of T{source.name}" for out, source in views])  # type: ignore[union-attr]
        return ScheduleRecord(notes=["every output is empty: nothing to compute"])
