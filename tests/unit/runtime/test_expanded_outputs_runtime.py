"""The cuda backend's handling of outputs with an expanded broadcast axis, on the host:
fake_cuda stands in for CuPy, and each launch (the first run's and the fast path's) runs
its kernel on the kernel-IR interpreter over the fake device's memory. An expanded output
is allocated compactly (one element along the axis) and returned with stride 0, and a
later kernel, or a host group, reads it so."""

from __future__ import annotations

import numpy as np
import pytest
from fake_cuda import FakeCudaBackend, FakeDevice, interpreted_device, on_device

from fuser_core import DataType, FusionDefinition, FusionExecutorCache
from fuser_core.runtime import cuda_backend, device_arrays
from fuser_core.runtime.fast_path import output_strides, span_elements

RNG = np.random.default_rng(18)


@pytest.fixture
def device(monkeypatch) -> FakeDevice:
    return interpreted_device(monkeypatch)


def element_strides(array) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)


def test_an_expanded_output_is_allocated_compactly_and_returned_with_stride_zero(device):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        s = fd.ops.sum(t0, [1], keepdim=True)
        e = fd.ops.expand(s, [t0.size(0), t0.size(1)])
        fd.add_output(e)
        fd.add_output(fd.ops.sub(t0, e))
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    want = np.broadcast_to(x.sum(1, keepdims=True), x.shape)
    for call in range(3):  # the first run, then the fast path's replays
        expanded, centered = cache.run([on_device(device, x)])
        assert expanded.shape == (6, 40) and element_strides(expanded) == (1, 0)
        assert element_strides(centered) == (40, 1)
        np.testing.assert_allclose(np.asarray(expanded), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(centered), x - want, rtol=1e-5, atol=1e-5)
        if call:
            assert cache.last_report.event.reasons == ("fast path",)
    assert cache.last_runtime.executable.host_reasons == {}


def test_a_later_kernel_reads_an_expanded_output_of_an_earlier_one_with_stride_zero(device):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        s = fd.ops.sum(t0, [1], keepdim=True)
        e = fd.ops.segment_set(fd.ops.expand(s, [t0.size(0), t1.size(1)]))
        fd.add_output(fd.ops.mul(e, t1))
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    y = RNG.standard_normal((5, 9)).astype(np.float32)
    for _ in range(2):
        (out,) = cache.run([on_device(device, x), on_device(device, y)])
        np.testing.assert_allclose(np.asarray(out), x.sum(1, keepdims=True) * y, rtol=1e-5, atol=1e-5)
    runtime = cache.last_runtime
    assert len(runtime.segmented.groups) == 2 and runtime.executable.host_reasons == {}


def test_an_expanded_output_of_a_host_group_stays_stride_zero_on_the_device(device, monkeypatch):
    """A group codegen refuses runs on the host reference; the expanded output it hands the
    next kernel keeps stride 0 (the kernel indexes it so), not a materialized copy."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        s = fd.ops.sum(t0, [1], keepdim=True)
        e = fd.ops.segment_set(fd.ops.expand(s, [t0.size(0), t1.size(1)]))
        fd.add_output(fd.ops.add(e, t1))
    lowered = cuda_backend.lowered_groups

    def first_refused(segmented, runtime_name, index_type):
        kernels, reasons = lowered(segmented, runtime_name, index_type)
        kernels.pop(0, None)
        return kernels, {**reasons, 0: "refused by the test"}

    monkeypatch.setattr(cuda_backend, "lowered_groups", first_refused)
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    y = RNG.standard_normal((4, 10)).astype(np.float32)
    (out,) = cache.run([on_device(device, x), on_device(device, y)])
    np.testing.assert_allclose(np.asarray(out), x.sum(1, keepdims=True) + y, rtol=1e-5, atol=1e-5)
    assert cache.last_runtime.executable.host_reasons == {0: "refused by the test"}


def test_an_output_that_is_an_input_or_its_expansion_still_works(device):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None])
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(t0)
        fd.add_output(fd.ops.expand(t0, [t0.size(0), t1.size(1)]))
        fd.add_output(fd.ops.add(t1, t0))
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    x = RNG.standard_normal((3, 1)).astype(np.float32)
    y = RNG.standard_normal((3, 5)).astype(np.float32)
    same, expanded, summed = cache.run([on_device(device, x), on_device(device, y)])
    np.testing.assert_array_equal(np.asarray(same), x)
    np.testing.assert_array_equal(np.asarray(expanded), np.broadcast_to(x, (3, 5)))
    assert element_strides(expanded)[1] == 0
    np.testing.assert_allclose(np.asarray(summed), x + y, rtol=1e-6)


def test_stride_zero_device_arrays_come_back_to_the_host_with_stride_zero(device):
    compact = on_device(device, np.arange(3, dtype=np.float32).reshape(3, 1))
    expanded = np.broadcast_to(compact, (3, 4)).view(type(compact))
    expanded.fake_device = device
    host = device_arrays.to_host_array(expanded, DataType.Float)
    assert element_strides(host) == (1, 0)
    np.testing.assert_array_equal(host, np.broadcast_to(np.arange(3.0).reshape(3, 1), (3, 4)))


def test_the_fast_path_plans_stride_zero_for_expanded_axes():
    assert output_strides((6, 40), [0, 1], {1}) == (1, 0)
    assert output_strides((6, 3, 40), [0, 1, 2], {1}) == (40, 0, 1)
    assert output_strides((6, 3, 40), [2, 0, 1], {1}) == (1, 0, 6)
    assert output_strides((6, 40), [0, 1]) == (40, 1)


def test_the_fast_path_sizes_an_output_buffer_by_the_sum_of_its_axes_spans():
    # The last element of a (32, 256, 1) tensor with strides (256, 1, 1) is at offset
    # 31 * 256 + 255: the buffer needs 8192 elements (it once had 7937, the largest single
    # axis span, and the next output's buffer overlapped its tail).
    assert span_elements((32, 256, 1), (256, 1, 1)) == 8192
    assert span_elements((6, 3, 40), output_strides((6, 3, 40), [2, 0, 1])) == 720
    assert span_elements((6, 40), (1, 0)) == 6  # an expanded axis holds one element
    assert span_elements((4, 0, 3), (3, 3, 1)) == 0
    assert span_elements((), ()) == 1
