"""The candidate schedules a group offers the kernel choice (enable option kernel_choice):
which groups have them, what sets each apart, that they are none without the option, and
that a runtime is reused for other sizes only where every candidate would be the same."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, print_scheduler_params, use_options
from fuser_core.scheduler.base import SchedulerType
from fuser_core.scheduler.candidates import grid_split_to_try
from fuser_core.scheduler.device import select_device

H100 = select_device("h100_sxm")


def row_sum() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, dims=[1]))
    return fd


def softmax() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        m = fd.ops.broadcast_in_dim(fd.ops.max(t0, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
        e = fd.ops.exp(fd.ops.sub(t0, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
        fd.add_output(fd.ops.div(e, s))
    return fd


def runtime(fd: FusionDefinition, shape: tuple[int, ...], enable: tuple[str, ...] = ("kernel_choice",)):
    x = np.ones(shape, np.float32)
    with use_options(device_model="h100_sxm", backend="reference", enable=enable):
        return fd.runtime_for([x])


def test_a_persistent_normalization_offers_its_non_persistent_schedule():
    (group,) = runtime(softmax(), (64, 1024)).segmented.groups
    own, looped = group.candidates
    assert (own.label, own.scheduler, own.params, own.fusion) == (
        "persistent",
        SchedulerType.inner_persistent,
        group.params,
        group.fusion,
    )
    assert (looped.label, looped.scheduler) == ("non-persistent", SchedulerType.reduction)
    assert not looped.params.persistent and looped.params.grid_reduction == 1
    assert looped.params.vectorize == own.params.vectorize == 4
    assert looped.fusion is not None and looped.record is not None


@pytest.mark.parametrize(
    ("shape", "own", "other"),
    [
        ((2, 20000), 1, 8),  # 10 steps a thread: the heuristic keeps one block a row
        ((2, 65536), 4, 1),  # 32 steps a thread: it splits the row over 4 blocks
        ((100, 20000), 1, 5),  # more rows: the candidate's split is smaller (4 * 132 SMs // 100 rows)
    ],
)
def test_a_reduction_with_few_rows_offers_the_grid_split_the_heuristic_did_not_pick(shape, own, other):
    (group,) = runtime(row_sum(), shape).segmented.groups
    assert [c.params.grid_reduction for c in group.candidates] == [own, other]
    assert [c.label for c in group.candidates][1] == ("no grid split" if other == 1 else f"grid split {other}")
    assert all(c.scheduler == SchedulerType.reduction for c in group.candidates)


def test_groups_that_fill_the_gpu_have_no_candidates():
    (group,) = runtime(row_sum(), (1024, 1024)).segmented.groups  # 1024 rows on 132 SMs
    assert group.candidates == ()
    assert grid_split_to_try(group.params, H100.sm_count) == 1


def test_without_the_option_no_group_has_candidates():
    for fd, shape in ((softmax(), (64, 1024)), (row_sum(), (2, 20000))):
        rt = runtime(fd, shape, enable=())
        assert all(g.candidates == () for g in rt.segmented.groups)
        assert "kernel choice" not in print_scheduler_params(rt.segmented, rt.name)


def test_the_scheduler_params_dump_lists_each_candidate_and_what_differs():
    rt = runtime(softmax(), (64, 1024))
    text = print_scheduler_params(rt.segmented, rt.name)
    assert "  kernel choice: 2 candidates, timed on the GPU\n" in text
    assert "    0 persistent: nvfuser_inner_persistent_f0_c1_r0_g0 (inner_persistent): the heuristic's own\n" in text
    line = next(x for x in text.splitlines() if x.startswith("    1 non-persistent: "))
    assert line.startswith(
        "    1 non-persistent: nvfuser_reduction_f0_c1_r0_g0_alt1 (reduction): persistent True -> False"
    )
    assert "scheduler" not in line.split("(reduction):")[1]


def test_a_runtime_is_reused_only_where_every_candidate_would_be_the_same():
    fd = row_sum()
    with use_options(device_model="h100_sxm", backend="reference", enable=["kernel_choice"]):
        fd.execute([np.ones((2, 20000), np.float32)])
        fd.execute([np.ones((2, 20004), np.float32)])  # same schedules: the runtime is reused
        fd.execute([np.ones((100, 20000), np.float32)])  # same heuristic, another candidate split
    events = fd.executor_cache.events
    assert events[1].hit and events[1].runtime == "f0_c1_r0"
    assert not events[2].hit and events[2].level == "runtime"
    assert events[2].reasons == ("f0_c1_r0: g0 reduction kernel choice candidates changed",)
