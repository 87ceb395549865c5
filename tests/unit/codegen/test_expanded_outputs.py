"""Outputs with an expanded broadcast axis (`expand`, `broadcast_in_dim` to a larger size):
as nvFuser does, the kernel writes only the compact data (one element along each expanded
axis, each element once) and the output is allocated so, seen with stride 0 along that
axis. Each fusion is lowered on every scheduler that takes it, run on the kernel-IR
interpreter against the reference (compact storage, one write per element), and compiled
for sm_90 with NVRTC where it is installed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.runtime.group_lowering import lowered_groups

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels
from test_nvfuser_regressions import _compile_all

RNG = np.random.default_rng(18)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def pointwise_outer(fd):
    t0 = fd.define_tensor(shape=[-1], contiguity=[True])
    b = fd.ops.broadcast_in_dim(t0, shape=[5, t0.size(0)], broadcast_dims=[1])
    fd.add_output(fd.ops.expand(b, [5, t0.size(0)]))


def pointwise_inner(fd):
    t0 = fd.define_tensor(shape=[-1], contiguity=[True])
    fd.add_output(fd.ops.broadcast_in_dim(fd.ops.mul(t0, t0), shape=[t0.size(0), 6], broadcast_dims=[0]))


def pointwise_middle_half(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half)
    b = fd.ops.broadcast_in_dim(t0, shape=[t0.size(0), 3, t0.size(1)], broadcast_dims=[0, 2])
    fd.add_output(fd.ops.cast(fd.ops.exp(fd.ops.cast(b, DataType.Float)), DataType.Half))


def reduction_keepdim(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    s = fd.ops.sum(t0, [1], keepdim=True)
    fd.add_output(fd.ops.expand(s, [t0.size(0), t0.size(1)]))


def reduction_outer_keepdim(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    s = fd.ops.max(t0, [0], keepdim=True)
    fd.add_output(fd.ops.expand(s, [t0.size(0), t0.size(1)]))


def reduction_symbolic_scalar(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    n = fd.define_scalar(dtype=DataType.Int)
    s = fd.ops.sum(t0, [1], keepdim=True)
    fd.add_output(fd.ops.expand(s, [t0.size(0), n]))


def pointwise_symbolic_size(fd):
    t0 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None])
    t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    fd.add_output(fd.ops.expand(fd.ops.neg(t0), [t0.size(0), fd.ops.size(t1, 1)]))
    fd.add_output(fd.ops.add(t1, t1))


def beside_a_full_output(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    t1 = fd.define_tensor(shape=[-1], contiguity=[True])
    b = fd.ops.broadcast_in_dim(t1, shape=[t0.size(0), t0.size(1)], broadcast_dims=[1])
    fd.add_output(fd.ops.add(t0, b))
    fd.add_output(fd.ops.exp(b))


def inner_persistent(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    s = fd.ops.sum(t0, [1], keepdim=True)
    e = fd.ops.expand(s, [t0.size(0), t0.size(1)])
    fd.add_output(e)
    fd.add_output(fd.ops.sub(t0, e))


def outer_persistent(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
    s = fd.ops.sum(t0, [0], keepdim=True)
    e = fd.ops.expand(s, [t0.size(0), t0.size(1)])
    fd.add_output(e)
    fd.add_output(fd.ops.sub(t0, e))


CASES = {
    "pointwise_outer": (pointwise_outer, lambda: [_f32(7)], "pointwise", [(0, 1)]),
    "pointwise_inner": (pointwise_inner, lambda: [_f32(7)], "pointwise", [(1, 0)]),
    "pointwise_middle_half": (
        pointwise_middle_half,
        lambda: [_f32(4, 9).astype(np.float16)],
        "pointwise",
        [(9, 0, 1)],
    ),
    "reduction_keepdim": (reduction_keepdim, lambda: [_f32(5, 9)], "reduction", [(1, 0)]),
    "reduction_outer_keepdim": (reduction_outer_keepdim, lambda: [_f32(6, 33)], "reduction", [(0, 1)]),
    "reduction_symbolic_scalar": (reduction_symbolic_scalar, lambda: [_f32(5, 9), 4], "reduction", [(1, 0)]),
    "pointwise_symbolic_size": (
        pointwise_symbolic_size,
        lambda: [_f32(5, 1), _f32(5, 8)],
        "pointwise pointwise",
        [(1, 0), (8, 1)],
    ),
    "beside_a_full_output": (beside_a_full_output, lambda: [_f32(5, 9), _f32(9)], "pointwise", [(9, 1), (0, 1)]),
    "inner_persistent": (inner_persistent, lambda: [_f32(5, 40)], "inner_persistent", [(1, 0), (40, 1)]),
    "outer_persistent": (outer_persistent, lambda: [_f32(300, 8)], "outer_persistent", [(0, 1), (8, 1)]),
}


def _fusion(build) -> FusionDefinition:
    with FusionDefinition() as fd:
        build(fd)
    return fd


@pytest.mark.parametrize("name", list(CASES))
def test_an_expanded_output_is_generated_and_written_compactly(name):
    build, make, scheduler, strides = CASES[name]
    fd = _fusion(build)
    inputs = make()
    with use_options(device_model="h100_sxm", backend="reference"):
        outputs = fd.execute(inputs)
        runtime = fd.runtime_for(inputs)
    assert [g.scheduler.value for g in runtime.segmented.groups] == scheduler.split()
    assert lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1] == {}
    # The reference returns what nvFuser returns: stride 0 along each expanded axis.
    assert [tuple(s // o.itemsize for s in o.strides) for o in outputs] == strides
    for vectorize in (True, False):  # compact storage, each element written exactly once
        checked = check_generated_kernels(runtime, inputs, vectorize=vectorize)
        assert checked == [f"kernel_g{i}" for i in range(len(scheduler.split()))]
    _compile_all(runtime)


def test_the_reference_values_of_an_expanded_output():
    x = _f32(5, 9)
    (out,) = _fusion(reduction_keepdim).execute([x])
    np.testing.assert_allclose(out, np.broadcast_to(x.sum(1, keepdims=True), (5, 9)), rtol=1e-5)
    assert out.strides == (4, 0)
    out[1, 0] = 7.0  # one element of memory per row, as a torch `expand` has
    assert (out[1] == 7.0).all()


def squeeze_beside_a_slice(fd):
    t0 = fd.define_tensor(shape=[-1, 1], contiguity=[None, None], dtype=DataType.Float, stride_order=[1, 0])
    t1 = fd.ops.slice(t0, start_indices=[55, 0], end_indices=[96, 1])
    fd.add_output(fd.ops.squeeze(t0, dims=[1]))
    fd.add_output(t1)


def test_an_expanded_output_on_the_loops_of_a_slice_is_written_once():
    """Its loops run over the slice's window (indices 55..95 of the expanded axis): its one
    element is written at the window's first index only, not by all 128 threads (found by
    the fuzzer, seed 3 case 308)."""
    inputs = [np.lib.stride_tricks.as_strided(np.full(1, 2.5, np.float32), (127, 1), (0, 4))]
    fd = _fusion(squeeze_beside_a_slice)
    with use_options(device_model="h100_sxm", backend="reference"):
        squeezed, sliced = fd.execute(inputs)
        runtime = fd.runtime_for(inputs)
    assert squeezed.shape == (127,) and squeezed.strides == (0,) and (squeezed == 2.5).all()
    assert sliced.shape == (41, 1)
    assert lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1] == {}
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, inputs, vectorize=vectorize) == ["kernel_g0"]


def expanded_vectors_beside_a_slice(fd):
    t0 = fd.define_tensor(shape=[-1, 1, -1, -1], contiguity=[None, None, True, True], stride_order=[3, 2, 1, 0])
    t1 = fd.ops.neg(t0)
    fd.add_output(t1)
    fd.add_output(fd.ops.slice(t1, start_indices=[85, 0, 0, 0], end_indices=[127, 1, 5, 2]))


def test_an_expanded_output_stored_in_vectors_is_written_once():
    """The same where the expanded output is stored in vectors along its inner axis: the
    vector store checks the expanded index too (it was written by each of the slice's 42
    rows; the fuzzer, seed 18 case 954, seed 12 case 2457)."""
    data = RNG.standard_normal(10).astype(np.float32)
    inputs = [np.lib.stride_tricks.as_strided(data, (127, 1, 5, 2), (0, 40, 8, 4))]
    fd = _fusion(expanded_vectors_beside_a_slice)
    with use_options(device_model="h100_sxm", backend="reference"):
        negated, sliced = fd.execute(inputs)
        runtime = fd.runtime_for(inputs)
    assert negated.strides[0] == 0 and (negated == -inputs[0]).all()
    assert sliced.shape == (42, 1, 5, 2)
    (group,) = runtime.segmented.groups
    assert group.params.vectorize == 2
    assert lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1] == {}
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, inputs, vectorize=vectorize) == ["kernel_g0"]
    _compile_all(runtime)
