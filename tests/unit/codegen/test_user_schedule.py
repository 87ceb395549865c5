"""A definition with its own (empty) schedule() runs as nvFuser runs it: one kernel,
unsegmented, scheduler "user", every loop serial; never sharing the plain definition's
fusion id. Its kernel is checked on the interpreter against the reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition, use_options

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(11)


def _ops(fd: FusionDefinition) -> None:
    t0 = fd.define_tensor([-1, -1], contiguity=[True, True], dtype=DataType.Float)
    t1 = fd.define_tensor([-1], contiguity=[True], dtype=DataType.Float)
    t2 = fd.ops.add(t0, fd.ops.broadcast(t1, [True, False]))
    fd.add_output(fd.ops.mul(t2, t2))


class UserScheduled(FusionDefinition):
    def definition(self) -> None:
        _ops(self)

    def schedule(self) -> None:
        pass


def test_an_empty_user_schedule_runs_one_serial_kernel_named_user() -> None:
    a, b = RNG.standard_normal((3, 5)).astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    fd = UserScheduled()
    (squared,) = fd.execute([a, b], profile=True)
    np.testing.assert_allclose(squared, (a + b) ** 2, rtol=1e-6)
    (kernel,) = fd.profile().kernel_profiles
    assert kernel.scheduler == "user"
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for([a, b])
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "user"
    assert check_generated_kernels(runtime, [a, b]) == ["kernel_g0"]


def test_an_unscheduled_reduction_is_refused_by_codegen_with_its_reason() -> None:
    """Codegen needs a reduction's cache, which only a scheduler makes: such a user fusion
    runs on the host in a cuda run, saying why, and its values stay right."""

    class WithSum(FusionDefinition):
        def definition(self) -> None:
            t0 = self.define_tensor([-1, -1], contiguity=[True, True], dtype=DataType.Float)
            self.add_output(self.ops.sum(t0, dims=[1]))

        def schedule(self) -> None:
            pass

    a = RNG.standard_normal((4, 6)).astype(np.float32)
    fd = WithSum()
    (total,) = fd.execute([a])
    np.testing.assert_allclose(total, a.sum(axis=1), rtol=1e-5)
    with use_options(backend="reference"):
        runtime = fd.runtime_for([a])
    assert "a reduction written straight to a fusion output" in str(runtime.kernel_refusals)


def test_the_user_scheduled_fusion_never_shares_the_plain_definitions_id() -> None:
    user = UserScheduled()
    user.execute([RNG.standard_normal((2, 4)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)])
    with FusionDefinition() as plain:
        _ops(plain)
    assert plain.id() != user.id()
    with use_options(backend="reference"):
        runtime = plain.runtime_for([np.ones((2, 4), np.float32) * 0.5, np.ones(4, np.float32) * 0.25])
    assert [g.scheduler.value for g in runtime.segmented.groups] != ["user"]


def test_a_user_schedule_op_is_refused_by_name() -> None:
    class Scheduled(UserScheduled):
        def schedule(self) -> None:
            self.sched.split(self.fusion.outputs[0], 0, 4)

    with pytest.raises(FuserError, match=r"sched\.split"):
        Scheduled().execute([RNG.standard_normal((2, 4)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)])


def test_a_user_schedule_is_made_for_the_sizes_it_ran_with() -> None:
    # nvFuser keys user schedules by input sizes: new sizes schedule again, never reuse.
    fd = UserScheduled()
    small = [RNG.standard_normal((3, 5)).astype(np.float32), RNG.standard_normal(5).astype(np.float32)]
    big = [RNG.standard_normal((6, 7)).astype(np.float32), RNG.standard_normal(7).astype(np.float32)]
    fd.execute(small)
    assert fd.cuda_code_for(small)
    with pytest.raises(FuserError, match=r"Fusion is not compiled! cuda_code_for\(\)"):
        fd.cuda_code_for(big)
    (out,) = fd.execute(big)
    np.testing.assert_allclose(out, (big[0] + big[1]) ** 2, rtol=1e-6)
    assert [e.hit for e in fd.executor_cache.events] == [False, False]
