"""Unary ops of `fd.ops` against NumPy, for every dtype each op accepts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import FLOATS, INTS, MAIN_DTYPES, as_float64, assert_close, output_dtype, random_array, run_one

BOOL = (DataType.Bool,)


def _vectorized(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.vectorize(fn, otypes=[np.float64])(x)


@dataclass(frozen=True)
class Unary:
    name: str
    ref: Callable[[np.ndarray], np.ndarray]  # computed on float64 (or the integer input itself)
    low: float
    high: float
    dtypes: tuple[DataType, ...]
    # Output type: "float" (integers and half types become Float), "same" (the input's),
    # "compute" (half types compute, and so return, Float) or "bool".
    result: str
    exact: bool = False  # results are exactly representable: compare bit for bit
    signed: bool = False  # draw |x| in [low, high] with a random sign
    int_range: tuple[int, int] | None = None  # integer inputs, when [low, high] holds too few


UNARY = [
    Unary("abs", np.abs, -3, 3, FLOATS + INTS, "same", exact=True),
    Unary("neg", np.negative, -3, 3, FLOATS + INTS, "compute", exact=True),
    Unary("exp", np.exp, -2, 2, FLOATS + INTS + BOOL, "float"),
    Unary("exp2", np.exp2, -2, 2, FLOATS + INTS + BOOL, "float"),
    Unary("expm1", np.expm1, -1, 1, FLOATS + INTS + BOOL, "float"),
    Unary("log", np.log, 0.1, 4, FLOATS + INTS, "float"),
    Unary("log2", np.log2, 0.1, 4, FLOATS + INTS, "float"),
    Unary("log10", np.log10, 0.1, 4, FLOATS + INTS, "float"),
    Unary("log1p", np.log1p, -0.5, 3, FLOATS + INTS + BOOL, "float"),
    Unary("sin", np.sin, -3, 3, FLOATS + INTS + BOOL, "float"),
    Unary("cos", np.cos, -3, 3, FLOATS + INTS + BOOL, "float"),
    Unary("tan", np.tan, -1.2, 1.2, FLOATS + INTS + BOOL, "float"),
    Unary("asin", np.arcsin, -0.95, 0.95, FLOATS + INTS + BOOL, "float", int_range=(-1, 1)),
    Unary("acos", np.arccos, -0.95, 0.95, FLOATS + INTS + BOOL, "float", int_range=(-1, 1)),
    Unary("atan", np.arctan, -3, 3, FLOATS + INTS + BOOL, "float"),
    Unary("sinh", np.sinh, -2, 2, FLOATS + INTS + BOOL, "float"),
    Unary("cosh", np.cosh, -2, 2, FLOATS + INTS + BOOL, "float"),
    Unary("tanh", np.tanh, -3, 3, FLOATS + INTS + BOOL, "float"),
    Unary("sigmoid", lambda x: 1 / (1 + np.exp(-x)), -4, 4, FLOATS + INTS + BOOL, "float"),
    Unary("silu", lambda x: x / (1 + np.exp(-x)), -4, 4, FLOATS, "same"),
    Unary("relu", lambda x: np.where(x > 0, x, 0).astype(np.asarray(x).dtype), -3, 3, FLOATS + INTS, "same", True),
    Unary("sqrt", np.sqrt, 0.1, 4, FLOATS + INTS + BOOL, "float"),
    Unary("rsqrt", lambda x: 1 / np.sqrt(x), 0.1, 4, FLOATS + INTS, "float"),
    Unary("reciprocal", lambda x: 1 / x, 0.2, 3, FLOATS + INTS, "float", signed=True),
    Unary("erf", _vectorized(math.erf), -2, 2, FLOATS + INTS + BOOL, "float"),
    Unary("erfc", _vectorized(math.erfc), -2, 2, FLOATS + INTS + BOOL, "float"),
    Unary("lgamma", _vectorized(math.lgamma), 0.1, 5, FLOATS + INTS, "float"),
    Unary("floor", np.floor, -3, 3, FLOATS + INTS, "same", exact=True),
    Unary("ceil", np.ceil, -3, 3, FLOATS + INTS, "same", exact=True),
    Unary("round", np.rint, -3, 3, FLOATS + INTS, "same", exact=True),
    Unary("trunc", np.trunc, -3, 3, FLOATS + INTS, "same", exact=True),
    Unary("sign", np.sign, -3, 3, FLOATS + INTS, "same", exact=True),
    Unary("logical_not", lambda x: x == 0, -2, 2, MAIN_DTYPES, "bool", exact=True),
    Unary("bitwise_not", lambda x: np.invert(x), -9, 9, INTS + BOOL, "same", exact=True),
]

CASES = [pytest.param(op, dt, id=f"{op.name}-{dt.name}") for op in UNARY for dt in op.dtypes]


def expected_dtype(result: str, dtype: DataType) -> DataType:
    if result == "bool":
        return DataType.Bool
    if result == "float" and dtype != DataType.Double:
        return DataType.Float
    if result == "compute" and dtype.is_reduced_float:
        return DataType.Float
    return dtype


def unary_input(op: Unary, dtype: DataType, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    low, high = op.int_range if (op.int_range and dtype.is_integral) else (op.low, op.high)
    x = random_array(rng, (3, 5), dtype, low, high)
    if op.signed:
        x = (x * rng.choice(np.array([-1, 1], dtype=x.dtype), size=x.shape)).astype(x.dtype)
    if op.name == "logical_not":  # some zeros (false) among the values
        x.reshape(-1)[::4] = 0
    return x


@pytest.mark.parametrize(("op", "dtype"), CASES)
def test_unary_op_matches_numpy(op: Unary, dtype: DataType) -> None:
    x = unary_input(op, dtype, seed=len(op.name) * 31 + list(DataType).index(dtype))
    out, _ = run_one(lambda fd, t: getattr(fd.ops, op.name)(t), x)

    want_dtype = expected_dtype(op.result, dtype)
    assert output_dtype(out) == want_dtype
    if dtype.is_integral or dtype.is_boolean:
        expected = op.ref(x) if op.result in ("same", "bool") else op.ref(x.astype(np.float64))
    else:
        expected = op.ref(as_float64(x))
    if op.exact:
        np.testing.assert_array_equal(as_float64(out), as_float64(expected))
    else:
        assert_close(out, expected, want_dtype)


def test_round_is_half_to_even() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997], dtype=np.float32)
    out, fd = run_one(lambda fd, t: fd.ops.round(t), x)
    np.testing.assert_array_equal(out, [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0, 0.0])
    assert "nearbyintf(" in fd.fusion_ir()


def test_sign_of_zero_and_negative_integers() -> None:
    x = np.array([[-7, 0, 5], [0, -1, 1]], dtype=np.int32)
    out, _ = run_one(lambda fd, t: fd.ops.sign(t), x)
    np.testing.assert_array_equal(out, [[-1, 0, 1], [0, -1, 1]])
    assert out.dtype == np.int32


def test_lgamma_poles_are_infinite() -> None:
    """lgamma has poles at 0, -1, -2, ...: C's lgamma returns +inf there."""
    x = np.array([0.0, -1.0, -2.0, 1.0, 2.0, 0.5], dtype=np.float64)
    out, _ = run_one(lambda fd, t: fd.ops.lgamma(t), x)
    np.testing.assert_array_equal(out[:3], [np.inf, np.inf, np.inf])
    np.testing.assert_allclose(out[3:], [0.0, 0.0, math.log(math.sqrt(math.pi))], rtol=1e-12, atol=1e-15)


