"""The user scheduler: a definition that brings its own `schedule()`.

nvFuser compiles such a fusion as one kernel, unsegmented, with the transforms the
user's schedule made, and names its scheduler "user". fuser-workbench applies no user
transform (every `fd.sched` op is refused, naming itself), so the only user schedule
it runs is the empty one: the fusion as defined, every loop serial in one thread.
That is what nvFuser runs for an empty `schedule()` too: correct, and slow. Tensors
are inlined as far as their loops allow.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.base import HeuristicParams, Rejection, ScheduleRecord, SchedulerType
from fuser_core.scheduler.common import finish
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo


@dataclass(frozen=True)
class UserScheduleParams(HeuristicParams):
    """A user's schedule is made for the input sizes it first ran with (nvFuser keys user
    schedules by the inputs' sizes): other sizes run the schedule again, never reuse it."""

    input_sizes: tuple[tuple[int, ...], ...] = ()


class UserScheduler:
    """Never proposed by the registry: the segmenter gives it a user-scheduled fusion whole."""

    type = SchedulerType.user
    drops_output_hints = False

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        return None

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> HeuristicParams:
        tensors = [tv for tv in group.inputs if isinstance(tv, TensorView)]
        sizes = tuple(tuple(info.extent(d) for d in tv.logical_no_reductions()) for tv in tensors)
        return UserScheduleParams(self.type, sizes)

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        # No transform: the outputs' loops, unchanged, are mapped onto every tensor and each
        # tensor is inlined as far as they allow (nvFuser's inlineMost), so an
        # intermediate needs one register, not a buffer of its size.
        outputs = [tv for tv in fusion.outputs if isinstance(tv, TensorView)]
        if outputs:
            finish(fusion, outputs[0], vectorized=set(), limits={})
        return ScheduleRecord(notes=["the user's schedule: no transforms, every loop serial in one thread"])
