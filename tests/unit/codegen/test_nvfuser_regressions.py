"""Fusions from nvFuser's own test file that failed on the GPU, in small form: each is
lowered, compiled for sm_90 with NVRTC (skipped where NVRTC is missing) and run on the
kernel-IR interpreter against the reference on random data."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import lower_group, translation_unit
from fuser_core.codegen.interpreter import KernelFault, TensorBinding, interpret
from fuser_core.runtime.group_lowering import index_dtype, lowered_groups

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(2395)
SHIFT_VALUES = np.array([-1, -2147483648, 1073741824, -64463884, -65968277, 4042311, -98914167, 5526216])


def _runtime(build, inputs):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        expected = fd.execute(inputs)
        runtime = fd.runtime_for(inputs)
    return runtime, expected


def _compile_all(runtime) -> list[str]:
    """Every generated kernel of `runtime`, vectorized and scalar, compiled for sm_90."""
    from fuser_core.runtime.kernel_cache import compile_kernel
    from fuser_core.runtime.nvrtc_library import NvrtcNotFoundError, load_nvrtc

    try:
        load_nvrtc()
    except NvrtcNotFoundError as err:
        pytest.skip(f"no NVRTC: {err}")
    refused = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1]
    assert not refused, refused
    names = []
    for group in runtime.segmented.groups:
        for vectorize in (True, False):
            kernel = lower_group(group.fusion, f"k_g{group.id}", index_dtype(runtime.signature.index_type), vectorize)
            module = compile_kernel(translation_unit(kernel), kernel.name, arch="sm_90")
            assert f".entry {kernel.name}" in module.ptx
            names.append(kernel.name)
    return names


def _check(build, inputs) -> list:
    runtime, expected = _runtime(build, inputs)
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, inputs, vectorize=vectorize)
    _compile_all(runtime)
    return expected


# -- issue 2545: where(bool, int64 tensor, int literal), cats of an empty input ---------------


def remove_empty_2545(fd):
    t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
    t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
    neg = fd.ops.lt(t0, fd.define_scalar(0, dtype=DataType.Int))
    five_or_zero = fd.ops.where(neg, fd.define_scalar(5, dtype=DataType.Int), fd.define_scalar(0, dtype=DataType.Int))
    t10 = fd.ops.cat([t1, fd.ops.add(t0, five_or_zero)], dim=0)
    t13 = fd.ops.cat([t1, fd.ops.add(t10, fd.define_scalar(0, dtype=DataType.Int))], dim=0)
    fd.add_output(fd.ops.add(t10, fd.define_scalar(10, dtype=DataType.Int)))
    fd.add_output(fd.ops.cat([t13, fd.ops.add(t10, fd.define_scalar(5, dtype=DataType.Int))], dim=0))


def test_where_of_an_int64_tensor_and_an_int_literal_compiles_and_matches():
    _check(remove_empty_2545, [RNG.integers(-10, 10, (37,)), RNG.integers(-10, 10, (0,))])


def test_integer_call_arguments_are_spelled_in_their_own_type():
    from fuser_core.codegen import kernel_ir as k
    from fuser_core.codegen.cuda import expr

    cond = k.Var(DataType.Bool, "b")
    text = expr(k.Call(DataType.Int, "where", (cond, k.Var(DataType.Int, "x"), k.Const(DataType.Int, 0))))
    assert text == "where(b, x, ((int64_t)(0)))"
    assert expr(k.Bin(DataType.Int32, ">>", k.Var(DataType.Int32, "x"), k.Const(DataType.Int32, 3))) == (
        "fuser_rshift(x, 3)"
    )


# -- logical_right_shift: reference overflow, signbit/ipow/shift overloads --------------------


def _shift_by_constant(dtype):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        fd.add_output(fd.ops.logical_right_shift(t0, fd.define_scalar(3)))

    return build


def _shift_by_scalar(dtype):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        fd.add_output(fd.ops.logical_right_shift(t0, fd.define_scalar(None, dtype=DataType.Int)))

    return build


@pytest.mark.parametrize("dtype", [DataType.Int32, DataType.Int], ids=lambda d: d.name)
def test_logical_right_shift_by_three_matches_jax(dtype):
    x = SHIFT_VALUES.astype(dtype.numpy)
    (out,) = _check(_shift_by_constant(dtype), [x])
    bits = 8 * dtype.itemsize
    unsigned = np.uint32 if bits == 32 else np.uint64
    np.testing.assert_array_equal(out, (x.view(unsigned) >> unsigned(3)).view(dtype.numpy))
    assert out[0] == (2**29 - 1 if bits == 32 else 2**61 - 1)


@pytest.mark.parametrize("dtype", [DataType.Int32, DataType.Int], ids=lambda d: d.name)
@pytest.mark.parametrize("amount", ["bits", "bits-1", "zero"])
def test_logical_right_shift_by_a_run_time_amount(dtype, amount):
    bits = 8 * dtype.itemsize
    shift = {"bits": bits, "bits-1": bits - 1, "zero": 0}[amount]
    x = np.concatenate([SHIFT_VALUES, RNG.integers(-(2**30), 2**30, 29)]).astype(dtype.numpy)
    (out,) = _check(_shift_by_scalar(dtype), [x, shift])
    unsigned = np.uint32 if bits == 32 else np.uint64
    want = np.zeros_like(x) if shift == bits else (x.view(unsigned) >> unsigned(shift)).view(dtype.numpy)
    np.testing.assert_array_equal(out, want)


def test_the_reference_wraps_an_int64_scalar_operand_to_an_int32_result():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        fd.add_output(fd.ops.bitwise_xor(t0, fd.define_scalar(3758096384, dtype=DataType.Int)))

    x = SHIFT_VALUES.astype(np.int32)
    (out,) = _check(build, [x])
    np.testing.assert_array_equal(out, x ^ np.int32(-536870912))


def test_header_integer_overloads_compile_for_every_integer_width():
    from fuser_core.codegen.runtime_header import RUNTIME_HEADER
    from fuser_core.runtime.kernel_cache import compile_kernel
    from fuser_core.runtime.nvrtc_library import NvrtcNotFoundError, load_nvrtc

    try:
        load_nvrtc()
    except NvrtcNotFoundError as err:
        pytest.skip(f"no NVRTC: {err}")
    lines = []
    for i, t in enumerate(["bool", "signed char", "unsigned char", "short", "int", "int64_t", "uint64_t"]):
        lines.append(
            f"  {{ {t} a = ({t})in[{i}]; long long s = in[9];\n"
            f"    out[{i}] = (long long)signbit(a) + (long long)fuser_lshift(a, s) + (long long)fuser_rshift(a, s)"
            f" + (long long)fuser_ipow(a, s) + (long long)where(a != 0, a, 0) + (long long)where(true, 1, a); }}"
        )
    body = "\n".join(lines)
    source = (
        "typedef long long int int64_t;\ntypedef unsigned long long int uint64_t;\ntypedef int nvfuser_index_t;\n"
        f'{RUNTIME_HEADER}\nextern "C" __global__ void widths(const long long* in, long long* out) {{\n{body}\n}}\n'
    )
    module = compile_kernel(source, "widths", arch="sm_90")
    assert ".entry widths" in module.ptx


# -- scalar extents: factories and expands sized by another input's shape ---------------------


def test_full_sized_by_an_input_shape_and_a_scalar_lowers():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.full([t0.size(0), s], fd.define_scalar(1.5), dtype=DataType.Float))

    (out,) = _check(build, [RNG.standard_normal((3, 5)).astype(np.float32), 7])
    assert out.shape == (3, 7) and (out == 1.5).all()


def test_expand_to_another_inputs_shape_lowers():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True)
        t1 = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True])
        t2 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True)
        t1_b = fd.ops.broadcast_in_dim(t1, t0.shape(), [0, 1, 2])
        fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(t1_b, t0.shape(), [0, 1, 2]), t2))

    shapes = [(2, 3, 4), (2, 1, 4), (2, 3, 4)]
    _check(build, [RNG.standard_normal(s).astype(np.float32) for s in shapes])


def test_uniform_sized_by_an_input_shape_lowers():
    """The group gets the sizing input as an argument, and its kernel draws the values."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        lo, hi = fd.define_scalar(1.8), fd.define_scalar(1223.5)
        fd.add_output(fd.ops.uniform(lo, hi, t0.shape(), dtype=DataType.Double))

    runtime, (out,) = _runtime(build, [RNG.standard_normal((4, 6, 10)).astype(np.float32)])
    (group,) = runtime.segmented.groups
    assert [f"T{tv.name}" for tv in group.fusion.inputs if hasattr(tv, "domain")] == ["T0"]
    refused = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1]
    assert 0 not in refused, refused
    assert check_generated_kernels(runtime, [RNG.standard_normal((4, 6, 10)).astype(np.float32)])
    assert out.shape == (4, 6, 10) and out.min() >= 1.8 and out.max() <= 1223.5


