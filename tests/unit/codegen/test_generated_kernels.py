"""Every generated kernel of the pointwise family, run on the kernel-IR interpreter for
every block and thread at small sizes, against the reference backend; and compiled to
PTX for sm_90 with NVRTC. This is how CI, with no GPU, checks indexing, predicates and
vectorization."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition, use_options
from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen import lower_group, print_kernel_ir, translation_unit
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import SAMPLES, check_generated_kernels, runtime_and_inputs, shrunk_sample


@pytest.mark.parametrize("vectorize", [True, False], ids=["vectorized", "scalar_fallback"])
@pytest.mark.parametrize("name", SAMPLES)
def test_sample_kernels_match_the_reference_on_the_interpreter(name, vectorize):
    runtime, inputs = runtime_and_inputs(shrunk_sample(name))
    checked = check_generated_kernels(runtime, inputs, vectorize=vectorize)
    assert checked, f"{name} generated no kernel"


def _fusion_runtime(build, inputs):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    return runtime


RNG = np.random.default_rng(7)


def _rand(*shape, dtype=np.float32):
    return (RNG.standard_normal(shape) + 0.5).astype(dtype)


@pytest.mark.parametrize("size", [1, 3, 1023, 2**20 + 1])
def test_odd_sizes_take_the_tail_predicates(size):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.exp(t0), fd.ops.add(t1, t0)))

    inputs = [_rand(size), _rand(size)]
    if size > 2**16:  # keep CI quick: the interpreter runs every thread
        inputs = [_rand(4099), _rand(4099)]
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_broadcast_expand_and_a_scalar_input():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Half)
        t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Half)
        s = fd.define_scalar(dtype=DataType.Double)
        b = fd.ops.broadcast_in_dim(t1, shape=t0.shape(), broadcast_dims=[1])
        y = fd.ops.mul(fd.ops.add(t0, b), s)
        fd.add_output(fd.ops.cast(y, DataType.Half))
        fd.add_output(fd.ops.relu(t0))

    inputs = [_rand(5, 37, 19, dtype=np.float16), _rand(37, dtype=np.float16), 0.75]
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_non_contiguous_input_reads_its_runtime_strides():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float)
        fd.add_output(fd.ops.sigmoid(t0))

    base = _rand(30, 50)
    inputs = [base[::2, 1::3]]
    runtime = _fusion_runtime(build, inputs)
    kernel = lower_group(runtime.segmented.groups[0].fusion, "k", DataType.Int32)
    assert "alloc_stride" in print_kernel_ir(kernel)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_pad_slice_and_cat_select_the_right_elements():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        left = fd.ops.slice(t0, start_indices=[0, 0], end_indices=[t0.size(0), 5], strides=[1, 1])
        right = fd.ops.slice(t0, start_indices=[0, 5], end_indices=[t0.size(0), 12], strides=[1, 1])
        joined = fd.ops.cat([fd.ops.neg(right), left], dim=1)
        fd.add_output(fd.ops.pad(joined, [2, 3, 1, 0], fd.define_scalar(-7.0)))

    inputs = [_rand(9, 12)]
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_integer_and_bool_math():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Int)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Int)
        q = fd.ops.div(t0, t1)
        fd.add_output(fd.ops.where(fd.ops.gt(q, t0), fd.ops.fmod(t0, t1), q))

    a = RNG.integers(-50, 50, (7, 33))
    b = RNG.integers(1, 9, (7, 33)) * np.where(RNG.random((7, 33)) < 0.5, -1, 1)
    inputs = [a, b]
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def _sample_kernels():
    for name in SAMPLES:
        runtime, _ = runtime_and_inputs(Path(__file__).resolve().parents[3] / "sample_fusions" / f"{name}.py")
        for group in runtime.segmented.groups:
            if generates_kernel(group):
                yield name, group, runtime.signature.index_type


def test_every_sample_kernel_compiles_to_ptx_for_sm90():
    nvrtc = pytest.importorskip("fuser_core.runtime.kernel_cache")
    compiled, groups = [], 0
    for name, group, index_type in _sample_kernels():
        groups += 1
        for vectorize in (True, False):
            kernel = lower_group(group.fusion, f"nvfuser_{name}_g{group.id}", index_dtype(index_type), vectorize)
            module = nvrtc.compile_kernel(translation_unit(kernel), kernel.name, arch="sm_90")
            assert f".entry {kernel.name}" in module.ptx
            compiled.append(kernel.name)
    assert len(compiled) == 2 * groups
    assert {n.rsplit("_g", 1)[0].removeprefix("nvfuser_") for n in compiled} == set(SAMPLES)


def test_last_cuda_code_and_dumps_show_the_generated_kernel():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.exp(t0), t0))
    with pytest.raises(FuserError, match="nothing has been executed yet"):
        fd.last_cuda_code()
    with use_options(backend="reference", device_model="h100_sxm"):
        fd.execute([_rand(6, 130)])
    code = fd.last_cuda_code()
    assert code.startswith("===== g0 pointwise: nvfuser_pointwise_f0_c1_r0_g0 =====")
    assert (
        'extern "C" __global__ void nvfuser_pointwise_f0_c1_r0_g0(Tensor<float, 2, 2> T0, Tensor<float, 2, 2> T' in code
    )
    assert "expf(" in code and "RUNTIME_HEADER" not in code and "struct Tensor" not in code
    full = fd.last_cuda_code(intrinsic_code=True)
    assert "struct Tensor" in full and "nvfuser_pointwise_f0_c1_r0_g0" in full
    report = fd.executor_cache.last_report
    assert report.launches == () and report.runtime.backend_name == "reference"
    (kernel,) = report.runtime.kernels
    assert kernel.launch.block == (128, 1, 1) and kernel.launch.grid[0] >= 1
    assert "PARALLEL" in kernel.kernel_ir and "threadIdx.x" in kernel.kernel_ir


def test_codegen_dumps_print_each_kernel():
    from fuser_core.options import dump_sink

    seen: dict[str, str] = {}
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.neg(t0))
    names = ["kernel_ir", "cuda_kernel", "cuda_full", "launch_param", "kernel_metadata"]
    sink = dump_sink(lambda option, text: seen.__setitem__(option.name, text))
    with sink, use_options(dump=names, backend="reference", device_model="h100_sxm"):
        fd.execute([_rand(1000)])
    assert set(seen) == set(names)
    assert seen["kernel_ir"].startswith("===== g0 pointwise: nvfuser_pointwise_f0_c1_r0_g0 =====\n%kernel")
    assert "(-T" in seen["cuda_kernel"] and "struct Tensor" not in seen["cuda_kernel"]
    assert "struct Tensor" in seen["cuda_full"]
    assert "Launch Parameters: BlockDim.x = 128" in seen["launch_param"]
    assert seen["kernel_metadata"] == "Kernel metadata: nothing launched (reference backend)\n"


def test_newer_elementwise_ops_have_cuda_rules():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Int)
        fd.add_output(fd.ops.frac(t0))
        fd.add_output(fd.ops.nextafter(t0, fd.ops.neg(t0)))
        fd.add_output(fd.ops.signbit(t0))
        fd.add_output(fd.ops.isposinf(fd.ops.reciprocal(t0)))
        fd.add_output(fd.ops.gcd(t1, fd.ops.add(t1, t1)))
        fd.add_output(fd.ops.asinh(t0))

    x = _rand(5, 67) * 3
    x[0, :3] = 0.0
    inputs = [x, RNG.integers(-40, 40, (5, 67))]
    runtime = _fusion_runtime(build, inputs)
    checked = check_generated_kernels(runtime, inputs)
    assert len(checked) == len(runtime.segmented.groups) >= 1
    nvrtc = pytest.importorskip("fuser_core.runtime.kernel_cache")
    for group in runtime.segmented.groups:
        kernel = lower_group(group.fusion, f"nvfuser_newer_ops_g{group.id}", DataType.Int32)
        ptx = nvrtc.compile_kernel(translation_unit(kernel), kernel.name, arch="sm_90").ptx
        assert f".entry {kernel.name}" in ptx


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double, DataType.BFloat16])
def test_pow_by_a_small_integer_literal_is_multiplied_out(dtype):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        fd.add_output(fd.ops.pow(t0, fd.define_scalar(3.0, dtype=DataType.Double)))
        fd.add_output(fd.ops.pow(t0, 2))
        fd.add_output(fd.ops.pow(t0, fd.define_scalar(4.0, dtype=DataType.Double)))
        fd.add_output(fd.ops.pow(t0, fd.define_scalar(2.5, dtype=DataType.Double)))  # stays a pow

    x = _rand(5, 67) * 3
    x[0, :4] = [0.0, -0.0, -2.0, np.inf]
    inputs = [x.astype(dtype.numpy)]
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
    group = runtime.segmented.groups[0]
    text = translation_unit(lower_group(group.fusion, "nvfuser_pow_g0", DataType.Int32)).split("__global__")[-1]
    pow_name = "pow" if dtype == DataType.Double else "powf"
    assert text.count(f"{pow_name}(") == 1  # only the 2.5


def _kernel_bodies(runtime):
    """The CUDA of every generated kernel of the run, after its header."""
    return "".join(
        translation_unit(lower_group(g.fusion, f"k{g.id}", DataType.Int32)).split("__global__")[-1]
        for g in runtime.segmented.groups
        if generates_kernel(g)
    )


@pytest.mark.parametrize(
    ("out_dtype", "row_divisor", "reciprocal", "invariant"),
    [
        (DataType.BFloat16, True, True, False),  # softmax's shape: a row sum, a bf16 output
        (DataType.Float, True, False, True),  # a float quotient: IEEE's bits, the reciprocal hoisted
        (DataType.BFloat16, False, False, False),  # a divisor along the row: one per element anyway
    ],
)
def test_a_division_by_a_row_value_into_a_narrow_output_multiplies_by_the_reciprocal(
    out_dtype, row_divisor, reciprocal, invariant
):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        x = fd.ops.exp(fd.ops.cast(t0, DataType.Float))
        if row_divisor:
            s = fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
        else:
            s = fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[0]), shape=t0.shape(), broadcast_dims=[1])
        fd.add_output(fd.ops.cast(fd.ops.div(x, s), out_dtype))

    inputs = [_rand(6, 300).astype(DataType.BFloat16.numpy)]
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs)
    text = _kernel_bodies(runtime)
    assert ("(1.0f / (T" in text) == reciprocal
    assert ("fuser_div_invariant(" in text) == invariant
    assert bool(re.search(r"(?<!1\.0f) / T", text)) == (not reciprocal and not invariant)  # an IEEE division


@pytest.mark.parametrize("shape", ["also_an_output", "used_by_a_sub", "permuted_divisor"])
def test_a_division_keeps_its_ieee_form_where_the_reciprocal_could_show(shape):
    """The quotient also written as a float output, or used by more than a cast (a
    subtraction could cancel what the product rounds), or a divisor that varies along the
    innermost axis (permuted after its broadcast): an IEEE division, as written."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        s = fd.ops.broadcast_in_dim(fd.ops.sum(t0, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
        if shape == "permuted_divisor":
            v = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
            s = fd.ops.permute(fd.ops.broadcast_in_dim(v, shape=[t0.size(1), t0.size(0)], broadcast_dims=[0]), [1, 0])
        q = fd.ops.div(t0, s)
        fd.add_output(fd.ops.cast(q, DataType.BFloat16))
        if shape == "also_an_output":
            fd.add_output(q)
        if shape == "used_by_a_sub":
            fd.add_output(fd.ops.cast(fd.ops.sub(q, t0), DataType.BFloat16))

    inputs = [_rand(5, 96)] + ([_rand(96)] if shape == "permuted_divisor" else [])
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs)
    text = _kernel_bodies(runtime)
    assert "1.0f /" not in text
    # IEEE's bits either way: as written where the divisor varies along the row, with its
    # reciprocal hoisted where it is a row's value
    assert ("fuser_div_invariant(T" in text) == (shape != "permuted_divisor")
    assert (" / T" in text) == (shape == "permuted_divisor")


