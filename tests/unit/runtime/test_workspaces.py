"""Workspaces (a grid reduction's global work and semaphore buffers) in the cuda backend's
argument packing, sizing, caching and fast-path plans: all on the host, with a stand-in
for CuPy (nothing here launches a kernel)."""

from __future__ import annotations

import copy
import ctypes
import dataclasses
import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from fuser_core.codegen import kernel_ir as k
from fuser_core.ir.dtype import DataType
from fuser_core.runtime.artifacts import LaunchParams
from fuser_core.runtime.device_arrays import allocate_workspace
from fuser_core.runtime.fast_path import FastPlan
from fuser_core.runtime.fast_plan import planned_launch
from fuser_core.runtime.generated_group import GeneratedGroup
from fuser_core.runtime.launch_sizes import workspace_elements
from fuser_core.runtime.packed_args import PackedArgs

WORK = k.Workspace("work_0", DataType.Float, per_thread=2)
SEMAPHORES = k.Workspace("sem_r0", DataType.Int32, per_block=1, zeroed=True)


def tiny_kernel(workspaces: list[k.Workspace], vectorized: bool = False) -> k.Kernel:
    """Two input tensors and a scalar, launched on a 4 x 2 grid of 128-thread blocks."""
    width = 4 if vectorized else 1
    return k.Kernel(
        name="nvfuser_reduction_f0_c0_r0_g0",
        tensors=[
            k.TensorArg("T0", DataType.Float, 2, 2, False, 0, vectorized=width),
            k.TensorArg("T1", DataType.Float, 1, 1, False, 1),
        ],
        scalars=[k.ScalarArg("s2", DataType.Double, 2)],
        body=[],
        launch=[
            k.LaunchDim("blockIdx.x", k.Const(DataType.Index, 4)),
            k.LaunchDim("blockIdx.y", k.Const(DataType.Index, 2)),
            k.LaunchDim("threadIdx.x", k.Const(DataType.Index, 128)),
        ],
        index_type=DataType.Int,
        shared_bytes=512,
        vectorized=vectorized,
        workspaces=workspaces,
    )


def slot(packed: PackedArgs, position: int) -> int:
    """The address parameter `position` of the packed `void*[]` points at."""
    return packed.pointers[position]


# -- packing --------------------------------------------------------------------------------------


def test_packed_args_put_one_pointer_per_workspace_after_the_scalars() -> None:
    packed = PackedArgs(tiny_kernel([WORK, SEMAPHORES]))
    assert len(packed.pointers) == 5  # T0, T1, s2, work_0, sem_r0
    expected = [*packed.structs, *packed.scalars, *packed.workspaces]
    assert [slot(packed, i) for i in range(5)] == [ctypes.addressof(p) for p in expected]
    assert all(isinstance(w, ctypes.c_void_p) and w.value is None for w in packed.workspaces)
    assert packed.address == ctypes.addressof(packed.pointers)


def test_set_workspace_writes_the_pointer_the_kernel_reads() -> None:
    packed = PackedArgs(tiny_kernel([WORK, SEMAPHORES]))
    packed.set_scalar(0, 1.5)
    packed.set_workspace(1, 0xBEEF00)
    packed.set_workspace(0, 0xCAFE00)
    assert ctypes.c_void_p.from_address(slot(packed, 3)).value == 0xCAFE00
    assert ctypes.c_void_p.from_address(slot(packed, 4)).value == 0xBEEF00
    assert ctypes.c_double.from_address(slot(packed, 2)).value == 1.5  # the scalar is untouched


def test_a_kernel_without_workspaces_packs_as_before() -> None:
    packed = PackedArgs(tiny_kernel([]))
    assert len(packed.pointers) == 3
    assert packed.workspaces == []


# -- sizing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workspace", "params", "elements"),
    [
        (WORK, LaunchParams((4, 2, 1), (128, 1, 1)), 4 * 2 * 128 * 2),
        (WORK, LaunchParams((3, 1, 1), (32, 4, 2)), 3 * 32 * 4 * 2 * 2),
        (SEMAPHORES, LaunchParams((4, 2, 3), (128, 1, 1)), 4 * 2 * 3),
        (k.Workspace("sem", DataType.Int, per_block=2, zeroed=True), LaunchParams((5, 1, 1), (64, 1, 1)), 10),
        (WORK, LaunchParams((0, 1, 1), (128, 1, 1)), 0),
    ],
)
def test_workspace_elements(workspace: k.Workspace, params: LaunchParams, elements: int) -> None:
    assert workspace_elements(workspace, params) == elements


