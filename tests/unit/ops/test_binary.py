"""Binary and ternary ops of `fd.ops` against NumPy, for every dtype each op accepts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import FLOATS, INTS, MAIN_DTYPES, as_float64, assert_close, output_dtype, random_array, run_one

BOOL = (DataType.Bool,)


def c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C integer division: the quotient truncated toward zero."""
    return np.array(
        [int(x / y) if abs(x) < 2**52 else x // y for x, y in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True)],
        dtype=np.int64,
    ).reshape(a.shape)


def c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C `%`: the remainder has the sign of the dividend."""
    return a - b * c_div(a, b)


def py_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Python's `%`: the remainder has the sign of the divisor."""
    flat = [x % y for x, y in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True)]
    return np.array(flat, dtype=np.float64 if a.dtype.kind == "f" else np.int64).reshape(a.shape)


def fmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    flat = [math.fmod(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True)]
    return np.array(flat, dtype=np.float64).reshape(a.shape)


@dataclass(frozen=True)
class Binary:
    name: str
    ref_float: Callable[[np.ndarray, np.ndarray], np.ndarray]  # on float64 operands
    ref_int: Callable[[np.ndarray, np.ndarray], np.ndarray] | None  # on the integer operands
    dtypes: tuple[DataType, ...]
    # "compute": half types compute in Float; "float": integers become Float too; "bool".
    result: str
    lhs: tuple[float, float] = (-3.0, 3.0)
    rhs: tuple[float, float] = (-3.0, 3.0)
    nonzero_rhs: bool = False
    shared: bool = False  # let some elements of the operands be equal
    zeros: bool = False  # let some elements of the operands be zero (false)


BINARY = [
    Binary("add", np.add, np.add, FLOATS + INTS, "compute"),
    Binary("sub", np.subtract, np.subtract, FLOATS + INTS, "compute"),
    Binary("mul", np.multiply, np.multiply, FLOATS + INTS, "compute"),
    Binary("div", np.divide, c_div, FLOATS + INTS, "compute", rhs=(0.5, 3.0), nonzero_rhs=True),
    Binary("truediv", np.divide, lambda a, b: a / b, FLOATS + INTS, "float", rhs=(0.5, 3.0), nonzero_rhs=True),
    Binary("mod", fmod, c_mod, FLOATS + INTS, "compute", lhs=(-9, 9), rhs=(0.5, 4.0), nonzero_rhs=True),
    Binary("fmod", fmod, c_mod, FLOATS + INTS, "compute", lhs=(-9, 9), rhs=(0.5, 4.0), nonzero_rhs=True),
    Binary("remainder", py_remainder, py_remainder, FLOATS + INTS, "compute", (-9, 9), (0.5, 4.0), True),
    Binary("pow", np.power, np.power, FLOATS + INTS, "compute", lhs=(0.5, 2.0), rhs=(-2.0, 3.0)),
    Binary("atan2", np.arctan2, None, FLOATS + INTS, "float"),
    Binary("maximum", np.maximum, np.maximum, FLOATS + INTS + BOOL, "compute", shared=True),
    Binary("minimum", np.minimum, np.minimum, FLOATS + INTS + BOOL, "compute", shared=True),
    Binary("eq", np.equal, np.equal, MAIN_DTYPES, "bool", shared=True),
    Binary("ne", np.not_equal, np.not_equal, MAIN_DTYPES, "bool", shared=True),
    Binary("lt", np.less, np.less, MAIN_DTYPES, "bool", shared=True),
    Binary("le", np.less_equal, np.less_equal, MAIN_DTYPES, "bool", shared=True),
    Binary("gt", np.greater, np.greater, MAIN_DTYPES, "bool", shared=True),
    Binary("ge", np.greater_equal, np.greater_equal, MAIN_DTYPES, "bool", shared=True),
    Binary("logical_and", np.logical_and, np.logical_and, MAIN_DTYPES, "bool", zeros=True),
    Binary("logical_or", np.logical_or, np.logical_or, MAIN_DTYPES, "bool", zeros=True),
    Binary("bitwise_and", np.bitwise_and, np.bitwise_and, INTS + BOOL, "compute", (-40, 40), (-40, 40)),
    Binary("bitwise_or", np.bitwise_or, np.bitwise_or, INTS + BOOL, "compute", (-40, 40), (-40, 40)),
    Binary("bitwise_xor", np.bitwise_xor, np.bitwise_xor, INTS + BOOL, "compute", (-40, 40), (-40, 40)),
]