@pytest.mark.parametrize(
    ("divisor", "invariant"),
    [("row_sum", True), ("scalar_input", True), ("literal", False), ("keepdim_mean", False)],
)
def test_a_float_division_of_a_row_by_a_row_value_hoists_the_reciprocal(divisor, invariant):
    """x / s with s the same all along the row (a row's sum, a scalar input) computes s's
    reciprocal once per row (fuser_div_invariant, IEEE's bits: exhaustively checked on
    the GPU); a literal divisor is left to the compiler, and a keepdim mean (a row value
    divided by N) is divided once per row already. Zeros, subnormals, huge values,
    infinities and NaNs among the operands take the division itself and match."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        if divisor == "row_sum":
            s = fd.ops.broadcast_in_dim(fd.ops.sum(t0, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
            fd.add_output(fd.ops.div(t0, s))
        elif divisor == "scalar_input":
            fd.add_output(fd.ops.div(t0, fd.define_scalar(dtype=DataType.Float)))
        elif divisor == "literal":
            fd.add_output(fd.ops.div(t0, fd.define_scalar(3.0, dtype=DataType.Float)))
        else:
            s = fd.ops.sum(t0, dims=[1], keepdim=True)
            fd.add_output(fd.ops.div(s, fd.ops.size(t0, 1)))

    x = _rand(6, 257)
    x[1, :5] = [0.0, -0.0, 1e-40, np.inf, np.nan]
    x[2] *= np.float32(1e-30)  # operands below 2^-62
    x[3] *= np.float32(1e25)  # and above 2^62
    inputs = [x] + ([3.0] if divisor == "scalar_input" else [])
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs)
    text = _kernel_bodies(runtime)
    assert ("fuser_div_invariant(" in text) == invariant


def test_a_reciprocal_division_by_a_subnormal_or_huge_row_value_stays_finite():
    """x / amax(|x|) per row into bf16, with a row of subnormals (amax < 2**-128: 1 / amax
    alone is inf) and a row near the float limit (1 / amax subnormal): the divisor is
    scaled by a power of two first, and every row matches the reference's division."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        m = fd.ops.broadcast_in_dim(fd.ops.max(fd.ops.abs(t0), dims=[1]), shape=t0.shape(), broadcast_dims=[0])
        fd.add_output(fd.ops.cast(fd.ops.div(t0, m), DataType.BFloat16))

    x = _rand(4, 64)
    x[1] *= np.float32(1e-39)
    x[2] *= np.float32(1e37)
    x[3, :8] = 0.0
    runtime = _fusion_runtime(build, [x])
    assert check_generated_kernels(runtime, [x])
    text = translation_unit(lower_group(runtime.segmented.groups[0].fusion, "k", DataType.Int32))
    assert "(1.0f / (T" in text


