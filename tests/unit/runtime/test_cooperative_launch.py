"""A one-wave grid's reductions (an inner-outer kernel's column sums) folded by every
block after a grid barrier: the kernel is launched with cuLaunchCooperativeKernel on the
full path and on the fast path, its values checked on the kernel-IR interpreter; refused
with a FuserError before anything is launched where the GPU cannot hold every block at
once; and launched as before, folding in the last blocks to arrive, with the disable
option `cooperative_grid`. fake_cuda stands in for CuPy and the GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from fake_cuda import FakeCudaBackend, interpreted_device, on_device

from fuser_core import FuserError, FusionDefinition, FusionExecutorCache, use_options
from fuser_core.runtime import packed_args
from fuser_core.runtime.fast_path import FastPlan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from test_grouped_reductions import _layer_norm_backward_inputs, layer_norm_backward

KERNEL = "nvfuser_inner_outer_persistent_f0_c1_r0_g0"


@pytest.fixture
def device(monkeypatch):
    monkeypatch.setattr(packed_args, "_resident_blocks", {})  # fake function pointers repeat across tests
    return interpreted_device(monkeypatch)


@pytest.fixture
def inputs() -> list[np.ndarray]:
    return _layer_norm_backward_inputs(rows=1200, width=40)


def _cache() -> FusionExecutorCache:
    with FusionDefinition() as fd:
        layer_norm_backward(fd)
    return FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())


def _expected(inputs: list[np.ndarray]) -> list[np.ndarray]:
    with FusionDefinition() as fd:
        layer_norm_backward(fd)
    with use_options(backend="reference"):
        return [np.asarray(o, np.float32) for o in fd.execute(inputs)]


def _check(outs, expected) -> None:
    for out, want in zip(outs, expected, strict=True):
        got = np.asarray(out).view(ml_dtypes.bfloat16)  # CuPy has no bf16: its bits come back
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_an_inner_outer_kernel_is_launched_cooperatively_on_both_paths(device, inputs):
    cache = _cache()
    on_gpu = [on_device(device, x) for x in inputs]
    outs = [cache.run(on_gpu) for _ in range(3)]
    (group,) = cache.last_runtime.segmented.groups
    assert group.params.cooperative_grid and ("cooperative_grid", True) in group.params.shown()
    assert ["fast path" in e.reasons for e in cache.events] == [False, True, True]
    assert device.cooperative == [KERNEL] * 3 and device.launched() == [KERNEL] * 3
    # the occupancy calculator is asked once: the fast path's plan reads the full path's answer
    assert [c for c in device.calls if c.startswith("occupancy")] == [f"occupancy {KERNEL}"]
    expected = _expected(inputs)
    for out in outs:
        _check(out, expected)


def test_with_the_disable_option_it_folds_in_the_last_blocks_and_launches_as_before(device, inputs):
    cache = _cache()
    on_gpu = [on_device(device, x) for x in inputs]
    with use_options(disable=["cooperative_grid"]):
        outs = [cache.run(on_gpu) for _ in range(2)]
    (group,) = cache.last_runtime.segmented.groups
    assert not group.params.cooperative_grid
    assert device.cooperative == [] and device.launched() == [KERNEL] * 2
    expected = _expected(inputs)
    for out in outs:
        _check(out, expected)


def test_a_gpu_that_cannot_hold_every_block_refuses_before_launching(device, inputs):
    device.resident_per_sm, device.sm_count = 1, 16  # a smaller GPU than the heuristics' H100
    cache = _cache()
    with pytest.raises(FuserError, match=r"blocks meet at a grid barrier, but this GPU holds 16 of them") as err:
        cache.run([on_device(device, x) for x in inputs])
    assert err.value.tensor == KERNEL and "cooperative_grid" in str(err.value)
    assert device.launched() == []


def test_a_plan_given_only_a_plain_launcher_still_launches_cooperatively(device, inputs):
    """The fast plan's launchers default each on its own: given only `launch_kernel` (a
    test's), a cooperative kernel still goes through CuPy's cuLaunchCooperativeKernel."""
    cache = _cache()
    on_gpu = [on_device(device, x) for x in inputs]
    cache.run(on_gpu)
    cache.run(on_gpu)
    found = cache.fast_hit(on_gpu)
    assert found is not None
    plan = found[0]
    plain = []
    replay = FastPlan(plan.launches, [], False, plan.device, None, on_gpu, launch_kernel=lambda *a: plain.append(a))
    before = len(device.cooperative)
    assert replay.run(on_gpu, stream_ptr=0) == []
    assert device.cooperative[before:] == [KERNEL] and plain == []
