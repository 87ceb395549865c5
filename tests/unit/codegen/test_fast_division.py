"""Index divisions by run-time extents in 32-bit kernels: the magic numbers against floor
division (exhaustively where it is cheap, and at the edges of [0, 2^31)), which divisions
the lowering rewrites and which it leaves, and the interpreter running them as the device
does (wrong numbers give wrong indices; a dividend outside [0, 2^31) is a fault)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen import lower_group, print_kernel, print_kernel_ir
from fuser_core.codegen.interpreter import KernelFault, TensorBinding, interpret
from fuser_core.codegen.lower.fast_division import use_fast_division
from fuser_core.codegen.magic_division import MagicDivisor, magic_quotient
from fuser_core.runtime.group_lowering import index_dtype

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels, runtime_and_inputs, shrunk_sample

INT32_END = 1 << 31
RNG = np.random.default_rng(11)
# A run-time division or modulo as the CUDA prints it: `/ T1.logical_size[4]`.
RUNTIME_DIVISION = re.compile(r"[/%] T\d+\.logical_size")


def quotients(n: np.ndarray, divisor: int) -> np.ndarray:
    magic = MagicDivisor.of(divisor)
    return magic_quotient(n, np.asarray(magic.magic), np.asarray(magic.shift)).astype(np.int64)


# -- the magic numbers ---------------------------------------------------------------------


def test_the_magic_numbers_of_the_small_divisors_and_the_powers_of_two():
    assert MagicDivisor.of(1) == MagicDivisor(1, 1, 0)  # (umulhi(n, 1) + n) >> 0 == n
    assert MagicDivisor.of(3) == MagicDivisor(3, 0x55555556, 2)
    assert MagicDivisor.of(7) == MagicDivisor(7, 0x24924925, 3)
    for shift in range(32):
        assert MagicDivisor.of(1 << shift) == MagicDivisor(1 << shift, 1, shift)


def test_every_dividend_up_to_2_to_the_16_for_every_divisor_up_to_1100():
    n = np.arange(1 << 16, dtype=np.int64)
    for divisor in range(1, 1100):
        np.testing.assert_array_equal(quotients(n, divisor), n // divisor, err_msg=f"d={divisor}")


EDGE_DIVISORS = sorted(
    {1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 25, 100, 641, 1000, 6700417, INT32_END - 1, INT32_END - 2}
    | {1 << s for s in range(32)}
    | {(1 << s) + 1 for s in range(31)}
    | {(1 << s) - 1 for s in range(2, 32)}
    | {3 << s for s in range(30)}
    | {7 << s for s in range(29)}
)


@pytest.mark.parametrize("divisor", EDGE_DIVISORS)
def test_dividends_near_2_to_the_31_and_at_multiples_of_the_divisor(divisor):
    top = np.arange(INT32_END - (1 << 14), INT32_END, dtype=np.int64)
    multiples = np.arange(0, INT32_END, max(divisor, INT32_END >> 12), dtype=np.int64)
    around = np.clip(np.concatenate([multiples - 1, multiples, multiples + 1]), 0, INT32_END - 1)
    random = RNG.integers(0, INT32_END, 1 << 14)
    for n in (top, around, random):
        np.testing.assert_array_equal(quotients(n, divisor), n // divisor, err_msg=f"d={divisor}")
    magic = MagicDivisor.of(divisor)
    assert 0 <= magic.magic < 1 << 32 and 0 <= magic.shift <= 31
    edges = np.array([n for n in (0, 1, divisor - 1, divisor, divisor + 1, INT32_END - 2, INT32_END - 1) if n >= 0])
    np.testing.assert_array_equal(quotients(edges, divisor), edges // divisor, err_msg=f"d={divisor}")


def test_random_divisors_against_random_dividends():
    for divisor in RNG.integers(1, INT32_END, 300).tolist():
        n = RNG.integers(0, INT32_END, 4096)
        np.testing.assert_array_equal(quotients(n, divisor), n // divisor, err_msg=f"d={divisor}")


def test_a_divisor_past_every_32_bit_index_gives_quotient_zero():
    n = np.array([0, 1, 12345, INT32_END - 1])
    for divisor in (INT32_END, INT32_END + 5, (1 << 32) - 1, 1 << 40):
        np.testing.assert_array_equal(quotients(n, divisor), 0)


# -- what lowering rewrites -----------------------------------------------------------------


def _sample_group(name: str):
    runtime, inputs = runtime_and_inputs(shrunk_sample(name))
    assert runtime.signature.index_type == "int32"
    return runtime, inputs, runtime.segmented.groups[0]


def test_resize_pad_divides_by_magic_numbers_in_int32_and_plainly_in_int64():
    runtime, inputs, group = _sample_group("resize_pad_to_broadcast_dynamic")
    fast = lower_group(group.fusion, "k", DataType.Int32)
    cuda = print_kernel(fast)
    assert not RUNTIME_DIVISION.search(cuda)
    assert "fastDiv(" in cuda and "fastMod(" in cuda
    # Axes 4 and 2 meet the pad's static widths (5 and 4): divided by literals, unsigned;
    # axes 3 and 1 meet only broadcasts, so their run-time extents get magic numbers.
    assert [d.name for d in fast.divisors] == ["T1_div3", "T1_div1"]
    assert "FastDivisor T1_div3, FastDivisor T1_div1)" in cuda
    assert "  divisor T1_div3 = T1.logical_size[3]\n" in print_kernel_ir(fast)
    assert "% 5u))" in cuda and "/ 5u))" in cuda and "% 4u))" in cuda and "/ 4u))" in cuda
    assert "T1.logical_size[4]" not in cuda and "T1.logical_size[2]" not in cuda
    # The contiguous output is indexed by the flat index, its axes merged back although the
    # simplifier wrote the inner one's coordinate as `x % 5 + lane`.
    (store,) = [line.strip() for line in cuda.splitlines() if line.strip().startswith("T3[")]
    assert "%" not in store and "/" not in store, store
    wide = lower_group(group.fusion, "k", DataType.Int)
    cuda = print_kernel(wide)
    assert RUNTIME_DIVISION.search(cuda) and "fastDiv" not in cuda and "FastDivisor" not in cuda
    assert wide.divisors == []
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, inputs, vectorize=vectorize) == ["kernel_g0"]


def _run(build, inputs):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        return fd.runtime_for(inputs)


@pytest.mark.parametrize("shape", [(5, 7, 9), (3, 4, 5, 6), (2, 3, 1, 4, 5)])
def test_non_contiguous_inputs_of_three_or_more_axes(shape):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1] * len(shape), contiguity=[False] * len(shape), dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1] * len(shape), contiguity=[False] * len(shape), dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.mul(t0, t1), fd.ops.exp(t0)))

    inputs = [RNG.standard_normal(shape).astype(np.float32) for _ in range(2)]
    runtime = _run(build, inputs)
    fusion = runtime.segmented.groups[0].fusion
    kernel = lower_group(fusion, "k", index_dtype(runtime.signature.index_type))
    assert not RUNTIME_DIVISION.search(print_kernel(kernel)) and kernel.divisors
    assert RUNTIME_DIVISION.search(print_kernel(lower_group(fusion, "k", DataType.Int)))
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_integer_division_of_values_and_divisions_by_constants_stay_plain():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, 6], contiguity=[False, False, False], dtype=DataType.Int)
        t1 = fd.define_tensor(shape=[-1, -1, 6], contiguity=[False, False, False], dtype=DataType.Int)
        fd.add_output(fd.ops.div(t0, t1))
        fd.add_output(fd.ops.fmod(t0, t1))

    x = np.arange(-60, 60).reshape(4, 5, 6)
    inputs = [x, np.where(x % 7 == 3, 4, x % 7 - 3)]  # negative divisors, never zero
    runtime = _run(build, inputs)
    cuda = print_kernel(lower_group(runtime.segmented.groups[0].fusion, "k", DataType.Int32))
    assert "fastDiv(" in cuda  # the index of axis 1, by its run-time extent
    assert "(T0_in[0] / T1_in[0])" in cuda  # C's division of the values, negative ones too
    assert re.search(r"\(unsigned\)\(.*\) [/%] 3u\)", cuda)  # by a constant: NVRTC's own, unsigned
    assert check_generated_kernels(runtime, inputs, exact=True) == ["kernel_g0"]


# -- the rewrite on hand-written kernel IR ------------------------------------------------------

IDX = DataType.Index


def _size(tensor: str, axis: int) -> k.TensorField:
    return k.TensorField(IDX, tensor, "logical_size", axis)


def _rewritten(index: k.Node) -> tuple[k.Node, list[k.DivisorArg]]:
    i = k.Var(IDX, "i0")
    store = k.Store("T1", index, k.Const(DataType.Float, 0.0))
    body: list[k.Stmt] = [k.For(i, k.Const(IDX, 8), k.LoopKind.serial, [store])]
    divisors = use_fast_division(body)
    return store.index, divisors


def test_the_rewrite_needs_a_non_negative_index_and_a_product_of_extents():
    i = k.Var(IDX, "i0")
    n4, n3 = _size("T0", 4), _size("T0", 3)
    index, divisors = _rewritten(k.Bin(IDX, "%", k.Bin(IDX, "/", i, n4), n3))
    assert k.expr_text(index) == "fastMod(fastDiv(i0, T0_div4), T0_div3)"
    assert [(d.name, d.extent) for d in divisors] == [("T0_div4", n4), ("T0_div3", n3)]
    thread = k.Var(IDX, "threadIdx.x")
    index, divisors = _rewritten(k.Bin(IDX, "/", k.Bin(IDX, "+", thread, i), k.Bin(IDX, "*", n3, n4)))
    assert k.expr_text(index) == "fastDiv((threadIdx.x + i0), T0_div3_4)"
    assert [d.name for d in divisors] == ["T0_div3_4"]
    unchanged = [
        k.Bin(IDX, "/", k.Bin(IDX, "-", i, k.Const(IDX, 1)), n4),  # may be negative
        k.Bin(IDX, "/", k.ScalarParam(IDX, "s0"), n4),  # a user's scalar
        k.Bin(IDX, "/", k.Var(IDX, "T3"), n4),  # a local value, not an index
        k.Bin(IDX, "/", i, k.TensorField(IDX, "T0", "alloc_stride", 1)),  # not an extent
        k.Bin(DataType.Int, "/", k.Cast(DataType.Int, i), k.Cast(DataType.Int, n4)),  # not index math
    ]
    for node in unchanged:
        assert _rewritten(node) == (node, []), k.expr_text(node)
    # By a constant: NVRTC's own magic numbers, unsigned where the index is non-negative.
    index, divisors = _rewritten(k.Bin(IDX, "/", i, k.Const(IDX, 7)))
    assert index == k.FastDiv(IDX, "/", i, 7) and divisors == []
    assert k.expr_text(index) == "(unsigned)i0 / 7u"
    negative = k.Bin(IDX, "%", k.Bin(IDX, "-", i, k.Const(IDX, 1)), k.Const(IDX, 7))
    assert _rewritten(negative) == (negative, [])


# -- the interpreter -----------------------------------------------------------------------------


def _division_kernel(dividend: k.Node) -> k.Kernel:
    """T1[i] = dividend / T0.size[0] and T2[i] = dividend % T0.size[0], i < T1.size[0]."""
    i = k.Var(IDX, "i0")
    body: list[k.Stmt] = [
        k.Store("T1", i, k.Bin(IDX, "/", dividend, _size("T0", 0))),
        k.Store("T2", i, k.Bin(IDX, "%", dividend, _size("T0", 0))),
    ]
    loop = k.For(i, _size("T1", 0), k.LoopKind.thread, body, hardware="threadIdx.x")
    divisors = use_fast_division([loop])
    tensors = [k.TensorArg(f"T{n}", DataType.Int32, 1, 1, n > 0, n) for n in range(3)]
    return k.Kernel(
        "div", tensors, [], [loop], [k.LaunchDim("threadIdx.x", _size("T1", 0))], DataType.Int32, divisors=divisors
    )


def _interpret_division(kernel: k.Kernel, divisor: int, lanes: int, divisors=None):
    outputs = [np.zeros(lanes, np.int32), np.zeros(lanes, np.int32)]
    tensors = {"T0": TensorBinding.of(np.zeros(divisor, np.int32))}
    tensors.update({f"T{n + 1}": TensorBinding.of(out) for n, out in enumerate(outputs)})
    interpret(kernel, tensors, {}, divisors=divisors)
    return outputs


def test_the_interpreter_divides_by_the_magic_numbers_it_is_given():
    i = k.Var(IDX, "i0")
    kernel = _division_kernel(k.Bin(IDX, "*", i, k.Const(IDX, 1000003)))
    assert "fastDiv((i0 * 1000003), T0_div0)" in print_kernel_ir(kernel)
    n = np.arange(2000) * 1000003
    quotient, remainder = _interpret_division(kernel, 7, 2000)  # its own numbers, from T0's size
    np.testing.assert_array_equal(quotient, n // 7)
    np.testing.assert_array_equal(remainder, n % 7)
    wrong = MagicDivisor(7, MagicDivisor.of(7).magic - 1, 3)
    quotient, remainder = _interpret_division(kernel, 7, 2000, {"T0_div0": wrong})
    assert (quotient != n // 7).any()
    np.testing.assert_array_equal(remainder, n - quotient * 7)
    with pytest.raises(KernelFault, match="divisor argument T0_div0 is not given"):
        _interpret_division(kernel, 7, 10, {})


def test_a_fast_division_outside_0_to_2_to_the_31_or_by_zero_is_a_fault():
    i = k.Var(IDX, "i0")
    overflow = _division_kernel(k.Bin(IDX, "*", i, k.Const(IDX, 1 << 28)))
    with pytest.raises(KernelFault, match=r"fastDiv\(\(i0 \* 268435456\), T0_div0\) of 2147483648, outside"):
        _interpret_division(overflow, 3, 9)
    with pytest.raises(KernelFault, match="integer division by zero in fastDiv"):
        _interpret_division(_division_kernel(i), 0, 4)