CASES = [pytest.param(op, dt, id=f"{op.name}-{dt.name}") for op in BINARY for dt in op.dtypes]


def expected_dtype(result: str, dtype: DataType) -> DataType:
    if result == "bool":
        return DataType.Bool
    if result == "float" and not dtype.is_floating:
        return DataType.Float
    return DataType.Float if dtype.is_reduced_float else dtype


def binary_inputs(op: Binary, dtype: DataType, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lhs = random_array(rng, (4, 5), dtype, *op.lhs)
    rhs = random_array(rng, (4, 5), dtype, *op.rhs)
    if op.nonzero_rhs and not dtype.is_boolean:  # both signs, never zero
        rhs = (rhs * rng.choice(np.array([-1, 1], dtype=rhs.dtype), size=rhs.shape)).astype(rhs.dtype)
        assert np.all(rhs != 0)
    if op.shared:
        rhs = np.where(rng.random(rhs.shape) < 0.3, lhs, rhs)
    if op.zeros:
        lhs = np.where(rng.random(lhs.shape) < 0.4, np.zeros_like(lhs), lhs)
        rhs = np.where(rng.random(rhs.shape) < 0.4, np.zeros_like(rhs), rhs)
    if op.name == "pow" and dtype.is_integral:  # integer powers: small bases, exponents >= 0
        lhs = random_array(rng, (4, 5), dtype, -3, 3)
        rhs = random_array(rng, (4, 5), dtype, 0, 4)
    return lhs, rhs


@pytest.mark.parametrize(("op", "dtype"), CASES)
def test_binary_op_matches_numpy(op: Binary, dtype: DataType) -> None:
    lhs, rhs = binary_inputs(op, dtype, seed=len(op.name) * 17 + list(DataType).index(dtype))
    out, _ = run_one(lambda fd, a, b: getattr(fd.ops, op.name)(a, b), lhs, rhs)

    want_dtype = expected_dtype(op.result, dtype)
    assert output_dtype(out) == want_dtype
    if (dtype.is_integral or dtype.is_boolean) and op.ref_int is not None and op.result != "float":
        np.testing.assert_array_equal(out, op.ref_int(lhs, rhs))
    else:
        assert_close(out, op.ref_float(as_float64(lhs), as_float64(rhs)), want_dtype)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_integer_div_and_mod_follow_c(dtype: DataType) -> None:
    """div truncates toward zero and mod takes the dividend's sign, as in C;
    remainder takes the divisor's sign, as in Python."""
    a = np.array([7, -7, 7, -7, 6, -6, 1, -1], dtype=dtype.numpy)
    b = np.array([2, 2, -2, -2, 4, 4, 3, -3], dtype=dtype.numpy)
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        tb = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        for name in ("div", "mod", "fmod", "remainder"):
            fd.add_output(getattr(fd.ops, name)(ta, tb))
        fd.add_output(ta / tb)
        fd.add_output(ta % tb)
    div, mod, fmod_, rem, div_op, mod_op = fd.execute([a, b])
    np.testing.assert_array_equal(div, [3, -3, -3, 3, 1, -1, 0, 0])
    np.testing.assert_array_equal(mod, [1, -1, 1, -1, 2, -2, 1, -1])
    np.testing.assert_array_equal(fmod_, mod)
    np.testing.assert_array_equal(rem, [1, 1, -1, -1, 2, 2, 1, -1])
    np.testing.assert_array_equal(div_op, div)
    np.testing.assert_array_equal(mod_op, mod)
    assert all(r.dtype == dtype.numpy for r in (div, mod, fmod_, rem))


def test_integer_div_by_a_python_int() -> None:
    x = np.array([[-9, -4, 5, 9]], dtype=np.int64)
    out, _ = run_one(lambda fd, t: t / 2, x)
    np.testing.assert_array_equal(out, [[-4, -2, 2, 4]])
    assert out.dtype == np.int64


def test_float_remainder_and_fmod_signs() -> None:
    a = np.array([5.5, -5.5, 5.5, -5.5], dtype=np.float64)
    b = np.array([2.0, 2.0, -2.0, -2.0], dtype=np.float64)
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Double)
        tb = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Double)
        fd.add_output(fd.ops.fmod(ta, tb))
        fd.add_output(fd.ops.remainder(ta, tb))
        fd.add_output(fd.ops.mod(ta, tb))
    fm, rem, mod = fd.execute([a, b])
    np.testing.assert_array_equal(fm, [1.5, -1.5, 1.5, -1.5])
    np.testing.assert_array_equal(rem, [1.5, 0.5, -0.5, -1.5])
    np.testing.assert_array_equal(mod, fm)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_integer_pow_with_negative_exponents(dtype: DataType) -> None:
    """C semantics of nvFuser's integer pow: 1 and -1 keep their powers, others give 0."""
    a = np.array([2, -2, 3, 1, -1, -1, 5], dtype=dtype.numpy)
    b = np.array([-1, -1, -2, -3, -1, -2, 0], dtype=dtype.numpy)
    out, _ = run_one(lambda fd, x, y: fd.ops.pow(x, y), a, b)
    np.testing.assert_array_equal(out, [0, 0, 0, 1, -1, 1, 1])
    assert out.dtype == dtype.numpy


