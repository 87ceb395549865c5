"""The expr_eval scheduler: ops no generated kernel computes (matmul, linear, and the
indexing ops: index_select, select, gather, take_along_axis, scatter,
index_put_accumulate, embedding_fwd) run alone, through the backend's library
(cuBLAS/ATen-like library calls on the GPU, NumPy on the reference)."""

from __future__ import annotations

from fuser_core.ir.fusion import Fusion
from fuser_core.scheduler.base import HeuristicParams, RejectCategory, Rejection, ScheduleRecord, SchedulerType, reject
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo


class ExprEvalScheduler:
    type = SchedulerType.expr_eval
    drops_output_hints = False

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        if not group.expr_eval_ops:
            return reject(self.type, "no expr-eval op (matmul, linear) in the group")
        if len(group.exprs) != 1:
            op = group.expr_eval_ops[0]
            return reject(
                self.type,
                f"{op.op_name} producing T{op.outputs[0].name} must run alone, "
                f"not with {len(group.exprs) - 1} other ops",
                RejectCategory.expr_eval_op,
            )
        return None

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> HeuristicParams:
        return HeuristicParams(self.type)

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        return ScheduleRecord(notes=["evaluated by the backend's library; no kernel is generated"])
