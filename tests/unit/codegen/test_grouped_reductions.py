"""Several reductions in one kernel (issues 18 and 19), which codegen used to send to the
host: a Welford beside a sum of one input, grid Welford reductions, two grid reductions in
one kernel (layer-norm backward's weight and bias gradients), outputs of a reduction's
input written after the reduction, a Welford whose average nothing reads, and an input
cache that would need a buffer of run-time size. Each is
lowered without a refusal, run on the kernel-IR interpreter against the reference on
random data, and compiled for sm_90 with NVRTC (skipped where NVRTC is missing)."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen import lower_group, translation_unit
from fuser_core.runtime.group_lowering import index_dtype, lowered_groups

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(1819)


def _rand(*shape, dtype=np.float32):
    return (RNG.standard_normal(shape) + 0.5).astype(dtype)


# -- the fusions (shared with tests/gpu/test_grouped_reductions_gpu.py) -----------------------


def welford_and_sum(fd):
    """var_mean and sum of one input's rows: the Welford and the sum's partial share its loads."""
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(t0, [1])
    fd.add_output(var)
    fd.add_output(fd.ops.add(mean, fd.ops.sum(t0, [1])))


def var_mean_columns(fd):
    """var_mean down the columns of a tall input: an outer grid Welford."""
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(t0, [0])
    fd.add_output(var)
    fd.add_output(mean)


def var_mean_rows(fd):
    """var_mean of a few long rows: an inner grid Welford."""
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(t0, [1])
    fd.add_output(var)
    fd.add_output(mean)


def sum_and_sum_of_squares(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sum(t0, [1]))
    fd.add_output(fd.ops.sum(fd.ops.mul(t0, t0), [1]))


def sum_plus_max(fd):
    """One output from two grid reductions: both results must be in the same block."""
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.add(fd.ops.sum(t0, [1]), fd.ops.max(t0, [1])))


def layer_norm_backward_weight_bias(fd):
    """Layer-norm backward's weight and bias gradients: two outer reductions over the rows."""
    dy = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    x_hat = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sum(fd.ops.mul(dy, x_hat), [0]))
    fd.add_output(fd.ops.sum(dy, [0]))


def layer_norm_backward(fd):
    """The whole layer-norm backward (input, weight and bias gradients) over enough rows for
    one inner-outer persistent kernel: rows normalized in a loop per block, the column
    sums accumulated across it and combined over its blocks in a two-level grid tree where there are more than 64."""
    dy = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
    x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
    mean = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
    rstd = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
    weight = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.BFloat16)
    size = fd.ops.size(x, 1)
    x_hat = fd.ops.mul(fd.ops.sub(fd.ops.cast(x, DataType.Float), mean), rstd)
    dy_f = fd.ops.cast(dy, DataType.Float)
    g = fd.ops.mul(dy_f, fd.ops.broadcast_in_dim(fd.ops.cast(weight, DataType.Float), x.shape(), [1]))
    a = fd.ops.sum(g, [1], keepdim=True)
    b = fd.ops.sum(fd.ops.mul(g, x_hat), [1], keepdim=True)
    inner = fd.ops.sub(fd.ops.sub(fd.ops.mul(g, size), a), fd.ops.mul(x_hat, b))
    fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.div(rstd, size), inner), DataType.BFloat16))
    fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(dy_f, x_hat), [0]), DataType.BFloat16))
    fd.add_output(fd.ops.cast(fd.ops.sum(dy_f, [0]), DataType.BFloat16))


def _layer_norm_backward_inputs(rows: int = 2200, width: int = 48) -> list[np.ndarray]:
    return [
        _rand(rows, width, dtype=ml_dtypes.bfloat16),
        _rand(rows, width, dtype=ml_dtypes.bfloat16),
        _rand(rows, 1),
        np.abs(_rand(rows, 1)) + 0.5,
        _rand(width, dtype=ml_dtypes.bfloat16),
    ]


def column_sum_of_many_blocks(fd):
    """A sum down a few tall columns, split over more than 64 blocks: its grid reduction
    combines in two levels (groups of blocks, then the groups)."""
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sum(t0, [0]))


def var_mean_of_many_blocks(fd):
    """var_mean down 8 tall columns over more than 64 blocks: a grid Welford of 4 values a
    thread, combined in two levels (each slot's values loaded together)."""
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(t0, [0])
    fd.add_output(var)
    fd.add_output(mean)


def welford_and_sum_grid(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(t0, [1])
    fd.add_output(fd.ops.add(var, mean))
    fd.add_output(fd.ops.sum(t0, [1]))


def sum_and_its_input_reshaped(fd):
    """A reduction group writing its input (reshaped) and a pointwise value of another input
    beside the sum (fuzzer seed 3 case 21): the copy is written after the reduction."""
    t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Half)
    t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Half)
    t4 = fd.ops.add(fd.ops.abs(t1), 0.5)
    total = fd.ops.sum(fd.ops.mod(t0, t4), dims=[0], dtype=DataType.Float)
    fd.add_output(fd.ops.abs(total))
    fd.add_output(t4)
    fd.add_output(fd.ops.reshape(t0, new_shape=[fd.ops.size(t0, 0)]))


def variance_only(fd):
    """A Welford whose average is read by nothing (fuzzer seed 3 case 167)."""
    t0 = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.Float)
    var, _mean = fd.ops.var_mean(t0, [0, 1], correction=0)
    fd.add_output(fd.ops.reshape(t0, new_shape=[1, 1, fd.ops.size(t0, 1)]))
    fd.add_output(var)