def test_pow_with_python_exponents() -> None:
    x = random_array(np.random.default_rng(4), (3, 4), DataType.Float, 0.5, 2.0)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(fd.ops.pow(t, 2))
        fd.add_output(fd.ops.pow(t, 0.5))
        fd.add_output(fd.ops.pow(2.0, t))
    sq, root, exp2 = fd.execute([x])
    xd = as_float64(x)
    assert_close(sq, xd**2)
    assert_close(root, np.sqrt(xd))
    assert_close(exp2, 2.0**xd)
    assert sq.dtype == root.dtype == exp2.dtype == np.float32


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "truediv", "eq", "ne"])
def test_binary_on_complex_float(name: str) -> None:
    rng = np.random.default_rng(21)
    a = random_array(rng, (3, 4), DataType.ComplexFloat)
    b = random_array(rng, (3, 4), DataType.ComplexFloat)
    b[0] = a[0]  # some equal elements for eq/ne
    out, _ = run_one(lambda fd, x, y: getattr(fd.ops, name)(x, y), a, b)
    ref = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "div": np.divide,
        "truediv": np.divide,
        "eq": np.equal,
        "ne": np.not_equal,
    }[name]
    expected = ref(a.astype(np.complex128), b.astype(np.complex128))
    if name in ("eq", "ne"):
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out, expected)
    else:
        assert out.dtype == np.complex64
        assert_close(out, expected, DataType.ComplexFloat)


def test_bool_add_and_mul_are_or_and_and() -> None:
    rng = np.random.default_rng(5)
    a, b = random_array(rng, (4, 4), DataType.Bool), random_array(rng, (4, 4), DataType.Bool)
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Bool)
        tb = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Bool)
        fd.add_output(fd.ops.add(ta, tb))
        fd.add_output(fd.ops.mul(ta, tb))
    added, multiplied = fd.execute([a, b])
    assert added.dtype == multiplied.dtype == np.bool_
    np.testing.assert_array_equal(added, a | b)
    np.testing.assert_array_equal(multiplied, a & b)


def test_bool_subtraction_is_rejected_at_definition() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Bool)
        tb = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Bool)
        fd.ops.sub(ta, tb)
    assert info.value.op == "sub"
    assert "bitwise_xor" in str(info.value)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise_ops_reject_floats(name: str) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        u = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        getattr(fd.ops, name)(t, u)
    assert info.value.op == name
    assert "DataType.Float" in str(info.value)


