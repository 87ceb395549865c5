"""The cache-hit fast path's host side, on the host: fake_cuda stands in for CuPy and the
GPU. A plan's replay is generated code, the executor cache replays its last plan behind
a guard that compares the inputs with the plan's key in place, and a hit's RunReport is
made only when the reports are read. What users and tests see must not change: the
same events and reports, a miss where the key differs, the scalar fallback reported."""

from __future__ import annotations

import inspect
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
from fake_cuda import CUDARuntimeError, FakeCudaBackend, FakeDevice, interpreted_device, on_device

from fuser_core import DataType, FusionDefinition, FusionExecutorCache, use_options
from fuser_core.runtime import executor_cache, fast_path
from fuser_core.runtime.executor_cache import RunReport
from fuser_core.runtime.fast_path import RecycledOutput, input_guard, input_key
from fuser_core.runtime.launch_errors import CudaFaultError

G0 = "nvfuser_pointwise_f0_c1_r0_g0"
G1 = "nvfuser_pointwise_f0_c1_r0_g1"


class TorchLike:
    """What the fast path reads of a torch tensor, in a class whose module says torch."""

    __module__ = "torch"

    def __init__(self, shape, strides, dtype="float32", device=0, is_cuda=True) -> None:
        self.shape, self._strides, self.dtype, self._device, self.is_cuda = shape, strides, dtype, device, is_cuda

    def stride(self):
        return self._strides

    def get_device(self):
        return self._device if self.is_cuda else -1

    def data_ptr(self):
        return 0x1000


class TorchSubclass(TorchLike):
    __module__ = "torch.nn"


def doubled() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[None, None], dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t0))
    return fd


@pytest.fixture
def device(monkeypatch) -> FakeDevice:
    """Every launch runs its kernel on the interpreter: outputs are checked."""
    return interpreted_device(monkeypatch)


@pytest.fixture
def cache(device) -> FusionExecutorCache:
    return FusionExecutorCache(doubled().fusion, backend=FakeCudaBackend())


def device_array(device: FakeDevice, shape=(8, 64), order="C"):
    return on_device(device, np.asarray(np.arange(np.prod(shape), dtype=np.float32).reshape(shape), order=order))


def fast(cache: FusionExecutorCache) -> list[bool]:
    """Per run: whether the fast path replayed it."""
    return ["fast path" in e.reasons for e in cache.events]


# -- the guard ------------------------------------------------------------------------------


def test_the_guard_accepts_exactly_the_inputs_with_the_same_key(device):
    cupy = device_array(device)
    planned = [TorchLike((8, 64), (64, 1)), cupy, 3, 0.5, True]
    others = [
        [TorchLike((8, 64), (64, 1)), device_array(device), 3, 0.5, True],  # the same key
        [TorchLike((8, 65), (64, 1)), cupy, 3, 0.5, True],  # a size
        [TorchLike((8, 64), (1, 8)), cupy, 3, 0.5, True],  # a stride
        [TorchLike((8, 64), (64, 1), dtype="float16"), cupy, 3, 0.5, True],
        [TorchLike((8, 64), (64, 1), device=1), cupy, 3, 0.5, True],
        [TorchLike((8, 64), (64, 1), is_cuda=False), cupy, 3, 0.5, True],  # no key at all
        [TorchLike((8, 64), (64, 1)), device_array(device, order="F"), 3, 0.5, True],
        [TorchLike((8, 64), (64, 1)), device_array(device, (8, 32)), 3, 0.5, True],
        [TorchLike((8, 64), (64, 1)), cupy.astype(np.float64), 3, 0.5, True],
        [TorchLike((8, 64), (64, 1)), cupy, 4, 0.5, True],  # a scalar's value
        [TorchLike((8, 64), (64, 1)), cupy, 3, 0.25, True],
        [TorchLike((8, 64), (64, 1)), cupy, 3, 0.5, 1],  # a bool's type
        [TorchLike((8, 64), (64, 1)), cupy, 3.0, 0.5, True],
        [TorchLike((8, 64), (64, 1)), cupy, 3, 0.5],  # fewer inputs
        [TorchLike((8, 64), (64, 1)), on_gpu_1(cupy), 3, 0.5, True],  # a CuPy array on another GPU
        [TorchLike((8, 64), (64, 1)), cupy, 3, 0.5, True, 1],
    ]
    accepts = input_guard(planned)
    assert accepts is not None
    for inputs in others:
        assert accepts(inputs) == (input_key(inputs) == input_key(planned)), inputs
    assert input_guard([np.ones(3)]) is None  # host arrays have no key


