"""The segmenter answers "why not fused?" after the fact: every scheduler's verdict on a
merge of two groups, the cycle it would close, and how a group would be cut without its
scheduler. The fusions here reach categories the bundled samples do not."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import FuserError, FusionDefinition, explain_merge, explain_split, use_options
from fuser_core.runtime.arguments import convert_inputs
from fuser_core.scheduler.base import RejectCategory, SchedulerType


def _runtime(build, inputs):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(backend="reference", device_model="h100_sxm"):
        runtime = fd.runtime_for(inputs)
    info = runtime.runtime_info(convert_inputs(runtime.segmented.complete, inputs))
    return runtime.segmented, info


def hinted_chain(fd: FusionDefinition) -> None:
    """g0 writes T1 and hands segment_set(T1) to g1, whose segment_set output g2 adds to T1:
    g0 -> g1 -> g2 and g0 -> g2."""
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
    t1 = fd.ops.mul(t0, t0)
    t2 = fd.ops.segment_set(t1)
    t3 = fd.ops.exp(t2)
    t4 = fd.ops.segment_set(t3)
    fd.add_output(fd.ops.add(t4, t1))


def transposed_row_sums(fd: FusionDefinition) -> None:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
    fd.add_output(fd.ops.add(t0, fd.ops.broadcast(fd.ops.sum(t0, [1]), [True, False])))


def test_merging_around_a_kernel_between_them_would_close_a_cycle():
    segmented, info = _runtime(hinted_chain, [np.ones((8, 16), np.float32)])
    assert len(segmented.groups) == 3
    answer = explain_merge(segmented, info, 0, 2)
    assert answer.cycle == (0, 1, 2)
    assert answer.category is RejectCategory.would_create_cycle
    assert answer.conclusion() == (
        "g0 and g2 stay apart: merged, one kernel would both feed g1 and wait for it (g0 -> g1 -> g2)"
    )
    assert answer.handed[0].name.startswith("T") and answer.handed[0].nbytes == 8 * 16 * 4
    assert "cycle: g0 -> g1 -> g2" in answer.lines()


def test_a_segment_set_hint_is_named_with_the_tensor_it_cuts_at():
    segmented, info = _runtime(hinted_chain, [np.ones((8, 16), np.float32)])
    answer = explain_merge(segmented, info, 0, 1)
    assert answer.category is RejectCategory.segment_set
    assert answer.hint is not None and answer.hint.numbers[0][0] == "segment_set"
    assert answer.scheduler is SchedulerType.pointwise  # the hint, not a scheduler, cuts here
    assert answer.cycle == ()


def test_a_self_mapping_is_every_schedulers_reason():
    segmented, info = _runtime(transposed_row_sums, [np.ones((6, 6), np.float32)])
    a, b = (g.id for g in segmented.groups)
    answer = explain_merge(segmented, info, a, b)
    assert answer.category is RejectCategory.self_mapping
    assert all(v.rejection is not None and v.rejection.category is RejectCategory.self_mapping for v in answer.verdicts)
    assert [v.scheduler.value for v in answer.verdicts] == [
        "expr_eval", "no_op", "reduction", "transpose", "pointwise", "inner_persistent", "outer_persistent",
        "inner_outer_persistent",
    ]  # fmt: skip


def test_bad_questions_are_user_errors():
    segmented, info = _runtime(hinted_chain, [np.ones((8, 16), np.float32)])
    with pytest.raises(FuserError, match="no group g9 in this run; its groups are g0, g1, g2"):
        explain_merge(segmented, info, 0, 9)
    with pytest.raises(FuserError, match="g1 is one group"):
        explain_merge(segmented, info, 1, 1)
    with pytest.raises(FuserError, match="no group g5"):
        explain_split(segmented, info, 5)


def test_the_split_of_a_group_that_no_other_scheduler_takes_names_the_stuck_expressions():
    segmented, info = _runtime(hinted_chain, [np.ones((8, 16), np.float32)])
    answer = explain_split(segmented, info, 1)
    assert answer.scheduler is SchedulerType.pointwise
    assert [v.scheduler.value for v in answer.verdicts] == [
        "inner_persistent", "outer_persistent", "inner_outer_persistent",
    ]  # fmt: skip
    assert answer.whole is None and all(p.scheduler is None for p in answer.parts)
    assert "fit no other scheduler" in answer.conclusion()


def test_a_group_that_is_a_view_of_the_other_says_it_runs_no_kernel():
    def flattened_row_sums(fd: FusionDefinition) -> None:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        centred = fd.ops.sub(t0, fd.ops.sum(t0, [1], keepdim=True))
        fd.add_output(fd.ops.reshape(centred, [-1]))

    segmented, info = _runtime(flattened_row_sums, [np.ones((8, 16), np.float32)])
    assert [g.scheduler for g in segmented.groups] == [SchedulerType.inner_persistent, SchedulerType.no_op]
    lines = explain_merge(segmented, info, 0, 1).lines()
    view = segmented.groups[1]
    (source,) = view.inputs
    out = f"T{view.outputs[0].name}"
    assert f"  g1: no_op, 1 expression, writes {out} (no kernel: {out} is a view of T{source.name})" in lines