def test_a_group_codegen_cannot_lower_yet_runs_on_the_host_with_its_reason():
    from fuser_core.runtime.group_lowering import lowered_groups

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.cast(fd.ops.exp(t0), DataType.Float8_e4m3fn))

    runtime = _fusion_runtime(build, [_rand(4, 33)])
    kernels, refused = lowered_groups(runtime.segmented, runtime.name, "int32")
    assert kernels == {}
    assert "has no CUDA code generation yet" in refused[0]


def test_reduction_kernels_say_where_they_reduce():
    """The schedule's parallel types decide the kernel's reductions: softmax reduces each
    row across threadIdx.x; #785's 3-D sum at its bundled size is an outer reduction
    across threadIdx.y, split over blockIdx.y (a grid reduction with its work buffers)."""
    runtime, _ = runtime_and_inputs(shrunk_sample("softmax"))
    text = print_kernel_ir(lower_group(runtime.segmented.groups[0].fusion, "k", DataType.Int32))
    assert text.count("BLOCK REDUCE fmax") == 1 and text.count("BLOCK REDUCE add") == 1
    assert "over threadIdx.x" in text and "GRID" not in text
    runtime, _ = runtime_and_inputs(
        Path(__file__).resolve().parents[3] / "sample_fusions" / "issue785_reduction_pow.py"
    )
    group = next(g for g in runtime.segmented.groups if g.scheduler.value == "reduction")
    kernel = lower_group(group.fusion, "k", DataType.Int32)
    text = print_kernel_ir(kernel)
    assert "GRID REDUCE add" in text and "over threadIdx.y, blockIdx.y" in text
    assert [w.zeroed for w in kernel.workspaces] == [False, True]