# -- vector alignment: a cat of reshaped, transposed inputs (test_cat_symbolic) ---------------


def cat_symbolic(fd):
    s0 = fd.define_scalar(None, dtype=DataType.Double)
    t9 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
    t10 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
    t11 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
    t20 = fd.ops.reshape(fd.ops.permute(fd.ops.mul(t9, s0), dims=[0, 2, 1, 3]), new_shape=[2, 8, 96])
    t13 = fd.ops.permute(fd.ops.mul(t10, s0), dims=[0, 1, 3, 2])
    t26 = fd.ops.reshape(fd.ops.permute(t13, dims=[0, 2, 1, 3]), new_shape=[2, 8, 96])
    t27 = fd.ops.cat([t20, t26, t11], dim=2)
    fd.add_output(t27)
    fd.add_output(fd.ops.sum(t27, [0, 1], keepdim=False, dtype=DataType.Null))


def _cat_inputs():
    f = lambda *s: RNG.standard_normal(s).astype(np.float32)  # noqa: E731
    return [0.3, f(2, 6, 8, 16), f(2, 6, 16, 8), f(2, 8, 96)]


def test_cat_of_reshaped_transposed_inputs_reads_them_in_scalars():
    # Before: the reduction scheduler vectorized loads of T10 along an axis it reaches only
    # through a transpose, a reshape and the cat; the interpreter faulted on `T1[1]` x4.
    runtime, _ = _runtime(cat_symbolic, _cat_inputs())
    (group,) = runtime.segmented.groups
    assert group.params.vectorize == 1
    _check(cat_symbolic, _cat_inputs())


