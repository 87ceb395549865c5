"""Regressions from nvFuser's test file, in our own words, run on the kernel-IR interpreter
against the reference and compiled with NVRTC for sm_90:

- a tensor with a trailing broadcast past its ca_pos, squeezed by its consumer (issues
  1691, 1953; a dynamic reshape then squeeze): its register buffer was read with the index
  of its own broadcast loop, a loop that does not enclose the read;
- a row of one (a batch of one, or a permuted [N, 1] column) softmaxed by the re-reading
  reduction schedule, whose input is also squeezed: the squeeze's output has no loops for
  the leading broadcast axes the reduction binds to blockIdx.x and threadIdx.y, so the
  squeezed tensor was inlined nowhere, needed a whole-row buffer, and its group ran on
  the host;
- a cat whose only non-empty input is padded by 0 and 0 (issue 2275): the pad was a
  Set (widths known at definition) or lost its Resize to concretization, and lowering
  found no pad on the cat axis.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import lower_group, translation_unit
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(2275)


def _rand(*shape):
    return (RNG.standard_normal(shape) + 0.5).astype(np.float32)


def sum_then_squeeze(fd):
    """Issue 1691's shape: sums over a leading broadcast and a middle axis, reshaped, multiplied."""
    t0 = fd.define_tensor(shape=[1, -1, -1], contiguity=[None, True, True], dtype=DataType.Float)
    t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    a = fd.ops.reshape(fd.ops.sum(t1, dims=[1]), new_shape=[4])
    b = fd.ops.reshape(fd.ops.sum(t0, dims=[1, 0]), new_shape=[4])
    fd.add_output(fd.ops.sum(fd.ops.mul(a, b), dims=[0]))


def sum_then_squeeze_inputs():
    return [_rand(1, 3, 4), _rand(4, 3)]


def slice_reshape_squeeze(fd):
    """A slice to a size-1 axis, reshaped to [1, 8] and then to [8] (the broadcast squeezed)."""
    t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
    t1 = fd.ops.slice(t0, start_indices=[0, 0, 0], end_indices=[1, 2, 4], strides=[1, 1, 1])
    s1 = fd.define_scalar(1, dtype=DataType.Int)
    s8 = fd.define_scalar(8, dtype=DataType.Int)
    t2 = fd.ops.reshape(t1, new_shape=[s1, s8])
    fd.add_output(fd.ops.reshape(t2, new_shape=[s8]))


def slice_reshape_squeeze_inputs():
    return [_rand(2, 5, 10)]


def _softmax_in_float(fd, t):
    x = fd.ops.cast(t, DataType.Float)
    e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
    return fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True))


def batch_of_one_softmax_and_squeeze(fd):
    """softmax(abs(x)) of a bf16 [1, N] input, with abs(x) squeezed to [N] as well."""
    t0 = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.BFloat16)
    t1 = fd.ops.abs(t0)
    fd.add_output(_softmax_in_float(fd, t1))
    fd.add_output(fd.ops.squeeze(t1, [0]))


def batch_of_one_inputs():
    return [_rand(1, 1024).astype(ml_dtypes.bfloat16)]


def permuted_column_softmax_and_max(fd):
    """A [N, 1] column permuted to [1, N], softmaxed along N, and its max over the size-1
    axis (a squeeze): CPU fuzzer seed 44 case 289, shrunk."""
    t0 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.BFloat16)
    t1 = fd.ops.permute(t0, dims=[1, 0])
    fd.add_output(fd.ops.max(t1, dims=[0]))
    fd.add_output(_softmax_in_float(fd, t1))


def permuted_column_inputs():
    return [_rand(1024, 1).astype(ml_dtypes.bfloat16)]