def test_a_grid_reduction_whose_unrolled_serial_part_does_not_divide():
    """[BIDy(7) | rS, rUR(4), rTIDy(8)] over 960 rows: the unrolled serial index runs past
    its block's share of the rows and must not read the next block's (counted twice)."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, [0, 1]))

    inputs = [_rand(16, 60, 256)]
    runtime = _fusion_runtime(build, inputs)
    text = print_kernel_ir(lower_group(runtime.segmented.groups[0].fusion, "k", DataType.Int32))
    assert "GRID REDUCE add" in text and "(unroll)" in text
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_self_mapped_group_is_cut_and_every_kernel_generated():
    """Once a known outer_persistent gap (its loops skipped axis i2 of T9 and T11, and codegen
    refused the group): broadcasting sum(t0, [1]) back against t0's axis 1 ties t0's axes 0
    and 1, a self mapping. The segmenter now cuts there, as nvFuser does, and each group,
    judged on its own ID map, gets a kernel that reads all of its data."""
    from fuser_core.runtime.group_lowering import lowered_groups

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        fd.define_tensor(shape=[1], contiguity=True, dtype=DataType.Float)
        b = fd.ops.broadcast_in_dim(fd.ops.sum(t0, [1]), shape=[1, 3, 3], broadcast_dims=[1, 2])
        x = fd.ops.add(b, t0)
        fd.add_output(fd.ops.sum(fd.ops.add(fd.ops.add(x, b), x), [0]))

    inputs = [_rand(3, 3, 3), _rand(1)]
    runtime = _fusion_runtime(build, inputs)
    assert len(runtime.segmented.groups) == 2
    assert not lowered_groups(runtime.segmented, runtime.name, "int32")[1]
    assert len(check_generated_kernels(runtime, inputs)) == 2


@pytest.mark.parametrize("shape", [(40, 999), (1000, 40), (3, 5)])
@pytest.mark.parametrize("second", ["max", "sum_of_squares"])
def test_two_reductions_of_one_input_share_its_loops(shape, second):
    """Both rfactor partials are computed in the loops that load the input (its register
    buffer is in scope for both)."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, [1]))
        fd.add_output(fd.ops.max(t0, [1]) if second == "max" else fd.ops.sum(fd.ops.mul(t0, t0), [1]))

    inputs = [_rand(*shape)]
    runtime = _fusion_runtime(build, inputs)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_kernel_with_two_grid_reductions_arrives_once():
    """Each grid reduction alone finds its last block with its own semaphore; two in one
    kernel arrive once (the first only stores its partials), so one block holds both
    results. The group is generated, not sent to the host."""
    from fuser_core.runtime.group_lowering import lowered_groups

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, [1]))
        fd.add_output(fd.ops.sum(fd.ops.mul(t0, t0), [1]))

    inputs = [_rand(4, 100000)]
    runtime = _fusion_runtime(build, inputs)
    assert lowered_groups(runtime.segmented, runtime.name, "int32")[1] == {}
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_reductions_read_in_vectors_only_along_a_contiguous_innermost_axis():
    """A strided innermost axis, or reduced axes merged in an order memory does not have,
    are read element by element."""

    def strided(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, False], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, [1]))

    def permuted(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, stride_order=[0, 2, 1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, [0, 2]))

    runtime = _fusion_runtime(strided, [_rand(8, 64)[:, ::2]])
    assert runtime.segmented.groups[0].params.vectorize == 1
    y = np.transpose(_rand(64, 256, 4), (2, 0, 1))
    runtime = _fusion_runtime(permuted, [y])
    assert runtime.segmented.groups[0].params.vectorize == 1
    assert check_generated_kernels(runtime, [y]) == ["kernel_g0"]


def _serial_loop_iterations_around_reads(body, buffer, around=1):
    """For each statement reading `buffer`, the product of the constant serial loop extents
    around it."""
    from fuser_core.codegen import kernel_ir as k

    found = []
    for stmt in body:
        if isinstance(stmt, k.For):
            extent = stmt.extent.value if isinstance(stmt.extent, k.Const) and stmt.hardware is None else 1
            found += _serial_loop_iterations_around_reads(stmt.body, buffer, around * extent)
        elif isinstance(stmt, k.If):
            found += _serial_loop_iterations_around_reads(stmt.then + stmt.orelse, buffer, around)
        elif isinstance(stmt, k.Store) and buffer in set(k.node_reads(stmt.value)):
            found.append(around)
    return found