def on_gpu_1(array):
    """`array` as CuPy would hold it on a second GPU."""
    moved = array.copy()
    moved.gpu = 1
    return moved


@pytest.mark.parametrize(("planned", "other"), [(0.0, -0.0), (-0.0, 0.0), (1.5, 1.5)])
def test_a_float_scalar_is_keyed_by_its_sign_too(planned, other):
    """1 / -0.0 is -inf: a plan made for 0.0 must not replay -0.0 (its value is packed)."""
    same = (planned == other) and (str(planned) == str(other))
    assert (input_key([other]) == input_key([planned])) == same
    assert input_guard([planned])([other]) == same  # type: ignore[misc]


def test_the_guard_refuses_a_subclass_whose_key_is_the_same():
    """Stricter than the key, never looser: the lookup then finds the plan."""
    planned, other = [TorchLike((4,), (1,))], [TorchSubclass((4,), (1,))]
    assert input_key(other) == input_key(planned)
    assert input_guard(planned)(other) is False  # type: ignore[misc]


def test_the_last_plan_misses_on_other_strides_and_is_found_again(cache, device):
    rows, columns = device_array(device), device_array(device, order="F")
    for x in (rows, rows, columns, columns, rows):
        cache.run([x])
    # The column-major call is not the row-major plan's: a new runtime, then its own plan;
    # the row-major call after it is found by its key again.
    assert fast(cache) == [False, True, False, True, True]
    assert [r.arguments[0].split(" strides ")[1] for r in cache.reports] == ["[64, 1] (cupy)", "[64, 1] (cupy)"] + [
        "[1, 8] (cupy)"
    ] * 2 + ["[64, 1] (cupy)"]


def test_a_new_options_block_with_equal_options_still_takes_the_fast_path(cache, device):
    x = device_array(device)
    for _ in range(4):
        with use_options(backend="cuda"):  # a new, equal Options object each time
            cache.run([x])
            cache.run([x])
    assert fast(cache) == [False] + [True] * 7
    with use_options(enable="sync_launches"):  # options the plan was not made under
        cache.run([x])
    assert fast(cache)[-1] is False


# -- the reports of hits ----------------------------------------------------------------------


def test_a_hit_makes_its_report_when_the_reports_are_read(cache, device, monkeypatch):
    made = []
    repeated = RunReport.repeated
    monkeypatch.setattr(RunReport, "repeated", lambda self, *args: made.append(args[0]) or repeated(self, *args))
    x = device_array(device)
    for _ in range(4):
        cache.run([x])
    assert made == []  # three hits, no report made yet
    assert cache.last_runtime is not None and made == []
    assert [r.index for r in cache.reports] == [0, 1, 2, 3] and made == [1, 2, 3]
    assert all(r.event.hit and r.seconds > 0 for r in list(cache.reports)[1:])
    cache.run([device_array(device, (4, 64))])  # a miss after two more hits
    cache.run([x])
    assert [r.index for r in cache.reports] == [0, 1, 2, 3, 4, 5]
    assert fast(cache) == [False, True, True, True, False, True]
    assert cache.reports[4].event.reasons == ("input 0 shape [8, 64] -> [4, 64]",)