# -- broadcasting ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lhs_shape", "rhs_shape"),
    [((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 4)), ((2, 3, 4), (1, 4)), ((5,), (1,)), ((3, 1), (1, 4))],
)
def test_lower_rank_and_size_one_operands_broadcast(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(8)
    a = random_array(rng, lhs_shape, DataType.Float)
    b = random_array(rng, rhs_shape, DataType.Float)
    with FusionDefinition() as fd:
        ta = fd.define_tensor(
            shape=[1 if s == 1 else -1 for s in lhs_shape], contiguity=[None if s == 1 else True for s in lhs_shape]
        )
        tb = fd.define_tensor(
            shape=[1 if s == 1 else -1 for s in rhs_shape], contiguity=[None if s == 1 else True for s in rhs_shape]
        )
        fd.add_output(fd.ops.add(ta, tb))
        fd.add_output(fd.ops.mul(tb, ta))
    added, multiplied = fd.execute([a, b])
    assert_close(added, as_float64(a) + as_float64(b))
    assert_close(multiplied, as_float64(b) * as_float64(a))


# -- Python literals as operands ------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "ref"),
    [
        (lambda fd, t: fd.ops.add(1.0, t), lambda x: 1.0 + x),
        (lambda fd, t: fd.ops.add(t, 2), lambda x: x + 2),
        (lambda fd, t: fd.ops.sub(3, t), lambda x: 3 - x),
        (lambda fd, t: fd.ops.mul(t, -2.5), lambda x: x * -2.5),
        (lambda fd, t: fd.ops.div(1.0, t), lambda x: 1.0 / x),
        (lambda fd, t: fd.ops.maximum(t, 0.5), lambda x: np.maximum(x, 0.5)),
        (lambda fd, t: fd.ops.atan2(1.0, t), lambda x: np.arctan2(1.0, x)),
        (lambda fd, t: fd.ops.pow(t, 3), lambda x: x**3),
    ],
    ids=["add-lit-lhs", "add-int-lit", "sub-lit", "mul-neg", "div-lit-lhs", "maximum", "atan2", "pow"],
)
def test_python_literals_as_operands(build: Callable, ref: Callable) -> None:
    x = random_array(np.random.default_rng(9), (3, 4), DataType.Float, 0.5, 2.0)
    out, _ = run_one(build, x)
    assert out.dtype == np.float32  # literals never widen a Float tensor
    assert_close(out, ref(as_float64(x)))


def test_literal_operands_of_integer_tensors() -> None:
    x = random_array(np.random.default_rng(10), (3, 4), DataType.Int32, -9, 9)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
        fd.add_output(fd.ops.add(t, 5))
        fd.add_output(fd.ops.mul(3, t))
        fd.add_output(fd.ops.add(t, 0.5))
    added, multiplied, widened = fd.execute([x])
    assert added.dtype == multiplied.dtype == np.int32  # an Int literal keeps Int32
    assert widened.dtype == np.float64  # a Double literal promotes an integer tensor
    np.testing.assert_array_equal(added, x + 5)
    np.testing.assert_array_equal(multiplied, 3 * x)
    assert_close(widened, x.astype(np.float64) + 0.5)


# -- ternary ops ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_where(dtype: DataType) -> None:
    rng = np.random.default_rng(12)
    cond = random_array(rng, (3, 5), DataType.Bool)
    a, b = random_array(rng, (3, 5), dtype), random_array(rng, (3, 5), dtype)
    out, _ = run_one(lambda fd, c, x, y: fd.ops.where(c, x, y), cond, a, b)
    assert output_dtype(out) == dtype  # where selects: no promotion of half types
    np.testing.assert_array_equal(out, np.where(cond, a, b))


def test_where_with_scalars_and_broadcast() -> None:
    rng = np.random.default_rng(13)
    x = random_array(rng, (3, 4), DataType.Float)
    y = random_array(rng, (4,), DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        u = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.add_output(fd.ops.where(t > 0, t, u))
        fd.add_output(fd.ops.where(t > 0, 1.0, -1.0))
        fd.add_output(fd.ops.where(t > 0, t, 0.0))
    mixed, signs, relu = fd.execute([x, y])
    np.testing.assert_array_equal(mixed, np.where(x > 0, x, y))
    np.testing.assert_array_equal(signs, np.where(x > 0, 1.0, -1.0))
    np.testing.assert_array_equal(relu, np.where(x > 0, x, 0.0))
    assert (mixed.dtype, signs.dtype, relu.dtype) == (np.float32, np.float64, np.float32)


def test_where_promotes_mixed_branches() -> None:
    rng = np.random.default_rng(14)
    cond = random_array(rng, (6,), DataType.Bool)
    a = random_array(rng, (6,), DataType.Int32)
    b = random_array(rng, (6,), DataType.Double)
    out, _ = run_one(lambda fd, c, x, y: fd.ops.where(c, x, y), cond, a, b)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, np.where(cond, a.astype(np.float64), b))