def test_a_per_row_input_is_loaded_once_per_row_not_once_per_element():
    """Layer norm backward's persistent kernel: the [N, 1] mean and rstd are broadcast along
    the thread's batch loops (2 vectors of 8), whose loops the cache of each would run 16
    times; a serial broadcast axis past the shared loops is one iteration."""
    runtime, inputs = runtime_and_inputs(shrunk_sample("layer_norm_bwd"))
    group = next(g for g in runtime.segmented.groups if g.scheduler.value == "inner_persistent")
    kernel = lower_group(group.fusion, "k", DataType.Int32)
    per_row = [tv for tv in group.fusion.inputs if tv.logical[-1].is_broadcast]
    assert len(per_row) == 2  # mean and rstd
    for tv in per_row:
        assert _serial_loop_iterations_around_reads(kernel.body, f"T{tv.name}") == [1]
    assert check_generated_kernels(runtime, inputs)


def test_a_consumer_never_shares_the_single_iteration_of_a_broadcast_loop():
    """A softmax over rows too long to persist: the per-row max, read from global memory in
    the sum's kernel, is loaded in one iteration of its unrolled broadcast loop; the exp
    written beside it reused that loop as its own unrolled one and wrote one element in
    four (seen on the H100 at [7, 2**20 + 1]; the interpreter shows it at [2, 70001])."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        m = fd.ops.broadcast_in_dim(fd.ops.max(t0, [1]), shape=t0.shape(), broadcast_dims=[0])
        e = fd.ops.exp(fd.ops.sub(t0, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, [1]), shape=t0.shape(), broadcast_dims=[0])
        fd.add_output(fd.ops.div(e, s))
        fd.add_output(fd.ops.sum(t0, [1]))

    inputs = [_rand(2, 70001)]
    runtime = _fusion_runtime(build, inputs)
    assert [g.params.unroll for g in runtime.segmented.groups if g.scheduler.value == "reduction"] == [4, 4]
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0", "kernel_g1", "kernel_g2"]


@pytest.mark.parametrize(("rows", "cols", "left", "persistent"), [(3, 5000, 600, False), (8, 2048, 1500, True)])
def test_a_padded_per_row_input_keeps_every_iteration_of_its_broadcast_loop(rows, cols, left, persistent):
    """A [N, 1] value padded into one column of a row: the pad's check `col - left >= 0`
    fails at the first iterations of the broadcast loop and holds at later ones, so that
    loop may not shrink to one iteration (the pad is inlined: no materialized tensor of
    the kernel shows its Resize)."""

    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        m = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        p = fd.ops.pad(m, [left, cols - left - 1], fd.define_scalar(0.0))
        s = fd.ops.sum(fd.ops.mul(x, p), [1])
        if persistent:
            fd.add_output(fd.ops.sub(x, fd.ops.broadcast_in_dim(s, x.shape(), [0])))
        else:
            fd.add_output(s)

    inputs = [_rand(rows, cols), _rand(rows, 1)]
    runtime = _fusion_runtime(build, inputs)
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == ("inner_persistent" if persistent else "reduction")
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_looping_outer_reduction_reads_its_bf16_columns_in_16_byte_vectors():
    """Layer norm backward's column sums: bf16 columns beside a float per-row mean and rstd,
    which do not run along the vector axis, go 8 wide (16-byte loads); two rows are
    unrolled instead of four, so a thread's loads keep to 16 elements of each input."""

    def column_sums(dtype):
        def build(fd):  # the sum cast back to the input's type
            x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
            mean = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
            xhat = fd.ops.sub(fd.ops.cast(x, DataType.Float), fd.ops.broadcast_in_dim(mean, x.shape(), [0, 1]))
            fd.add_output(fd.ops.cast(fd.ops.sum(xhat, [0]), dtype))

        return build

    inputs = [_rand(2048, 256).astype(DataType.BFloat16.numpy), _rand(2048, 1)]
    runtime = _fusion_runtime(column_sums(DataType.BFloat16), inputs)
    params = runtime.segmented.groups[0].params
    assert (params.inner, params.persistent, params.vectorize, params.unroll) == (False, False, 8, 2)
    assert check_generated_kernels(runtime, inputs)
    inputs = [_rand(2048, 256).astype(np.float16), _rand(2048, 1)]  # 8-wide half, a sum kept in float
    params = _fusion_runtime(column_sums(DataType.Half), inputs).segmented.groups[0].params
    assert (params.vectorize, params.unroll) == (8, 2)