def _copy_kernel():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t0))

    runtime, _ = _runtime(build, [np.ones(64, np.float32)])
    (group,) = runtime.segmented.groups
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    assert any(t.vectorized > 1 for t in kernel.tensors)
    return kernel


def test_the_interpreter_faults_on_a_vector_load_from_a_misaligned_view():
    kernel = _copy_kernel()
    allocation = RNG.standard_normal(65).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    names = [t.name for t in kernel.tensors]
    aligned = {names[0]: TensorBinding.of(allocation[:64]), names[1]: TensorBinding.of(out)}
    interpret(kernel, aligned, {})
    np.testing.assert_array_equal(out, allocation[:64] * 2)
    shifted = {names[0]: TensorBinding.of(allocation[1:]), names[1]: TensorBinding.of(out)}
    with pytest.raises(KernelFault, match="not aligned to 4 elements \\(16 bytes"):
        interpret(kernel, shifted, {})


# -- issue 2395: a stride-0 bool mask, a slice and a where as two outputs ---------------------


def issue_2395(fd):
    cond0 = fd.define_tensor(
        shape=[-1, -1, -1], contiguity=[True, True, None], dtype=DataType.Bool, stride_order=[2, 1, 0]
    )
    values = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
    cond1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Bool)
    cond1 = fd.ops.broadcast_in_dim(cond1, shape=[16, 16, 32], broadcast_dims=[0, 1])
    sliced = fd.ops.slice(values, start_indices=[0, 0, 16], end_indices=[16, 16, 32], strides=[1, 1, 1])
    zero = fd.define_scalar(0.0, dtype=DataType.Double)
    masked = fd.ops.where(cond0, zero, fd.ops.where(cond1, zero, values))
    fd.add_output(sliced)
    fd.add_output(masked)


def issue_2395_inputs():
    mask = np.lib.stride_tricks.as_strided(RNG.integers(0, 2, 256).astype(bool), (16, 16, 32), (16, 1, 0))
    values = RNG.standard_normal((16, 16, 32)).astype(np.float32)
    return [mask, values, RNG.integers(0, 2, (16, 16)).astype(bool)]


def test_a_slice_output_is_no_reference_for_an_output_needing_the_whole_axis():
    # Before: the slice output was the reference, so `masked` was written only in [16, 32).
    inputs = issue_2395_inputs()
    sliced, masked = _check(issue_2395, inputs)
    np.testing.assert_array_equal(sliced, inputs[1][:, :, 16:])
    mask = inputs[0] | inputs[2][:, :, None]
    np.testing.assert_array_equal(masked, np.where(mask, 0, inputs[1]))