def test_where_needs_a_bool_condition() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.ops.where(t, t, t)
    assert info.value.op == "where"
    assert "Bool" in str(info.value)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_lerp(dtype: DataType) -> None:
    rng = np.random.default_rng(15)
    start, end = random_array(rng, (3, 5), dtype), random_array(rng, (3, 5), dtype)
    weight = random_array(rng, (3, 5), dtype, 0.0, 1.0)
    with FusionDefinition() as fd:
        s, e, w = (fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype) for _ in range(3))
        fd.add_output(fd.ops.lerp(s, e, w))
        fd.add_output(fd.ops.lerp(s, e, 0.25))
    tensor_weight, scalar_weight = fd.execute([start, end, weight])
    s64, e64, w64 = as_float64(start), as_float64(end), as_float64(weight)
    want = DataType.Double if dtype == DataType.Double else DataType.Float
    assert output_dtype(tensor_weight) == output_dtype(scalar_weight) == want
    assert_close(tensor_weight, s64 + w64 * (e64 - s64))
    assert_close(scalar_weight, s64 + 0.25 * (e64 - s64))


def test_lerp_is_exact_at_both_ends() -> None:
    rng = np.random.default_rng(16)
    start, end = random_array(rng, (8,), DataType.Float), random_array(rng, (8,), DataType.Float)
    weight = np.array([0, 1, 0, 1, 0, 1, 0, 1], dtype=np.float32)
    out, _ = run_one(lambda fd, s, e, w: fd.ops.lerp(s, e, w), start, end, weight)
    np.testing.assert_array_equal(out, np.where(weight == 0, start, end))


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: d.name)
def test_clamp(dtype: DataType) -> None:
    x = random_array(np.random.default_rng(17), (4, 5), dtype, -5, 5)
    low, high = (-2, 3) if dtype.is_integral else (-1.5, 2.25)
    out, _ = run_one(lambda fd, t: fd.ops.clamp(t, low, high), x)
    assert output_dtype(out) == dtype
    np.testing.assert_array_equal(as_float64(out), np.clip(as_float64(x), low, high))


def test_clamp_with_scalar_inputs() -> None:
    x = random_array(np.random.default_rng(18), (4, 5), DataType.Float)
    out, _ = run_one(lambda fd, t, lo, hi: fd.ops.clamp(t, lo, hi), x, -0.5, 1.0)
    np.testing.assert_array_equal(out, np.clip(x, np.float32(-0.5), np.float32(1.0)))


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: d.name)
def test_threshold(dtype: DataType) -> None:
    x = random_array(np.random.default_rng(19), (4, 5), dtype, -5, 5)
    thresh, value = (1, -7) if dtype.is_integral else (0.5, -7.0)
    out, _ = run_one(lambda fd, t: fd.ops.threshold(t, thresh, value), x)
    assert output_dtype(out) == dtype
    np.testing.assert_array_equal(as_float64(out), np.where(as_float64(x) <= thresh, value, as_float64(x)))


@pytest.mark.parametrize(
    "build",
    [
        lambda fd, t: fd.ops.clamp(t, 0.5, 3),
        lambda fd, t: fd.ops.threshold(t, 0.5, 1),
        lambda fd, t: fd.ops.threshold(t, 1, 2.5),
    ],
    ids=["clamp", "threshold-bound", "threshold-value"],
)
def test_fractional_bounds_of_integer_tensors_are_user_errors(build: Callable) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        build(fd, t)
    assert info.value.op in ("clamp", "threshold")
    assert "DataType.Int" in str(info.value)