@pytest.mark.parametrize("mean_first", [False, True])
def test_a_per_row_input_does_not_make_a_column_sum_an_inner_reduction(mean_first):
    """Where the reduced axis lies innermost is read from the largest input holding it:
    x [N, H], not a [N, 1] per-row mean (2 axes too, but one a broadcast), whichever the
    definition names first (the float column sums of a layer norm backward were scheduled
    as an inner reduction over N, read element by element)."""

    def build(fd):
        if mean_first:
            mean = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
            x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        else:
            x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
            mean = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, x.shape(), [0, 1])), [0]))

    x, mean = _rand(2048, 256), _rand(2048, 1)
    inputs = [mean, x] if mean_first else [x, mean]
    runtime = _fusion_runtime(build, inputs)
    (group,) = runtime.segmented.groups
    assert (group.params.inner, group.params.vectorize, group.params.unroll) == (False, 4, 4)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_reduction_vector_stays_within_each_axis_merged_into_its_axis():
    """The sum of x [4, 12] with its columns split [2, 6] and the 2 merged with the rows
    to [2, 24]: the vector walks the 24, merged from the 4 rows and the inner 6 of x's
    columns, so it may not pass from one run of 6 to the next (a vector of 4 did: x's 12
    columns and the 24 allow it, the 6 does not)."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        split = fd.ops.permute(fd.ops.reshape(t0, new_shape=[4, 2, 6]), dims=[1, 0, 2])
        fd.add_output(fd.ops.sum(fd.ops.reshape(split, new_shape=[2, 24]), [1]))

    x = _rand(4, 12)
    runtime = _fusion_runtime(build, [x])
    assert runtime.segmented.groups[0].params.vectorize == 2
    assert check_generated_kernels(runtime, [x]) == ["kernel_g0"]


def _kernel_body(runtime, group_id=0):
    group = runtime.segmented.groups[group_id]
    text = translation_unit(lower_group(group.fusion, f"nvfuser_body_g{group_id}", DataType.Int32))
    return text.split("__global__")[-1]


def test_every_input_a_reduction_reads_is_loaded_before_the_first_reduction():
    """Layer norm's backward reads its second input (x) only for the second reduction: its
    load is still issued with the first input's (dy), so a row's loads are in flight together."""
    runtime, _ = runtime_and_inputs(shrunk_sample("layer_norm_bwd"))
    group = runtime.segmented.groups[0]
    assert group.scheduler.value == "inner_persistent"
    body = _kernel_body(runtime, group.id)
    first_reduce = min(i for i in (body.find("blockReduce<"), body.find("blockReducePair<")) if i >= 0)
    for tensor in ("T0", "T1", "T2", "T3"):  # dy, x, mean, rstd: vector loads or scalar reads
        read = min(i for i in (body.find(f"&{tensor}["), body.find(f" = {tensor}[")) if i >= 0)
        assert read < first_reduce, tensor


def test_two_independent_row_sums_reduce_in_one_round_of_barriers():
    """Layer norm backward's two row sums (of g and of g * x_hat) read neither's result: the
    first moves down beside the second and one call reduces both; the interpreter (run on
    the same kernel IR) still computes each."""
    runtime, inputs = runtime_and_inputs(shrunk_sample("layer_norm_bwd"))
    group = runtime.segmented.groups[0]
    body = _kernel_body(runtime, group.id).split("// ---- end of runtime header ----")[-1]
    assert body.count("blockReducePair<") == 1 and "blockReduce<" not in body
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    reduces = [s for s in k.walk(kernel.body) if isinstance(s, k.ParallelReduce)]
    assert [r.joined for r in reduces] == [True, False] and reduces[1].paired is reduces[0]
    assert "(together with" in print_kernel_ir(kernel)
    assert check_generated_kernels(runtime, inputs)


def test_a_non_persistent_reduction_loads_every_unrolled_step_before_summing():
    """Many rows of 1024: a row takes 64 threads of four serial vectors (not 256 threads
    of one), and the four unrolled steps' loads fill one buffer before the first is summed."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(t0, t1), [1]))

    with FusionDefinition() as fd:
        build(fd)
    big = [np.empty((65536, 1024), np.float32)] * 2  # only the heuristics see these
    with use_options(device_model="h100_sxm", backend="reference"):
        params = fd.runtime_for(big).segmented.groups[0].params
    assert (params.threads_reduction, params.persistent_batch, params.unroll) == (64, 4, 4)
    # Fewer, longer rows for the interpreter (it runs every thread): 512 threads of eight.
    inputs = [_rand(40, 16384), _rand(40, 16384)]
    runtime = _fusion_runtime(build, inputs)
    assert runtime.segmented.groups[0].params.unroll == 4
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
    body = _kernel_body(runtime)
    assert body.count("float T4[16] = {};") == body.count("float T5[16] = {};") == 1  # 4 steps x 4 wide
    loads = [body.index(f"vectorCopy<float, 4>(&T{n}[") for n in (4, 5)]
    assert max(loads) < body.index("float T2 = ")  # no product before both buffers are loaded


