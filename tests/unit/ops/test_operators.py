"""Python operators on Tensor and Scalar handles, and add_output's stride order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition

from ._helpers import as_float64, assert_close, random_array, run_one

FLOAT_OPERATORS: list[tuple[str, Callable, Callable]] = [
    ("T0 + T1", lambda a, b: a + b, lambda a, b: a + b),
    ("T0 - T1", lambda a, b: a - b, lambda a, b: a - b),
    ("T0 * T1", lambda a, b: a * b, lambda a, b: a * b),
    ("T0 / T1", lambda a, b: a / b, lambda a, b: a / b),
    ("-T0", lambda a, b: -a, lambda a, b: -a),
    ("abs(T0)", lambda a, b: abs(a), lambda a, b: np.abs(a)),
    ("T0 * 2", lambda a, b: a * 2, lambda a, b: a * 2),
    ("2 - T0", lambda a, b: 2 - a, lambda a, b: 2 - a),
    ("T0 / 2", lambda a, b: a / 2, lambda a, b: a / 2),
    ("1.5 / T1", lambda a, b: 1.5 / b, lambda a, b: 1.5 / b),
    ("T0 % 3", lambda a, b: a % 3, lambda a, b: np.fmod(a, 3)),
    ("T0 ** 2", lambda a, b: a**2, lambda a, b: a**2),
    ("2 ** T0", lambda a, b: 2**a, lambda a, b: 2.0**a),
    ("T1 ** T0", lambda a, b: b**a, lambda a, b: b**a),
    ("T0 + 1.5 * T1", lambda a, b: a + 1.5 * b, lambda a, b: a + 1.5 * b),
]


@pytest.mark.parametrize(("text", "build", "ref"), FLOAT_OPERATORS, ids=[t for t, _, _ in FLOAT_OPERATORS])
def test_arithmetic_operators_on_float_tensors(text: str, build: Callable, ref: Callable) -> None:
    rng = np.random.default_rng(0)
    a = random_array(rng, (3, 4), DataType.Float, -3, 3)
    b = random_array(rng, (3, 4), DataType.Float, 0.5, 2)
    out, _ = run_one(lambda fd, x, y: build(x, y), a, b)
    assert out.dtype == np.float32
    assert_close(out, ref(as_float64(a), as_float64(b)))


def test_true_division_operator_maps_to_div() -> None:
    """nvFuser maps `/` to div: integers divide with C truncation."""
    a = np.array([7, -7, 9, -1], dtype=np.int64)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        out = t / 2
        fd.add_output(out)
        fd.add_output(2 / (t + 10))
    assert "/ 2" in fd.fusion_ir()
    halves, reversed_div = fd.execute([a])
    np.testing.assert_array_equal(halves, [3, -3, 4, 0])
    np.testing.assert_array_equal(reversed_div, [0, 0, 0, 0])
    assert halves.dtype == np.int64


@pytest.mark.parametrize("dtype", [DataType.Int, DataType.Int32], ids=lambda d: d.name)
def test_integer_operators(dtype: DataType) -> None:
    rng = np.random.default_rng(1)
    a = random_array(rng, (3, 4), dtype, -20, 20)
    b = random_array(rng, (3, 4), dtype, 1, 5)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        for out in (x & y, x | y, x ^ y, ~x, x & 6, 6 | x, 3 ^ x, x % 3, -7 % y, x % y, x**2, 2**y, -x, x * y - 1):
            fd.add_output(out)
    outs = fd.execute([a, b])
    c_mod = lambda p, q: np.fmod(p, q)  # noqa: E731
    expected = [a & b, a | b, a ^ b, ~a, a & 6, 6 | a, 3 ^ a, c_mod(a, 3), c_mod(-7, b), c_mod(a, b)]
    expected += [a**2, 2**b, -a, a * b - 1]
    for got, want in zip(outs, expected, strict=True):
        assert got.dtype == dtype.numpy
        np.testing.assert_array_equal(got, want)


def test_comparison_operators() -> None:
    rng = np.random.default_rng(2)
    a = random_array(rng, (3, 4), DataType.Float)
    b = np.where(rng.random((3, 4)) < 0.4, a, random_array(rng, (3, 4), DataType.Float))
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        reflected = 0.5 >= x  # noqa: SIM300 - a literal on the left uses the reflected operator
        for out in (x < y, x <= y, x > y, x >= y, x == y, x != y, x > 0, reflected, x == 1):
            fd.add_output(out)
    outs = fd.execute([a, b])
    expected = [a < b, a <= b, a > b, a >= b, a == b, a != b, a > 0, a <= 0.5, a == 1]
    for got, want in zip(outs, expected, strict=True):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)


def test_bool_operators() -> None:
    rng = np.random.default_rng(3)
    a, b = random_array(rng, (4, 4), DataType.Bool), random_array(rng, (4, 4), DataType.Bool)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Bool)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Bool)
        for out in (x & y, x | y, x ^ y, ~x, fd.ops.logical_not(x), x == y):
            fd.add_output(out)
    outs = fd.execute([a, b])
    for got, want in zip(outs, [a & b, a | b, a ^ b, ~a, ~a, a == b], strict=True):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)


def test_operators_broadcast_lower_rank_tensors() -> None:
    rng = np.random.default_rng(4)
    a, bias = random_array(rng, (2, 3, 4), DataType.Float), random_array(rng, (4,), DataType.Float)
    out, _ = run_one(lambda fd, x, b: (x - b) * b, a, bias)
    assert_close(out, (as_float64(a) - as_float64(bias)) * as_float64(bias))


def test_operators_on_scalar_handles() -> None:
    with FusionDefinition() as fd:
        s = fd.define_scalar(None, dtype=DataType.Double)
        n = fd.define_scalar(None, dtype=DataType.Int)
        for out in (s + 1, 2 * s, s - n, -s, s / 4, n % 4, n**2, s < 1.0, n == 3, abs(s), n & 6, ~n):
            fd.add_output(out)
    assert fd.execute([-2.5, 11]) == [-1.5, -5.0, -13.5, 2.5, -0.625, 3, 121, True, False, 2.5, 2, -12]


def test_a_handle_has_no_truth_value() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        with pytest.raises(TypeError, match="no truth value"):
            bool(t > 0)


# -- outputs with a stride order ------------------------------------------------------


def element_strides(array: np.ndarray) -> list[int]:
    return [s // array.itemsize for s in array.strides]


@pytest.mark.parametrize(
    "order",
    [[2, 1, 0], [0, 1, 2], [0, 2, 1], [1, 0, 2], [2, 0, 1], [1, 2, 0]],
    ids=str,
)
def test_add_output_stride_order(order: list[int]) -> None:
    """Axis i has the order[i]-th smallest stride (0 = innermost), densely packed."""
    x = random_array(np.random.default_rng(5), (2, 3, 4), DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        fd.add_output(t * 2.0, stride_order=order)
    (out,) = fd.execute([x])
    np.testing.assert_array_equal(out, x * 2)
    strides = element_strides(out)
    by_order = sorted(range(3), key=lambda axis: order[axis])  # innermost first
    expected_stride = 1
    for axis in by_order:
        assert strides[axis] == expected_stride, (strides, order)
        expected_stride *= x.shape[axis]


def test_add_output_positional_stride_order_and_default_layout() -> None:
    x = random_array(np.random.default_rng(6), (3, 5), DataType.Double)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Double)
        fd.add_output(t + 1.0, [0, 1])
        fd.add_output(t - 1.0)
    column_major, row_major = fd.execute([x])
    assert element_strides(column_major) == [1, 3]
    assert element_strides(row_major) == [5, 1]
    np.testing.assert_array_equal(column_major, x + 1)
    np.testing.assert_array_equal(row_major, x - 1)


def test_computed_outputs_are_fresh_arrays_and_an_input_output_is_the_input() -> None:
    # As nvFuser: an input given as an output comes back as the caller's object itself.
    x = random_array(np.random.default_rng(7), (2, 3), DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(t)
        fd.add_output(fd.ops.permute(t, [1, 0]))
    same, transposed = fd.execute([x])
    assert same is x
    assert not np.shares_memory(transposed, x)
    np.testing.assert_array_equal(transposed, x.T)