def test_lgamma_of_non_positive_integers_is_infinite() -> None:
    x = np.array([[0, -3, 4]], dtype=np.int64)
    out, _ = run_one(lambda fd, t: fd.ops.lgamma(t), x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[np.inf, np.inf, math.log(6.0)]], rtol=1e-6)


FLOAT_CLASSIFIERS = {
    "isnan": np.isnan,
    "isinf": np.isinf,
    "isfinite": np.isfinite,
}


@pytest.mark.parametrize("name", sorted(FLOAT_CLASSIFIERS))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_classifiers_on_floats_with_nan_and_inf(name: str, dtype: DataType) -> None:
    rng = np.random.default_rng(7)
    x = random_array(rng, (4, 6), dtype).astype(np.float64)
    x.ravel()[[1, 5, 9]] = [np.nan, np.inf, -np.inf]
    x.ravel()[13] = np.nan
    x = x.astype(dtype.numpy)
    out, _ = run_one(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, FLOAT_CLASSIFIERS[name](as_float64(x)))


@pytest.mark.parametrize("name", sorted(FLOAT_CLASSIFIERS))
@pytest.mark.parametrize("dtype", (*INTS, DataType.Bool), ids=lambda d: d.name)
def test_classifiers_on_integers_and_bools(name: str, dtype: DataType) -> None:
    x = random_array(np.random.default_rng(3), (3, 4), dtype)
    out, _ = run_one(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, np.full(x.shape, name == "isfinite"))