def test_allocate_workspace_zeroes_semaphores_only() -> None:
    calls = []
    fake = SimpleNamespace(
        zeros=lambda n, dtype: calls.append(("zeros", n, dtype)) or np.zeros(n, dtype),
        empty=lambda n, dtype: calls.append(("empty", n, dtype)) or np.empty(n, dtype),
    )
    sem = allocate_workspace(fake, SEMAPHORES, 8)
    allocate_workspace(fake, WORK, 2048)
    allocate_workspace(fake, WORK, 0)  # never a null buffer
    assert calls == [("zeros", 8, np.int32), ("empty", 2048, np.float32), ("empty", 1, np.float32)]
    assert not sem.any()


# -- caching on the group --------------------------------------------------------------------------


class FakeCupy:
    """Just enough of CuPy for workspace buffers: arrays with a distinct `.data.ptr`."""

    def __init__(self) -> None:
        self.allocations: list[tuple[str, int, object]] = []
        self.synchronized = 0
        self.stream = 0  # the current stream's pointer
        self._next = itertools.count(0x10000, 0x10000)
        self.cuda = SimpleNamespace(
            get_current_stream=lambda: SimpleNamespace(synchronize=self._synchronize, ptr=self.stream),
            driver=SimpleNamespace(launchKernel=None),
        )

    def _synchronize(self) -> None:
        self.synchronized += 1

    def _array(self, kind: str, n: int, dtype: object) -> SimpleNamespace:
        self.allocations.append((kind, n, dtype))
        return SimpleNamespace(size=n, dtype=dtype, zeroed=kind == "zeros", data=SimpleNamespace(ptr=next(self._next)))

    def zeros(self, n: int, dtype: object) -> SimpleNamespace:
        return self._array("zeros", n, dtype)

    def empty(self, n: int, dtype: object) -> SimpleNamespace:
        return self._array("empty", n, dtype)


def bare_group(kernel: k.Kernel) -> GeneratedGroup:
    group = GeneratedGroup.__new__(GeneratedGroup)  # no fusion or compile needed for workspaces
    group.kernel = kernel
    group._workspaces = {}
    return group


def test_group_keeps_workspaces_and_grows_them() -> None:
    cupy = FakeCupy()
    kernel = tiny_kernel([WORK, SEMAPHORES])
    group = bare_group(kernel)
    small, large = LaunchParams((4, 2, 1), (128, 1, 1)), LaunchParams((16, 2, 1), (128, 1, 1))
    first = group.workspaces(kernel, small, cupy)
    assert [(a.size, a.zeroed) for a in first] == [(2048, False), (8, True)]
    again = group.workspaces(kernel, small, cupy)
    assert [a.data.ptr for a in again] == [a.data.ptr for a in first]  # reused, no memset
    grown = group.workspaces(kernel, large, cupy)
    assert [(a.size, a.zeroed) for a in grown] == [(8192, False), (32, True)]  # reallocated zeroed
    assert len(cupy.allocations) == 4
    back = group.workspaces(kernel, small, cupy)  # a smaller launch uses the larger buffers
    assert [a.data.ptr for a in back] == [a.data.ptr for a in grown]
    assert len(cupy.allocations) == 4


def test_group_keeps_workspaces_per_stream() -> None:
    """Launches on two streams may run at once: each stream has buffers of its own."""
    cupy = FakeCupy()
    kernel = tiny_kernel([WORK, SEMAPHORES])
    group = bare_group(kernel)
    params = LaunchParams((4, 2, 1), (128, 1, 1))
    first = group.workspaces(kernel, params, cupy)
    cupy.stream = 0x7000
    other = group.workspaces(kernel, params, cupy)
    assert {a.data.ptr for a in other}.isdisjoint(a.data.ptr for a in first)
    assert [(a.size, a.zeroed) for a in other] == [(2048, False), (8, True)]  # its semaphores zeroed
    cupy.stream = 0
    assert [a.data.ptr for a in group.workspaces(kernel, params, cupy)] == [a.data.ptr for a in first]
    assert len(cupy.allocations) == 4