def _rotate_then_cat_empty(fd, t0):
    lo = fd.ops.slice(t0, start_indices=[0, 0, 0, 0], end_indices=[2, 3, 4, 4], strides=[1, 1, 1, 1])
    hi = fd.ops.slice(t0, start_indices=[0, 0, 0, 4], end_indices=[2, 3, 4, 8], strides=[1, 1, 1, 1])
    rotated = fd.ops.cat([fd.ops.neg(hi), lo], dim=-1)
    y = fd.ops.add(fd.ops.sin(rotated), fd.ops.cos(rotated))
    empty = fd.ops.slice(t0, start_indices=[0, 0, 0, 0], end_indices=[2, 3, 4, 0], strides=[1, 1, 1, 1])
    fd.add_output(fd.ops.cat([y, empty], dim=-1))


def cat_with_empty_symbolic(fd):
    """Issue 2275, repro 2: the cat's widths are symbolic until concretization, which
    removes the trivial Resize of the non-empty piece."""
    _rotate_then_cat_empty(fd, fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.Float))


def cat_with_empty_static(fd):
    """Issue 2275, repro 1: static extents, so the non-empty piece's widths are 0 and 0
    when the cat is defined."""
    _rotate_then_cat_empty(fd, fd.define_tensor(shape=[2, 3, 4, 8], contiguity=True, dtype=DataType.Float))


def cat_inputs():
    return [_rand(2, 3, 4, 8)]


CASES = {
    "sum_then_squeeze": (sum_then_squeeze, sum_then_squeeze_inputs),
    "slice_reshape_squeeze": (slice_reshape_squeeze, slice_reshape_squeeze_inputs),
    "cat_with_empty_symbolic": (cat_with_empty_symbolic, cat_inputs),
    "batch_of_one_softmax_and_squeeze": (batch_of_one_softmax_and_squeeze, batch_of_one_inputs),
    "permuted_column_softmax_and_max": (permuted_column_softmax_and_max, permuted_column_inputs),
    "cat_with_empty_static": (cat_with_empty_static, cat_inputs),
}


def _runtime(build, inputs):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    return runtime


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_match_the_reference_on_the_interpreter(name):
    build, inputs = CASES[name]
    values = inputs()
    runtime = _runtime(build, values)
    checked = check_generated_kernels(runtime, values)
    assert len(checked) == sum(1 for g in runtime.segmented.groups if generates_kernel(g)) >= 1


def _unbound_indices(stmts, bound=frozenset()):
    """Loop indices (`i<ID>`) a statement uses outside every loop that binds them."""
    from fuser_core.codegen import kernel_ir as k
    from fuser_core.codegen.lower import _loop_vars

    found = set()
    for stmt in stmts:
        nodes = []
        if isinstance(stmt, k.Store):
            nodes = [stmt.index, stmt.value]
        elif isinstance(stmt, k.Define):
            nodes = [stmt.value]
        elif isinstance(stmt, k.VectorCopy):
            nodes = [stmt.dst_index, stmt.src_index]
        elif isinstance(stmt, k.If):
            nodes = [stmt.cond]
        for node in nodes:
            found |= _loop_vars(node) - bound
        if isinstance(stmt, k.For):
            found |= _unbound_indices(stmt.body, bound | {stmt.index.name})
        elif isinstance(stmt, k.If):
            found |= _unbound_indices(stmt.then, bound) | _unbound_indices(stmt.orelse, bound)
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_index_is_used_inside_the_loop_that_binds_it(name):
    build, inputs = CASES[name]
    runtime = _runtime(build, inputs())
    for group in runtime.segmented.groups:
        if generates_kernel(group):
            kernel = lower_group(group.fusion, f"k_g{group.id}", DataType.Int32)
            assert _unbound_indices(kernel.body) == set(), kernel.name


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_compile_for_sm90(name):
    nvrtc = pytest.importorskip("fuser_core.runtime.kernel_cache")
    build, inputs = CASES[name]
    runtime = _runtime(build, inputs())
    compiled = 0
    for group in runtime.segmented.groups:
        if not generates_kernel(group):
            continue
        kernel = lower_group(group.fusion, f"nvfuser_{name}_g{group.id}", index_dtype(runtime.signature.index_type))
        module = nvrtc.compile_kernel(translation_unit(kernel), kernel.name, arch="sm_90")
        assert f".entry {kernel.name}" in module.ptx
        compiled += 1
    assert compiled >= 1
