"""Fusions the differential fuzzer (benchmarks/fuzz_gpu.py) found wrong on the GPU, reduced,
run through the cuda backend against the reference backend."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition, use_options
from fuser_core.runtime import group_lowering

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cuda_backend import _host, _to_device  # noqa: E402


def _everything_on_the_host(monkeypatch):
    def refuse(*args, **kwargs):
        raise FuserError("refused by the test: every group runs on the host", op="test")

    monkeypatch.setattr(group_lowering, "lower_group", refuse)


def test_a_host_group_keeps_a_0_dim_bf16_output_0_dim(monkeypatch):
    # np.ascontiguousarray made the bits of a 0-dim bf16 result shape (1,) on its way to the device
    _everything_on_the_host(monkeypatch)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.sum(t0, dims=[0, 1], keepdim=False, dtype=DataType.BFloat16))
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(DataType.BFloat16.numpy)
    with use_options(backend="reference"):
        (expected,) = fd.execute([x])
    with use_options(backend="cuda"):
        (got,) = fd.execute([_to_device(x)])
    assert fd.executor_cache.last_report.runtime.backend_name == "cuda"
    assert got.shape == ()
    np.testing.assert_array_equal(_host(got, DataType.BFloat16), np.asarray(expected))


def _against_reference(build, inputs, device_inputs=None):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    if device_inputs is None:
        device_inputs = [_to_device(x) if isinstance(x, np.ndarray) else x for x in inputs]
    with use_options(backend="cuda"):
        got = fd.execute(device_inputs)
    assert fd.executor_cache.last_report.runtime.backend_name == "cuda"
    for g, e, tv in zip(got, expected, fd.fusion.outputs, strict=True):
        e = np.asarray(e)
        g = _host(g, tv.dtype)
        assert g.shape == e.shape
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=1e-5, atol=1e-5)
    return fd


def test_a_host_group_hands_an_expanded_intermediate_on_compact():
    # a segment_set of an expanded input runs on the host; the next kernel indexes its
    # result with stride 0 along the expanded axis, so the upload must keep it stride 0
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, None], dtype=DataType.Int)
        fd.add_output(fd.ops.slice(fd.ops.segment_set(t0), start_indices=[0, 10], end_indices=[3, 40]))

    import cupy

    column = np.random.default_rng(3).integers(-9, 9, (3, 1))
    x = np.broadcast_to(column, (3, 64))
    _against_reference(build, [x], [cupy.broadcast_to(cupy.asarray(column), (3, 64))])


def test_fuzzer_shapes_of_slices_outer_welford_and_reshaped_maxima():
    rng = np.random.default_rng(2727)

    def before_slice(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Double)
        t1 = fd.ops.add(0.5, t0)
        fd.add_output(fd.ops.slice(fd.ops.pad(t1, pad_widths=[2, 0, 0, 2], value=0.001), [0, 285], [4, 511]))
        fd.add_output(t1)

    def outer_var_mean(fd):
        t0 = fd.define_tensor(shape=[-1, 16], contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(t0, dims=[0], correction=1, keepdim=False)
        fd.add_output(var)
        fd.add_output(mean)

    def max_then_reshape(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        t1 = fd.ops.broadcast_in_dim(t0, shape=[3, 1024, 2, 7], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.reshape(fd.ops.max(t1, dims=[2], keepdim=False), new_shape=[3, 32, 32, 7]))

    _against_reference(before_slice, [rng.standard_normal((2, 511))])
    _against_reference(outer_var_mean, [rng.standard_normal((645, 16)).astype(np.float32)])
    _against_reference(max_then_reshape, [np.asfortranarray(rng.standard_normal((3, 2)).astype(np.float32))])


def test_a_permuted_output_beside_a_full_welford_is_stored_element_by_element():
    # seed 3 case 4309: welford over every axis of [1024, N, 1] with a permuted output
    # [N, 1, 1024] gave misaligned vector stores (cudaErrorMisalignedAddress)
    def build(fd):
        t0 = fd.define_tensor(shape=[1024, -1, 1], contiguity=[True, True, None], dtype=DataType.Double)
        t1 = fd.ops.cast(fd.ops.cast(t0, dtype=DataType.Half), dtype=DataType.Float)  # exact on both
        avg, _, _ = fd.ops.welford(t0, dims=[0, 1, 2])
        fd.add_output(fd.ops.permute(fd.ops.permute(t1, dims=[2, 0, 1]), dims=[2, 0, 1]))
        fd.add_output(avg)
        fd.add_output(fd.ops.squeeze(t0, dims=[2]))

    _against_reference(build, [np.random.default_rng(4309).standard_normal((1024, 32, 1))])


def test_a_half_sum_adds_its_partials_in_float_on_the_device():
    # the partials of a Half sum were rounded to Half before they were added
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=DataType.Half)
        fd.add_output(fd.ops.sum(t0, dims=[0], keepdim=True, dtype=DataType.Null))
    x = (np.random.default_rng(1704).standard_normal((64, 16, 1)) * 4).astype(np.float16)
    with use_options(backend="cuda"):
        (got,) = fd.execute([_to_device(x)])
    exact = x.astype(np.float64).sum(axis=0, keepdims=True)
    # one rounding to Half of a float sum: within one Half step of the exact sum
    np.testing.assert_allclose(_host(got, DataType.Half).astype(np.float64), exact, rtol=2**-10, atol=2**-10)


def test_a_double_rounds_to_half_once_and_to_bfloat16_as_the_reference():
    # through float a double just above a Half midpoint lands on the midpoint and rounds
    # to even: double rounding; one cvt from f64 rounds it up, as NumPy does. BFloat16
    # goes through float, as the reference's ml_dtypes (and torch) do
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Double)
        fd.add_output(fd.ops.cast(t0, dtype=DataType.Half))
        fd.add_output(fd.ops.cast(t0, dtype=DataType.BFloat16))
    x = np.array([1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40, -(1 + 2.0**-11 + 2.0**-40)])
    with use_options(backend="cuda"):
        half, bf16 = fd.execute([_to_device(x)])
    np.testing.assert_array_equal(_host(half, DataType.Half), x.astype(np.float16))
    assert float(_host(half, DataType.Half)[0]) == 1 + 2.0**-10
    np.testing.assert_array_equal(
        _host(bf16, DataType.BFloat16).astype(np.float64), x.astype(DataType.BFloat16.numpy).astype(np.float64)
    )
    assert float(_host(bf16, DataType.BFloat16)[1]) == 1.0


@pytest.mark.parametrize("n", [5, 1001])
def test_a_permuted_input_read_through_a_reshape_loads_no_scattered_vector(n):
    # CPU fuzzer seed 47 case 952: a column-major bf16 [2, n] compared in logical order
    # (reshaped) with its permute; the reshaped path's copy was a vector load of elements
    # that are not neighbours in memory (misaligned on the H100)
    def build(fd):
        t0 = fd.define_tensor(shape=[2, -1], contiguity=[True, True], dtype=DataType.BFloat16, stride_order=[0, 1])
        t1 = fd.ops.permute(t0, dims=[1, 0])
        t3 = fd.ops.reshape(fd.ops.reshape(t0, new_shape=[2 * n]), new_shape=[n, 2])
        fd.add_output(fd.ops.eq(t3, t1))
        fd.add_output(fd.ops.add(t3, t1))

    x = np.random.default_rng(952).standard_normal((n, 2)).astype(DataType.BFloat16.numpy).T
    _against_reference(build, [x])


def test_an_output_of_a_hoisted_load_beside_a_grid_sum_runs_as_one_kernel():
    # seed 68 case 273: the [1, 1, 1] input's output was emitted between the grid sum's
    # serial partial and the grid reduction; codegen refused and the group ran on the host
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True], dtype=DataType.Half)
        t1 = fd.define_tensor(shape=[1, 1, 1], contiguity=[None, None, None], dtype=DataType.Int32)
        fd.add_output(fd.ops.sum(fd.ops.pad(t0, pad_widths=[3, -1], value=-1.25), dims=[0]))
        fd.add_output(fd.ops.bitwise_not(fd.ops.stride_order(t1, stride_order=[2, 0, 1])))

    rng = np.random.default_rng(273)
    x = (rng.standard_normal((20000, 1, 31)) * 0.5).astype(np.float16)  # sums stay in half range
    m = np.array([[[7]]], dtype=np.int32)
    with FusionDefinition() as fd:
        build(fd)
    with use_options(backend="cuda"):
        total, inverted = fd.execute([_to_device(x), _to_device(m)])
    runtime = fd.executor_cache.last_runtime
    assert group_lowering.lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1] == {}
    padded = np.pad(x[..., :-1].astype(np.float64), ((0, 0), (0, 0), (3, 0)), constant_values=-1.25)
    # a float sum rounded once to half: within a half step of the exact sum
    np.testing.assert_allclose(
        _host(total, DataType.Half).astype(np.float64), padded.sum(axis=0), rtol=2**-10, atol=0.05
    )
    assert _host(inverted, DataType.Int32).reshape(-1).tolist() == [~7]
