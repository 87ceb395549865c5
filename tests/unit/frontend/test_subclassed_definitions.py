"""Subclassed definitions, as nvFuser's: `definition()` is built on first use (execute,
fusion_ir, repr); a definition with its own (empty) `schedule()` runs as one kernel of
the user scheduler under its own id; a schedule that calls any user-scheduling op fails
with a FuserError naming it."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import FuserError, FusionDefinition
from fuser_core.frontend.fusion_cache import FusionCache


class TanhFusion(FusionDefinition):
    def definition(self) -> None:
        self.t0 = self.define_tensor(shape=[-1, -1], contiguity=[True, True])
        self.add_output(self.ops.tanh(self.t0))


class EmptySchedule(TanhFusion):
    schedule_ran = False

    def schedule(self) -> None:
        type(self).schedule_ran = True
        self.ir_seen = self.sched.user_schedule_ir()


class SplitSchedule(TanhFusion):
    def schedule(self) -> None:
        self.sched.split(self.t0, 1, 4)
        self.sched.parallelize(self.t0, 0, "blockIdx.x")


@pytest.fixture
def x():
    return np.random.default_rng(99).standard_normal((3, 8)).astype(np.float32)


def test_execute_builds_the_definition_on_first_use(x):
    fd = TanhFusion()
    assert fd.id() is None and FusionCache.get().num_fusions() == 0
    np.testing.assert_allclose(fd.execute([x])[0], np.tanh(x), rtol=1e-6)
    assert fd.id() == 0 and FusionCache.get().num_fusions() == 1
    np.testing.assert_allclose(fd.execute([2 * x])[0], np.tanh(2 * x), rtol=1e-6)
    assert FusionCache.get().num_fusions() == 1  # built once
    assert [e.hit for e in fd.executor_cache.events] == [False, True]


def test_fusion_ir_builds_it_too_and_the_repr_is_the_definitions():
    fd = TanhFusion()
    assert "= tanhf(T0_g[ iS0{i0}, iS1{i1} ]);" in fd.fusion_ir()
    assert repr(fd).splitlines()[1:] == [
        "def nvfuser_fusion_id0(fd : FusionDefinition) -> None :",
        "    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, "
        "stride_order=[1, 0])",
        "    T1 = fd.ops.tanh(T0)",
        "    fd.add_output(T1)",
    ]


def test_two_instances_of_a_subclass_share_the_cached_fusion(x):
    first, second = TanhFusion(), TanhFusion()
    first.execute([x])
    np.testing.assert_allclose(second.execute([x])[0], np.tanh(x), rtol=1e-6)
    assert first.id() == second.id() == 0
    assert second.executor_cache is first.executor_cache


def test_a_definition_with_its_own_schedule_is_one_user_kernel_never_sharing_the_plain_id(x):
    plain, scheduled = TanhFusion(), EmptySchedule()
    plain.execute([x], profile=True)
    np.testing.assert_allclose(scheduled.execute([x], profile=True)[0], np.tanh(x), rtol=1e-6)
    assert (plain.id(), scheduled.id()) == (0, 1) and repr(plain).replace("id0", "id1") == repr(scheduled)
    assert [k.name for k in plain.profile().kernel_profiles] == ["nvfuser_pointwise_f0_c1_r0_g0"]
    assert [(k.name, k.scheduler) for k in scheduled.profile().kernel_profiles] == [
        ("nvfuser_user_f1_c1_r0_g0", "user")
    ]
    again = EmptySchedule()
    again.execute([x])
    assert again.id() == 1 and again.executor_cache is scheduled.executor_cache


def test_an_empty_schedule_runs_and_sees_the_fusion_it_would_schedule(x):
    fd = EmptySchedule()
    EmptySchedule.schedule_ran = False
    np.testing.assert_allclose(fd.execute([x])[0], np.tanh(x), rtol=1e-6)
    assert EmptySchedule.schedule_ran
    assert "T1_g[ iS2{i0}, iS3{i1} ]" in fd.ir_seen and "TransformPrinter" in fd.ir_seen


def test_a_schedule_with_user_scheduling_ops_is_a_fuser_error_naming_the_op(x):
    fd = SplitSchedule()
    with pytest.raises(FuserError) as caught:
        fd.execute([x])
    text = str(caught.value)
    assert "sched.split" in text and "user schedules are not supported: fd.sched.split is not applied" in text
    assert "parallelize" not in text  # the first unsupported call is the one named


def test_a_definition_with_nothing_defined_says_how_to_define_it(x):
    with pytest.raises(NotImplementedError, match="define it in a `with` block or subclass FusionDefinition"):
        FusionDefinition().execute([x])


def test_a_subclass_without_definition_raises_not_implemented(x):
    class NoDefinition(FusionDefinition):
        pass

    with pytest.raises(NotImplementedError, match="implement definition"):
        NoDefinition().execute([x])