def test_a_load_inside_a_reductions_serial_loop_stays_with_the_reduction_that_reads_it():
    """Only a persistent kernel's row loads go before the first reduction: in a looping
    reduction a load moved into an earlier reduction's serial loop would be dead there and
    read again, element by element, where it is used."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, [1]))
        fd.add_output(fd.ops.sum(fd.ops.exp(t1), [1]))
        fd.add_output(fd.ops.add(t0, t1))  # one kernel for the two

    inputs = [_rand(40, 16384), _rand(40, 16384)]
    runtime = _fusion_runtime(build, inputs)
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["reduction"]
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
    body = _kernel_body(runtime)
    first_sum = re.search(r"T\d+\[0\] = \(T\d+\[0\] \+ T\d+\[", body).start()
    assert body.index("&T0[") < first_sum < body.index("&T1[")


@pytest.mark.parametrize(("rows", "width"), [(3, 12008), (9, 72)])
def test_a_16_bit_vector_loaded_copy_is_not_zero_filled(rows, width):
    """A row's bf16 copy is read only where it was loaded: no zeros are written first (a
    byte-permute per element). Shapes with skipped loads (12008 = a batch of two vectors
    whose last is past the row for some threads; 9 rows of 72, rows beyond a block's): the
    interpreter fills the copy with NaN, and a max over negative values would also show a
    zero, so the values prove that no element a load skipped is read."""

    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        total = fd.ops.broadcast_in_dim(fd.ops.sum(xf, [1]), shape=x.shape(), broadcast_dims=[0])
        top = fd.ops.broadcast_in_dim(fd.ops.max(xf, [1]), shape=x.shape(), broadcast_dims=[0])
        fd.add_output(fd.ops.cast(fd.ops.add(fd.ops.sub(xf, top), total), DataType.BFloat16))

    inputs = [(-np.abs(_rand(rows, width)) - 0.5).astype(ml_dtypes.bfloat16)]
    runtime = _fusion_runtime(build, inputs)
    assert runtime.segmented.groups[0].params.vectorize == 8
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
    body = _kernel_body(runtime)
    assert re.search(r"__bfloat T\d+\[\d+\];", body) and not re.search(r"__bfloat T\d+\[\d+\] = \{\};", body)


def test_a_copy_whose_uses_reach_a_slice_or_cat_keeps_its_zeros():
    """RoPE's rotated halves read one input at two offsets, each through a select beyond
    its load's bounds: those copies stay zero-filled (without the zeros RoPE's kernel took
    more registers and ran slower on the H100). Float copies keep theirs too (the unrolled
    reduction's test above)."""

    def build(fd):
        x = fd.ops.cast(fd.define_tensor(shape=[-1, 64], contiguity=True, dtype=DataType.BFloat16), DataType.Float)
        first = fd.ops.slice(x, start_indices=[0, 0], end_indices=[x.size(0), 32], strides=[1, 1])
        second = fd.ops.slice(x, start_indices=[0, 32], end_indices=[x.size(0), 64], strides=[1, 1])
        rotated = fd.ops.cat([fd.ops.neg(second), first], dim=1)
        fd.add_output(fd.ops.cast(fd.ops.add(x, rotated), DataType.BFloat16))

    inputs = [_rand(4096, 64, dtype=np.float32).astype(ml_dtypes.bfloat16)]
    runtime = _fusion_runtime(build, inputs)
    body = _kernel_body(runtime)
    assert runtime.segmented.groups[0].params.vectorize > 1, body
    assert re.search(r"__bfloat T\d+_1\[\d+\] = \{\};", body), body  # the copy read at the second offset
    assert not re.search(r"__bfloat T\d+(_\d+)?\[\d+\];", body), body  # no copy goes unzeroed


def _transpose_add(dtype, extra=None):
    """x (column-major) + y (row-major), written column-major, and relu(y^T) row-major:
    transpose_add's shape. y is staged; x and both outputs run along x's fast axis."""

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype, stride_order=[0, 1])
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        total = fd.ops.add(t0, t1)
        if extra == "row_bias":  # constant along the vectors' axis: read element by element
            bias = fd.define_tensor(shape=[-1], contiguity=True, dtype=dtype)
            total = fd.ops.add(total, fd.ops.broadcast_in_dim(bias, shape=t0.shape(), broadcast_dims=[1]))
        fd.add_output(total, stride_order=[0, 1])
        # y^T in y's own layout (an output's default): along the staged side's fast axis
        order = {} if extra == "output_in_y_layout" else {"stride_order": [1, 0]}
        fd.add_output(fd.ops.relu(fd.ops.permute(t1, dims=[1, 0])), **order)

    return build


@pytest.mark.parametrize(
    ("shape", "dtype", "extra", "vectorize"),
    [
        ((64, 96), DataType.Float, None, 4),  # whole tiles, 16-byte vectors
        ((40, 72), DataType.Float, None, 4),  # partial tiles: each vector under its tile's bounds
        ((36, 70), DataType.Float, None, 4),  # x's fast axis (36) takes 4; y's (70) is staged
        ((38, 72), DataType.Float, None, 2),  # 38 = 2 x 19: 8-byte vectors
        ((37, 72), DataType.Float, None, 1),  # odd: element by element
        ((64, 48), DataType.BFloat16, None, 4),  # the sum is float (promoted): 4 to 16 bytes
        ((64, 96), DataType.Float, "row_bias", 4),
        ((64, 96), DataType.Float, "output_in_y_layout", 4),  # that output stored element-wise
    ],
)
def test_a_transpose_moves_its_fast_side_in_vectors(shape, dtype, extra, vectorize):
    rows, cols = shape
    x = np.asfortranarray(_rand(rows, cols)).astype(dtype.numpy)
    y = _rand(rows, cols).astype(dtype.numpy)
    inputs = [x, y] + ([_rand(cols).astype(dtype.numpy)] if extra == "row_bias" else [])
    runtime = _fusion_runtime(_transpose_add(dtype, extra), inputs)
    (group,) = runtime.segmented.groups
    assert group.params.scheduler.value == "transpose"
    assert (group.params.tile, group.params.threads) == (32, 128)  # too few elements for 64 x 64 tiles
    assert group.params.vectorize == vectorize
    scalar = {"row_bias": (3,), "output_in_y_layout": (4,)}.get(extra, ())
    assert group.params.scalar_access == scalar
    text = _kernel_bodies(runtime)
    vectors = re.findall(r"vectorCopy<\w+, (\d+)>\(&(T\d+)", text)
    if vectorize > 1:
        # x's loads and the outputs' stores, all of the width; y (staged) element-wise
        assert {int(w) for w, _ in vectors} == {vectorize} and len(vectors) == (
            2 if extra == "output_in_y_layout" else 3
        )
        assert not re.search(r"vectorCopy<[^>]*>\(&T\d+\[[^;]*&T1\[", text)
    else:
        assert not vectors
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