def test_a_complex_constant_is_a_clear_refusal_and_the_group_runs_on_the_host():
    """test_complex_constants: a complex scalar in a kernel was a TypeError in lowering;
    complex types have no CUDA code yet, so the group is refused by name and runs on the
    host reference (never a failed run)."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.ComplexFloat)
        fd.add_output(fd.ops.mul(t0, fd.define_scalar(complex(3.0, 0.5))))

    x = (np.arange(5) + 1j * np.arange(5)).astype(np.complex64)
    runtime, (out,) = _runtime(build, [x])
    np.testing.assert_allclose(out, x * (3.0 + 0.5j), rtol=1e-6)
    refused = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[1]
    assert "ComplexFloat has no CUDA code generation yet" in refused[0]


# -- found by benchmarks/fuzz_gpu.py ---------------------------------------------------------------


@pytest.mark.parametrize("op", ["max", "min"])
def test_a_double_max_or_min_reduction_compiles(op):
    """Its initial value, -inf or +inf in double, printed as INFINITY: NVRTC has no math.h."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Double)
        fd.add_output(getattr(fd.ops, op)(t0, [1]))

    _check(build, [RNG.standard_normal((64, 32))])


@pytest.mark.parametrize("dtype", [DataType.Int32, DataType.Int], ids=lambda d: d.name)
def test_integer_fmod_compiles_and_truncates_like_c(dtype):
    """CUDA's fmod overloads are ambiguous for an integer: it prints as the header's `%`."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=dtype)
        fd.add_output(fd.ops.fmod(t0, fd.define_scalar(3, dtype=dtype)))

    x = RNG.integers(-50, 50, (257,)).astype(dtype.numpy)
    (out,) = _check(build, [x])
    np.testing.assert_array_equal(out, np.fmod(x, 3))


def test_a_comparison_with_a_double_scalar_is_made_in_the_tensors_float():
    """eq(Float tensor, Double scalar input) compared in double in the kernel but in float
    in the reference (nvFuser keeps the scalar beside the tensor and computes in Float)."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        t1 = fd.ops.where(fd.ops.ge(t0, fd.define_scalar(0.0)), t0, s)
        fd.add_output(fd.ops.eq(t1, s))

    x = RNG.standard_normal(129).astype(np.float32)
    (out,) = _check(build, [x, -0.334])
    assert out[x < 0].all() and not out[x >= 0].any()


def _sum_of_a_slice(fd):
    t0 = fd.define_tensor(shape=[-1], contiguity=True)
    fd.add_output(fd.ops.sum(fd.ops.slice(t0, [1], [6]), dims=[0]))


def _sum_of_a_pad(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
    fd.add_output(fd.ops.sum(fd.ops.pad(t0, [3, 0], fd.define_scalar(0.5)), dims=[0, 1]))


def _var_of_an_expanded_input(fd):
    t0 = fd.define_tensor(shape=[-1], contiguity=[None], dtype=DataType.Float)
    var, _mean = fd.ops.var_mean(t0, dims=[0], correction=0)
    fd.add_output(var)


@pytest.mark.parametrize(
    ("build", "make", "expected"),
    [
        (_sum_of_a_slice, lambda: [np.arange(8, dtype=np.float32)], lambda x: x[1:6].sum()),
        (_sum_of_a_pad, lambda: [RNG.standard_normal((4, 5)).astype(np.float32)], lambda x: x.sum() + 0.5 * 12),
        (
            _var_of_an_expanded_input,
            lambda: [np.lib.stride_tricks.as_strided(np.full(1, 2.5, np.float32), (16,), (0,))],
            lambda x: 0.0,
        ),
    ],
    ids=["slice", "pad", "expanded"],
)
def test_a_reduction_to_a_scalar_through_a_resize_or_an_expanded_axis_is_scheduled(build, make, expected):
    """The reduction heuristics looked for an iteration axis to vectorize along and found
    none (IndexError, on every backend): found by the fuzzer."""
    inputs = make()
    runtime, (out,) = _runtime(build, inputs)
    np.testing.assert_allclose(out, expected(inputs[0]), rtol=1e-5, atol=1e-5)
    for vectorize in (True, False):  # a kernel where codegen makes one (the expanded input stays on the host)
        check_generated_kernels(runtime, inputs, vectorize=vectorize)
