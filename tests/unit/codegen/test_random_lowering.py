"""Random ops in generated kernels: each element draws Philox at its row-major linear
index, so an interpreted kernel gives the reference's bits (uniform draws exactly; the
interpreter shares the reference's float math), whatever the schedule; the kernel takes
the run's seed and base offset as arguments, and compiles for sm_90."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import lower_group, translation_unit
from fuser_core.codegen.interpreter import TensorBinding, interpret
from fuser_core.runtime.group_lowering import index_dtype, lowered_groups

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels
from test_nvfuser_regressions import _compile_all

DTYPES = [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16]
KINDS = ["uniform", "normal"]


def _runtime(build, inputs):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    return fd, runtime


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", KINDS)
def test_seeded_draws_in_a_kernel_equal_the_reference_bit_for_bit(kind, dtype):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        seed, offset = fd.define_scalar(DataType.Int), fd.define_scalar(DataType.Int)
        a, b = fd.define_scalar(-0.75), fd.define_scalar(2.5)
        r = getattr(fd.ops, kind)(a, b, t0.shape(), rng_seed=seed, rng_offset=offset, dtype=dtype)
        fd.add_output(r)
        fd.add_output(fd.ops.mul(t0, fd.ops.cast(r, DataType.Float)))

    x = np.random.default_rng(5).standard_normal((37, 129)).astype(np.float32)
    inputs = [x, 2**40 + 77, 3]
    _fd, runtime = _runtime(build, inputs)
    refused = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1]
    assert not refused, refused
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, inputs, vectorize=vectorize, exact=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_unseeded_draws_take_the_runs_seed_and_offset_as_kernel_arguments(dtype):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        u = fd.ops.uniform(fd.define_scalar(0.0), fd.define_scalar(1.0), t0.shape(), dtype=dtype)
        n = fd.ops.normal(fd.define_scalar(0.0), fd.define_scalar(1.0), t0.shape(), dtype=dtype)
        fd.add_output(fd.ops.add(fd.ops.cast(u, DataType.Float), fd.ops.cast(n, DataType.Float)))
        fd.add_output(fd.ops.gt(u, fd.define_scalar(0.5)))  # a dropout mask

    inputs = [np.random.default_rng(6).standard_normal((9, 65)).astype(np.float32)]
    _fd, runtime = _runtime(build, inputs)
    (group,) = runtime.segmented.groups
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    leaves = [s for s in kernel.scalars if s.leaf is not None]
    assert len(leaves) == 2 and all(s.fusion_position == -1 for s in leaves)  # seed and base offset
    text = translation_unit(kernel)
    assert "fuser_philox(" in text and f"fuser_rng_uniform_{'f32' if dtype == DataType.Float else ''}" in text
    assert check_generated_kernels(runtime, inputs, exact=True)


def test_a_kernel_without_random_ops_has_no_philox_code():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True)
        fd.add_output(fd.ops.exp(t0))

    inputs = [np.ones(8, np.float32) * 0.5]
    _fd, runtime = _runtime(build, inputs)
    kernel = lower_group(runtime.segmented.groups[0].fusion, "k", index_dtype(runtime.signature.index_type))
    assert "philox" not in translation_unit(kernel)


def test_a_draw_depends_only_on_seed_offset_and_linear_index():
    """Two kernels of different shapes agree where their linear indices agree."""

    def kernel_values(shape, seed, offset):
        def build(fd):
            s, o = fd.define_scalar(DataType.Int), fd.define_scalar(DataType.Int)
            fd.add_output(
                fd.ops.uniform(
                    fd.define_scalar(0.0),
                    fd.define_scalar(1.0),
                    list(shape),
                    rng_seed=s,
                    rng_offset=o,
                    dtype=DataType.Float,
                )
            )

        _fd, runtime = _runtime(build, [seed, offset])
        (group,) = runtime.segmented.groups
        kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
        numel = int(np.prod(shape))
        out = np.full(numel, np.nan, np.float32)
        strides = tuple(int(v) for v in np.cumprod([1, *shape[::-1]])[:-1][::-1])
        (arg,) = kernel.tensors
        scalars = {s.name: v for s, v in zip(kernel.scalars, [seed, offset], strict=True)}
        interpret(kernel, {arg.name: TensorBinding(out, tuple(shape), strides)}, scalars)
        return out

    flat = kernel_values((60,), 123, 9)
    assert np.array_equal(kernel_values((4, 15), 123, 9), flat)
    assert not np.array_equal(kernel_values((60,), 123, 10), flat)
    assert not np.array_equal(kernel_values((60,), 124, 9), flat)


def test_random_kernels_compile_for_sm90():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        outs = []
        for dtype in DTYPES:
            for kind in KINDS:
                r = getattr(fd.ops, kind)(fd.define_scalar(0.25), fd.define_scalar(3.0), t0.shape(), dtype=dtype)
                outs.append(fd.ops.cast(r, DataType.Float))
        total = outs[0]
        for o in outs[1:]:
            total = fd.ops.add(total, o)
        fd.add_output(fd.ops.mul(t0, total))

    inputs = [np.random.default_rng(8).standard_normal((16, 33)).astype(np.float32)]
    _fd, runtime = _runtime(build, inputs)
    assert _compile_all(runtime)