@pytest.mark.parametrize(("shape", "vectorize"), [((128, 192), 4), ((72, 100), 4), ((130, 70), 2)])
def test_a_large_transpose_takes_64_wide_tiles(monkeypatch, shape, vectorize):
    """64 x 64 tiles of 256 threads, 16 elements a thread in vectors, partial tiles
    included; the threshold of tiles per SM is lowered so the interpreter can run one."""
    from fuser_core.scheduler import transpose

    monkeypatch.setattr(transpose, "LARGE_TILE_MIN_TILES_PER_SM", 0)
    rows, cols = shape
    inputs = [np.asfortranarray(_rand(rows, cols)), _rand(rows, cols)]
    runtime = _fusion_runtime(_transpose_add(DataType.Float), inputs)
    (group,) = runtime.segmented.groups
    params = group.params
    assert (params.tile, params.threads, params.vectorize) == (64, 256, vectorize)
    assert "T6[4160]" in _kernel_bodies(runtime)  # the 64 x 64 tile, a padding element a row
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_transpose_whose_tiles_overflow_shared_memory_is_left_to_the_pointwise_scheduler():
    """60 float inputs read across their fast axis: 60 tiles of 32 x 33 floats need
    253,440 bytes of shared memory, more than a block's 227 KiB on an H100; 50 fit."""

    def build(count):
        def fusion(fd):
            total = None
            for _ in range(count):
                t = fd.ops.permute(fd.define_tensor(shape=[-1, -1], contiguity=True), dims=[1, 0])
                total = t if total is None else fd.ops.add(total, t)
            fd.add_output(total, stride_order=[1, 0])  # row-major: every input read across

        return fusion

    for count, scheduler in [(60, "pointwise"), (50, "transpose")]:
        inputs = [_rand(33, 40) for _ in range(count)]
        runtime = _fusion_runtime(build(count), inputs)
        (group,) = runtime.segmented.groups
        assert group.scheduler.value == scheduler
        if count == 60:
            assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


@pytest.mark.parametrize(
    ("shape", "x_order"),
    [
        ((63, 5, 2, 80), [0, 1, 2, 3]),  # x fully reversed: its outer axes in the other order
        ((5, 40, 3, 36), [2, 0, 3, 1]),  # x's outer axes 2, 0; y's 0, 2
        ((4, 3, 34, 5, 33), [3, 2, 0, 4, 1]),  # x's 3, 0, 1; y's 0, 1, 3
    ],
)
def test_a_transpose_agrees_on_its_blocks_whatever_the_inputs_outer_order(shape, x_order):
    """The staged input merges the axes outside the tile into blockIdx in the reference's
    order, not its own: a block index names one tile on both sides (rank 4 and up, where
    two outer axes can come in either order)."""

    def build(fd):
        rank = len(shape)
        t0 = fd.define_tensor(shape=[-1] * rank, contiguity=True, dtype=DataType.Float, stride_order=x_order)
        t1 = fd.define_tensor(shape=[-1] * rank, contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t1))

    x = _rand(*shape)
    # x laid out with stride_order (the innermost axis has order 0), as nvFuser reads it
    axes_outer_first = sorted(range(len(shape)), key=lambda a: -x_order[a])
    x = np.ascontiguousarray(np.transpose(x, axes_outer_first)).transpose(np.argsort(axes_outer_first))
    inputs = [x, _rand(*shape)]
    runtime = _fusion_runtime(build, inputs)
    (group,) = runtime.segmented.groups
    assert group.params.scheduler.value == "transpose"
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


@pytest.mark.parametrize(("staged_inputs", "tile"), [(3, 64), (4, 32)])
def test_large_tiles_only_where_their_shared_memory_leaves_four_blocks_an_sm(monkeypatch, staged_inputs, tile):
    """Each staged float input takes 64 x 65 x 4 bytes at 64-wide tiles: three of them
    (50 KB) leave four blocks an SM of the H100's 228 KB, four (67 KB) would not."""
    from fuser_core.scheduler import transpose

    monkeypatch.setattr(transpose, "LARGE_TILE_MIN_TILES_PER_SM", 0)

    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float, stride_order=[0, 1])
        total = x
        for _ in range(staged_inputs):
            total = fd.ops.add(total, fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float))
        fd.add_output(total, stride_order=[0, 1])

    inputs = [np.asfortranarray(_rand(128, 128))] + [_rand(128, 128) for _ in range(staged_inputs)]
    runtime = _fusion_runtime(build, inputs)
    (group,) = runtime.segmented.groups
    assert len(group.params.staged) == staged_inputs
    assert group.params.tile == tile
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