def test_only_the_last_reports_are_kept_with_their_run_indices(device, monkeypatch):
    monkeypatch.setattr(executor_cache, "REPORTS_KEPT", 5)
    cache = FusionExecutorCache(doubled().fusion, backend=FakeCudaBackend())
    x = device_array(device)
    for _ in range(12):
        cache.run([x])
    assert [r.index for r in cache.reports] == [7, 8, 9, 10, 11]
    assert cache.last_report is not None and cache.last_report.index == 11


def test_a_replay_that_takes_the_scalar_fallback_says_so(device):
    """Misaligned pointers (a view one element in) launch the scalar fallback, with the
    right pointers; aligned ones the vectorized kernel."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t0))
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    base = on_device(device, np.arange(1025, dtype=np.float32))
    for x in (base[:1024], base[:1024], base[1:], base[:1024]):
        (out,) = cache.run([x])
        np.testing.assert_array_equal(np.asarray(out), 2 * np.asarray(x))
    kernels = [r.launches[0].kernel for r in cache.reports]
    assert kernels[2] == f"{G0} (scalar fallback)" and "fallback" not in kernels[1] + kernels[3]
    assert fast(cache) == [False, True, True, True]


def test_a_kernel_result_returned_through_a_reshape_is_replayed_as_a_view_of_it(device):
    """A normalization's result reshaped: the kernel, then a no_op view of its output. The
    view joins the plan (the reshape of what the kernel wrote), so hits stay on the fast
    path; a view read by another kernel would not (the plan refuses it)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        centred = fd.ops.sub(t0, fd.ops.sum(t0, [1], keepdim=True))
        fd.add_output(fd.ops.reshape(centred, [fd.ops.size(t0, 0), 4, -1]))
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    x = on_device(device, np.random.default_rng(7).standard_normal((6, 32)).astype(np.float32))
    outs = [cache.run([x])[0] for _ in range(3)]
    schedulers = [g.scheduler.value for g in cache.last_runtime.segmented.groups]
    assert schedulers == ["inner_persistent", "no_op"]
    assert fast(cache) == [False, True, True]
    expected = (np.asarray(x) - np.asarray(x).sum(axis=1, keepdims=True)).reshape(6, 4, 8)
    for out in outs:
        assert out.shape == (6, 4, 8) and out.base is not None  # a view of the kernel's output
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)
    assert [len(r.launches) for r in cache.reports] == [1, 1, 1]


# -- faults of a replay ------------------------------------------------------------------------


def two_kernels() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        t1 = fd.ops.segment_set(fd.ops.exp(t0))
        fd.add_output(fd.ops.mul(t1, t1))
    return fd


def test_a_fault_reported_by_an_allocation_names_the_kernels_launched_before_it(device, monkeypatch):
    monkeypatch.setattr(fast_path, "RECYCLING", False)  # every replay allocates its outputs
    cache = FusionExecutorCache(two_kernels().fusion, backend=FakeCudaBackend())
    x = device_array(device)
    cache.run([x])
    cache.run([x])
    allocations = []

    def allocate(call):  # the second output's memory: CUDA reports a fault there
        allocations.append(call)
        if allocations.count("alloc") == 2:
            raise CUDARuntimeError(700, "cudaErrorIllegalAddress: an illegal memory access was encountered")

    monkeypatch.setattr(device, "allocate", allocate)
    with pytest.raises(CudaFaultError) as caught:
        cache.run([x])
    fault = caught.value.fault
    assert [k.name for k in fault.kernels] == [G0] and not fault.pinned
    assert fault.where == f"allocating outputs after launching g0 {G0}"
    assert caught.value.runtime is cache.last_runtime