@pytest.mark.parametrize("name", ["neg", "exp", "sqrt", "log", "sin", "tanh"])
def test_unary_on_complex_float(name: str) -> None:
    x = random_array(np.random.default_rng(11), (3, 4), DataType.ComplexFloat, -1.5, 1.5)
    out, _ = run_one(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert out.dtype == np.complex64
    ref = {"neg": np.negative, "exp": np.exp, "sqrt": np.sqrt, "log": np.log, "sin": np.sin, "tanh": np.tanh}[name]
    assert_close(out, ref(x.astype(np.complex128)), DataType.ComplexFloat)


def test_abs_of_complex_is_real() -> None:
    """nvFuser's abs of ComplexFloat is a Float tensor: the magnitude."""
    x = random_array(np.random.default_rng(12), (3, 4), DataType.ComplexFloat)
    out, fd = run_one(lambda fd, t: fd.ops.abs(t), x)
    assert out.dtype == np.float32
    assert_close(out, np.abs(x.astype(np.complex128)), DataType.Float)
    assert "], float\n" in fd.fusion_ir().split("Outputs:")[1].split("%kernel_math")[0]


def test_negating_bools_is_rejected_at_definition() -> None:
    """PyTorch rejects `-` on bool tensors; so does the frontend, when it is defined."""
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Bool)
        -t  # noqa: B018 - the operator is what is tested
    assert info.value.op == "neg"
    assert info.value.tensor == "T0"
    assert "Bool" in str(info.value)
    assert "logical_not" in str(info.value)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_bitwise_not_rejects_floats(dtype: DataType) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        fd.ops.bitwise_not(t)
    assert info.value.op == "bitwise_not"
    assert repr(dtype) in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("exp", 1.0, math.e),
        ("sqrt", 2.25, 1.5),
        ("neg", 3, -3),
        ("abs", -4.5, 4.5),
        ("log", 1.0, 0.0),
        ("isfinite", 2.0, True),
    ],
)
def test_unary_on_scalar_inputs(name: str, value: float, expected: float) -> None:
    out, fd = run_one(lambda fd, s: getattr(fd.ops, name)(s), value)
    assert out == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert type(out) is type(expected)
    assert "T" not in fd.fusion_ir().split("%kernel_math")[1]  # scalar math only


def test_unary_of_constant_folds() -> None:
    with FusionDefinition() as fd:
        s = fd.ops.exp(fd.define_scalar(2.0))
        fd.add_output(s)
    assert s.val.is_const
    assert s.val.value == pytest.approx(math.exp(2.0), rel=1e-15)
    assert fd.execute([]) == [pytest.approx(math.exp(2.0), rel=1e-15)]
    assert "%kernel_math {\n}" in fd.fusion_ir()