def test_a_plan_with_workspaces_is_replayed_on_its_own_stream_only() -> None:
    """The executor finds a plan bound to a stream (its workspaces) only on that stream;
    a plan without workspaces on any."""
    from fuser_core import FusionDefinition
    from fuser_core.options import current_options
    from fuser_core.runtime.executor_cache import FusionExecutorCache, _FastEntry

    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(fd.define_tensor(shape=[-1], contiguity=True), dims=[0]))
    executor = FusionExecutorCache(fd.fusion)
    stream = SimpleNamespace(ptr=0)
    executor._current_stream = lambda: stream
    options = current_options()
    bound = SimpleNamespace(stream_bound=0x7000, final=True, release_outputs=lambda: None)
    free = SimpleNamespace(stream_bound=None, final=True, release_outputs=lambda: None)
    for key, plan in (("bound",), bound), (("free",), free):
        entry = _FastEntry(options, plan, None)  # type: ignore[arg-type]
        entry.replay = lambda inputs: None
        executor._fast[key] = [entry]
    assert executor._fast_lookup(("bound",), options) is None  # on stream 0
    assert executor._fast_lookup(("free",), options).plan is free  # type: ignore[union-attr]
    stream.ptr = 0x7000
    assert executor._fast_lookup(("bound",), options).plan is bound  # type: ignore[union-attr]
    assert executor._fast_lookup(("free",), options).plan is free  # type: ignore[union-attr]


# -- the fast path ---------------------------------------------------------------------------------


def fake_step(kernel: k.Kernel) -> SimpleNamespace:
    """A GeneratedGroup stand-in whose vectorized kernel and scalar fallback are 'compiled'."""
    fallback = copy.copy(kernel)
    fallback.vectorized = False
    fallback.tensors = [dataclasses.replace(t, vectorized=1) for t in kernel.tensors]
    forms = {
        True: SimpleNamespace(function=SimpleNamespace(function=SimpleNamespace(ptr=1)), packed=PackedArgs(kernel)),
        False: SimpleNamespace(function=SimpleNamespace(function=SimpleNamespace(ptr=2)), packed=PackedArgs(fallback)),
    }
    return SimpleNamespace(kernel=kernel, compiled=lambda vectorized: forms[vectorized])


def test_fast_plan_packs_workspaces_once_and_replays_keep_them() -> None:
    cupy = FakeCupy()
    kernel = tiny_kernel([WORK, SEMAPHORES], vectorized=True)
    sizes = {"T0": (8, 64), "T1": (64,)}
    alloc = {"T0": (64, 1), "T1": (1,)}
    launch = planned_launch(cupy, fake_step(kernel), sizes, alloc, {"s2": 0.5}, {0: 0, 1: 1}, [])
    assert launch.params == LaunchParams((4, 2, 1), (128, 1, 1), 512)
    assert [(kind, n) for kind, n, _ in cupy.allocations] == [("empty", 2048), ("zeros", 8)]
    assert cupy.synchronized == 1  # the zero-fill is done before any replay, on any stream
    work, sem = launch.workspaces[WORK], launch.workspaces[SEMAPHORES]
    assert [w.value for w in launch.packed.workspaces] == [work.data.ptr, sem.data.ptr]

    seen = []

    def launch_kernel(function, gx, gy, gz, bx, by, bz, shared, stream, address, extra):
        pointers = (ctypes.c_void_p * 5).from_address(address)
        workspaces = [ctypes.c_void_p.from_address(pointers[i]).value for i in (3, 4)]
        data = ctypes.c_void_p.from_address(pointers[0]).value
        seen.append((function, (gx, gy, gz), (bx, by, bz), shared, data, workspaces))

    inputs = [SimpleNamespace(data_ptr=lambda: 0x1000), SimpleNamespace(data_ptr=lambda: 0x2000)]
    plan = FastPlan([launch], [], False, None, None, inputs, launch_kernel=launch_kernel)  # type: ignore[arg-type]
    assert plan.run(inputs, stream_ptr=7) == []
    misaligned = [SimpleNamespace(data_ptr=lambda: 0x1004), inputs[1]]
    plan.run(misaligned, stream_ptr=7)  # takes the scalar fallback, packed on first need
    assert plan.fell_back == [0]
    plan.run(inputs, stream_ptr=7)
    ptrs = [work.data.ptr, sem.data.ptr]
    assert seen == [
        (1, (4, 2, 1), (128, 1, 1), 0, 0x1000, ptrs),
        (2, (4, 2, 1), (128, 1, 1), 0, 0x1004, ptrs),  # same buffers
        (1, (4, 2, 1), (128, 1, 1), 0, 0x1000, ptrs),
    ]
    assert len(cupy.allocations) == 2  # the fallback shares the plan's buffers