def test_execute_replays_the_last_plan_and_a_refused_launch_names_its_kernel(device, monkeypatch):
    monkeypatch.setattr(executor_cache, "select_backend", lambda name, model: FakeCudaBackend())
    fd = two_kernels()
    x = device_array(device)
    outputs = [fd.execute([x])[0] for _ in range(3)]
    assert all(type(out).__module__ == "cupy" for out in outputs)  # as they are: no conversion
    np.testing.assert_array_equal(np.asarray(outputs[2]), np.asarray(outputs[1]))
    assert fast(fd.executor_cache) == [False, True, True]
    device.refuse(G1)
    with pytest.raises(CudaFaultError) as caught:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        fd.execute([x])
    err = caught.value
    assert err.fault.pinned and [k.name for k in err.kernels] == [G1]
    assert err.runtime is fd.executor_cache.last_runtime and err.location is not None
    assert err.location.filename == __file__ and err.location.lineno != line  # the line of its op


# -- recycled outputs ------------------------------------------------------------------------


def allocations(device: FakeDevice) -> int:
    return device.calls.count("ndarray")


@pytest.fixture
def dense(device) -> FusionExecutorCache:
    """x + x over a contiguous [N, M] input: every output element its own."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t0))
    return FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())


def test_an_output_the_caller_dropped_is_given_again(dense, device):
    x = device_array(device)
    dense.run([x])
    first = dense.run([x])[0]
    made = allocations(device)
    second = dense.run([x])[0]  # the first is held: a new one
    assert second is not first and allocations(device) == made + 1
    del second
    third = dense.run([on_device(device, np.asarray(x) * 3)])[0]  # the second was dropped: no allocation
    assert allocations(device) == made + 1
    np.testing.assert_array_equal(np.asarray(third), np.asarray(x) * 6)
    np.testing.assert_array_equal(np.asarray(first), np.asarray(x) * 2)
    assert fast(dense) == [False, True, True, True]


@pytest.mark.parametrize(
    "keep",
    [
        lambda out: out[1:],  # a view: it refers to its base
        lambda out: out.data,  # its memory pointer
        lambda out: SimpleNamespace(ptr=out.data.mem),  # its memory, through a pointer of its own
        lambda out: [out],  # the array itself, anywhere
        lambda out: weakref.ref(out),  # a weak reference would see it again
        lambda out: setattr(out, "shape", (out.size,)),  # reshaped in place: not the plan's layout
    ],
)
def test_an_output_still_reachable_is_not_given_again(dense, device, keep):
    x = device_array(device)
    dense.run([x])
    out = dense.run([x])[0]
    kept = keep(out)
    del out
    made = allocations(device)
    again = dense.run([on_device(device, np.asarray(x) * 3)])[0]
    assert allocations(device) == made + 1 and again.shape == x.shape
    np.testing.assert_array_equal(np.asarray(again), np.asarray(x) * 6)
    if isinstance(kept, np.ndarray):
        np.testing.assert_array_equal(np.asarray(kept), (np.asarray(x) * 2)[1:])  # untouched
    if isinstance(kept, weakref.ref):
        assert kept() is not again


def test_an_output_is_given_again_on_its_own_stream_only():
    made = []

    def make():
        made.append(SimpleNamespace(data=SimpleNamespace(mem=SimpleNamespace()), shape=(4,)))
        return made[-1]

    recycled = RecycledOutput(make)
    assert recycled(7) is made[0]
    assert recycled(7) is made[0] and len(made) == 1  # nothing else holds it
    assert recycled(8) is made[1]  # another stream: CuPy's pool would not give it there
    held = recycled(8)
    assert held is made[1] and recycled(8) is made[2]  # held by the caller: a new one


def test_a_large_output_is_allocated_at_every_hit(dense, device):
    """A plan would keep a large output alive between its hits: only small ones are recycled."""
    x = on_device(device, np.ones((1024, 1025), np.float32))  # just over 4 MiB
    dense.run([x])
    dense.run([x])
    made = allocations(device)
    dense.run([x])
    assert allocations(device) == made + 1


def test_an_executor_keeps_the_outputs_of_its_last_plan_only(dense, device):
    small, large = device_array(device), device_array(device, shape=(16, 64))
    for x in (small, small, large, large):
        dense.run([x])
    made = allocations(device)
    dense.run([small])  # its plan let its output go when the other plan was replayed
    assert allocations(device) == made + 1
    dense.run([small])
    assert allocations(device) == made + 1  # and keeps the new one


# -- torch outputs: torch's lower-overhead allocator on the plan's device ----------------------


class _TorchOut:
    """A torch output as the replay uses it: its data pointer (aligned), then returned."""

    __module__ = "torch"

    def __init__(self, how, args, kwargs) -> None:
        self.how, self.args, self.kwargs = how, args, kwargs

    def data_ptr(self):
        return 0x2000


def _fake_torch(current: list[int], calls: list[_TorchOut], fast: bool) -> SimpleNamespace:
    def allocator(how):
        def allocate(*args, **kwargs):
            calls.append(_TorchOut(how, args, kwargs))
            return calls[-1]

        return allocate

    guards = SimpleNamespace(_empty_strided_cuda=allocator("fast")) if fast else SimpleNamespace()
    dtypes = {name: f"torch.{name}" for name in fast_path._TORCH_DTYPES.values()}
    return SimpleNamespace(
        empty_strided=allocator("empty_strided"),
        device=lambda kind, index: SimpleNamespace(type=kind, index=index),
        cuda=SimpleNamespace(current_device=lambda: current[0]),
        _C=SimpleNamespace(_dynamo=SimpleNamespace(guards=guards), _cuda_getDevice=lambda: current[0]),
        **dtypes,
    )


@pytest.mark.parametrize("fast", [True, False])
def test_torch_outputs_come_from_the_fast_allocator_while_the_plans_device_is_current(cache, device, monkeypatch, fast):
    """Inductor's `_empty_strided_cuda` allocates on the current device: a replay takes it
    (shape, strides and dtype positionally, as tuples) while the plan's device is current,
    and torch.empty_strided on the plan's device otherwise, or where torch lacks it."""
    x = device_array(device)
    cache.run([x])
    cache.run([x])
    found = cache.fast_hit([x])
    assert found is not None
    current, calls = [1], []
    monkeypatch.setitem(__import__("sys").modules, "torch", _fake_torch(current, calls, fast))
    launched = []
    # extents as the plan may hold them (NumPy integers): the fast allocator takes Python ints
    (planned,) = found[0].launches[0].outputs
    planned.shape, planned.strides = (
        tuple(np.int64(n) for n in planned.shape),
        tuple(np.int64(n) for n in planned.strides),
    )
    plan = fast_path.FastPlan(
        found[0].launches, [planned.name], True, found[0].device, None,
        [TorchLike((8, 64), (64, 1), device=1)], launch_kernel=lambda *a: launched.append(a),
    )  # fmt: skip
    (out,) = plan.run([TorchLike((8, 64), (64, 1), device=1)], 0)
    current[0] = 0  # another device is current now
    (elsewhere,) = plan.run([TorchLike((8, 64), (64, 1), device=1)], 0)
    assert len(launched) == 2 and out is calls[0] and elsewhere is calls[1]
    if fast:
        ints = (tuple(map(int, planned.shape)), tuple(map(int, planned.strides)))
        assert (out.how, out.args, out.kwargs) == ("fast", (*ints, "torch.float32"), {})
        assert all(type(n) is int for n in (*out.args[0], *out.args[1]))
        assert "current_device()" in plan.source and "current_device()" not in plan.source_elsewhere
    else:
        assert out.how == "empty_strided" and "current_device()" not in plan.source and not plan.source_elsewhere
    # on another device: torch.empty_strided on the plan's device (1), not the current one
    assert elsewhere.how == "empty_strided" and elsewhere.kwargs["device"].index == 1
    assert elsewhere.args == (planned.shape, planned.strides) and elsewhere.kwargs["dtype"] == "torch.float32"