def max_and_squeezed_input(fd):
    """A reduction of an input with a size-1 axis beside the input squeezed: the input's
    cache matches neither consumer's loops, and its buffer would have a run-time size; each
    consumer loads it instead (fuzzer seed 3 case 158)."""
    t0 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
    fd.add_output(fd.ops.max(t0, [0]))
    fd.add_output(fd.ops.squeeze(t0, [1]))


CASES = {
    "welford_and_sum": (welford_and_sum, lambda: [_rand(40, 30)]),
    "var_mean_columns": (var_mean_columns, lambda: [_rand(4000, 3)]),
    "var_mean_rows": (var_mean_rows, lambda: [_rand(4, 100000)]),
    "sum_and_sum_of_squares": (sum_and_sum_of_squares, lambda: [_rand(4, 100000)]),
    "sum_plus_max": (sum_plus_max, lambda: [_rand(3, 100000)]),
    "layer_norm_backward_weight_bias": (layer_norm_backward_weight_bias, lambda: [_rand(20000, 64), _rand(20000, 64)]),
    "welford_and_sum_grid": (welford_and_sum_grid, lambda: [_rand(4, 100000)]),
    "layer_norm_backward": (layer_norm_backward, _layer_norm_backward_inputs),
    "column_sum_of_many_blocks": (column_sum_of_many_blocks, lambda: [_rand(200000, 4)]),
    "var_mean_of_many_blocks": (var_mean_of_many_blocks, lambda: [_rand(100000, 8)]),
    "sum_and_its_input_reshaped": (
        sum_and_its_input_reshaped,
        lambda: [_rand(1025, dtype=np.float16), _rand(1025, dtype=np.float16)],
    ),
    "variance_only": (variance_only, lambda: [_rand(1, 64)]),
    "max_and_squeezed_input": (max_and_squeezed_input, lambda: [_rand(37, 1)]),
}


def _runtime(build, inputs):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        return fd.runtime_for(inputs)


def _kernels(runtime) -> list[k.Kernel]:
    kernels, refused = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)
    assert not refused, refused
    return list(kernels.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_on_the_interpreter(name):
    build, make = CASES[name]
    inputs = make()
    runtime = _runtime(build, inputs)
    _kernels(runtime)
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, inputs, vectorize=vectorize)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiles_with_nvrtc(name):
    from fuser_core.runtime.kernel_cache import compile_kernel
    from fuser_core.runtime.nvrtc_library import NvrtcNotFoundError, load_nvrtc

    try:
        load_nvrtc()
    except NvrtcNotFoundError as err:
        pytest.skip(f"no NVRTC: {err}")
    build, make = CASES[name]
    runtime = _runtime(build, make())
    _kernels(runtime)
    for group in runtime.segmented.groups:
        for vectorize in (True, False):
            kernel = lower_group(group.fusion, f"k_g{group.id}", index_dtype(runtime.signature.index_type), vectorize)
            module = compile_kernel(translation_unit(kernel), kernel.name, arch="sm_90")
            assert f".entry {kernel.name}" in module.ptx


def _grid_reductions(runtime) -> list[k.ParallelReduce]:
    (kernel,) = _kernels(runtime)
    return [s for s in k.walk(kernel.body) if isinstance(s, k.ParallelReduce) and s.block_dims]


@pytest.mark.parametrize("name", ["sum_and_sum_of_squares", "sum_plus_max", "welford_and_sum_grid"])
def test_grid_reductions_of_a_kernel_arrive_once(name):
    """Every grid reduction but the last stores its partials only; the last arrives once and
    combines them all in its last block, whose flag guards every result's use."""
    build, make = CASES[name]
    grids = _grid_reductions(_runtime(build, make()))
    assert len(grids) == 2
    first, last = grids
    assert first.deferred and first.last is None
    assert not last.deferred and last.last is not None and last.combines == (first,)
    (kernel,) = _kernels(_runtime(build, make()))
    text = translation_unit(kernel)
    assert text.count("gridArriveGroup<") == 2  # the header's definition and the one call
    assert "gridReduce<" not in text.split("// ---- end of runtime header ----")[1]
    assert [w.name for w in kernel.workspaces if w.zeroed] == [last.semaphores]  # one arrival, one semaphore


def test_one_grid_reduction_keeps_the_fused_call():
    (kernel,) = _kernels(_runtime(var_mean_rows, [_rand(4, 100000)]))
    body = translation_unit(kernel).split("// ---- end of runtime header ----")[1]
    assert "gridWelfordCombine<" in body and "gridArriveGroup<" in body
    (kernel,) = _kernels(_runtime(lambda fd: _one_sum(fd), [_rand(4, 100000)]))
    body = translation_unit(kernel).split("// ---- end of runtime header ----")[1]
    assert "gridReduce<" in body and "gridArrive<" not in body


def _one_sum(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sum(t0, [1]))


def test_welford_and_sum_share_the_loads_of_their_input():
    """The sum's partial accumulates in the loops that load the input for the Welford: the
    input is read once."""
    (kernel,) = _kernels(_runtime(welford_and_sum, [_rand(40, 30)]))
    loads = [s for s in k.walk(kernel.body) if isinstance(s, k.VectorCopy) and s.src == "T0"]
    reads = [s for s in k.walk(kernel.body) if isinstance(s, k.Store) and "T0[" in k.expr_text(s.value)]
    assert len(loads) + len(reads) == 1
