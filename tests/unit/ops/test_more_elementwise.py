"""The element-wise ops that were refused before: erfinv, erfcinv, frac, signbit, the
inf/real predicates, real/imag, nextafter, gcd, the shifts, add_alpha, sub_alpha,
addcmul and the inverse hyperbolics, against NumPy or a formula, in every dtype each
accepts, with odd sizes and empty tensors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import FLOATS, INTS, as_float64, assert_close, random_array, run_fusion, run_one

ODD = (3, 7)
ALL_REAL = (*FLOATS, *INTS, DataType.Bool)


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(abs(hash(tuple(str(k) for k in key))) % 2**32)


def _compute_dtype(dtype: DataType) -> DataType:
    return DataType.Double if dtype == DataType.Double else DataType.Float


# -- erfinv / erfcinv ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_erfinv_inverts_erf(dtype: DataType) -> None:
    x = random_array(_rng("erfinv", dtype), ODD, dtype, -0.999, 0.999)
    out, fd = run_one(lambda fd, t: fd.ops.erfinv(t), x)
    assert out.dtype == _compute_dtype(dtype).numpy
    erf_of_out = np.vectorize(math.erf)(out.astype(np.float64))
    tol = 1e-14 if dtype == DataType.Double else 2e-7
    np.testing.assert_allclose(erf_of_out, as_float64(x), rtol=0, atol=tol)
    suffix = "" if dtype == DataType.Double else "f"
    assert f"erfinv{suffix}(" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_erfcinv_inverts_erfc(dtype: DataType) -> None:
    x = random_array(_rng("erfcinv", dtype), ODD, dtype, 0.001, 1.999)
    out, fd = run_one(lambda fd, t: fd.ops.erfcinv(t), x)
    erfc_of_out = np.vectorize(math.erfc)(out.astype(np.float64))
    rtol = 1e-13 if dtype == DataType.Double else 1e-6
    np.testing.assert_allclose(erfc_of_out, as_float64(x), rtol=rtol, atol=0)
    assert "erfcinv" in fd.fusion_ir()


def test_erfinv_known_values_and_edges() -> None:
    x = np.array([0.5, -0.5, 0.0, 1.0, -1.0, 1.5, 1e-300, 0.999999999999], dtype=np.float64)
    out, _ = run_one(lambda fd, t: fd.ops.erfinv(t), x)
    np.testing.assert_allclose(out[:2], [0.4769362762044699, -0.4769362762044699], rtol=1e-15)
    assert out[2] == 0.0 and out[3] == np.inf and out[4] == -np.inf and np.isnan(out[5])
    np.testing.assert_allclose(out[6], 1e-300 * math.sqrt(math.pi) / 2, rtol=1e-15)
    assert math.erf(out[7]) == pytest.approx(0.999999999999, abs=1e-16)


def test_erfcinv_tiny_and_edges() -> None:
    y = np.array([1e-10, 1e-300, 0.0, 2.0, 1.0, -0.5, 2.5], dtype=np.float64)
    out, _ = run_one(lambda fd, t: fd.ops.erfcinv(t), y)
    assert math.erfc(out[0]) == pytest.approx(1e-10, rel=1e-14)
    # erfc falls steeply out there: one ulp of z (26.2) moves erfc by ~2e-13 relative.
    assert math.erfc(out[1]) == pytest.approx(1e-300, rel=1e-12)
    assert math.erfc(np.nextafter(out[1], 0)) > 1e-300 > math.erfc(np.nextafter(out[1], 30))
    assert out[2] == np.inf and out[3] == -np.inf and out[4] == 0.0
    assert np.isnan(out[5]) and np.isnan(out[6])


@pytest.mark.parametrize("dtype", (*INTS, DataType.Bool), ids=lambda d: d.name)
def test_erfinv_of_integers_computes_in_float(dtype: DataType) -> None:
    x = np.array([0, 1, 1, 0, 1], dtype=dtype.numpy)
    if dtype.is_integral:
        x = np.array([0, 1, -1, 2, 0], dtype=dtype.numpy)
    out, _ = run_one(lambda fd, t: fd.ops.erfinv(t), x)
    assert out.dtype == np.float32
    expected = {0: 0.0, 1: np.inf, -1: -np.inf, 2: np.nan}
    np.testing.assert_array_equal(out, [expected[int(v)] for v in x])


# -- frac, signbit, predicates ------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_frac_is_x_minus_trunc(dtype: DataType) -> None:
    x = random_array(_rng("frac", dtype), ODD, dtype, -9, 9)
    out, fd = run_one(lambda fd, t: fd.ops.frac(t), x)
    assert out.dtype == x.dtype
    x64 = as_float64(x)
    assert_close(out, x64 - np.trunc(x64), dtype)
    assert "= frac(" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", (*INTS, DataType.Bool), ids=lambda d: d.name)
def test_frac_refuses_integers(dtype: DataType) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        fd.ops.frac(fd.define_tensor([-1], dtype=dtype))
    assert info.value.op == "frac" and info.value.tensor == "T0"
    assert "floating-point" in str(info.value)


@pytest.mark.parametrize("dtype", ALL_REAL, ids=lambda d: d.name)
def test_signbit(dtype: DataType) -> None:
    x = random_array(_rng("signbit", dtype), ODD, dtype)
    if dtype.is_floating:
        x.reshape(-1)[:2] = [-0.0, 0.0]
    out, fd = run_one(lambda fd, t: fd.ops.signbit(t), x)
    assert out.dtype == np.bool_
    expected = np.signbit(as_float64(x)) if dtype.is_floating else (x.astype(np.int64) < 0)
    np.testing.assert_array_equal(out, expected)
    if dtype.is_floating:
        assert out.reshape(-1)[0] and not out.reshape(-1)[1]  # -0.0 has its sign bit set
    assert "signbit(" in fd.fusion_ir()


PREDICATES = {
    "isneginf": lambda x: np.isinf(x) & (x < 0),
    "isposinf": lambda x: np.isinf(x) & (x > 0),
    "isreal": lambda x: np.ones(x.shape, bool),
}


@pytest.mark.parametrize("name", sorted(PREDICATES))
@pytest.mark.parametrize("dtype", ALL_REAL, ids=lambda d: d.name)
def test_inf_and_real_predicates(name: str, dtype: DataType) -> None:
    x = random_array(_rng(name, dtype), ODD, dtype)
    if dtype.is_floating:
        x = x.astype(np.float64)
        x.reshape(-1)[[1, 4, 9]] = [np.inf, -np.inf, np.nan]
        x = x.astype(dtype.numpy)
    out, fd = run_one(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, PREDICATES[name](as_float64(x)))
    assert f"{name}(" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", (DataType.ComplexFloat, DataType.ComplexDouble), ids=lambda d: d.name)
def test_isreal_real_and_imag_of_complex(dtype: DataType) -> None:
    x = random_array(_rng("complex", dtype), ODD, dtype)
    x.reshape(-1)[::3] = x.reshape(-1)[::3].real  # some purely real values
    outs, fd = run_fusion(lambda fd, t: [fd.ops.isreal(t), fd.ops.real(t), fd.ops.imag(t)], [x])
    np.testing.assert_array_equal(outs[0], x.imag == 0)
    real_np = np.float32 if dtype == DataType.ComplexFloat else np.float64
    assert outs[1].dtype == real_np and outs[2].dtype == real_np
    np.testing.assert_array_equal(outs[1], x.real)
    np.testing.assert_array_equal(outs[2], x.imag)
    text = fd.fusion_ir()
    assert "std::real(" in text and "std::imag(" in text


def test_real_of_a_real_tensor_is_a_copy_and_imag_is_refused() -> None:
    x = random_array(_rng("real"), ODD, DataType.Float)
    out, fd = run_one(lambda fd, t: fd.ops.real(t), x)
    np.testing.assert_array_equal(out, x)
    assert "Set( T0_g" in fd.fusion_ir()
    with pytest.raises(FuserError) as info, FusionDefinition() as fd2:
        fd2.ops.imag(fd2.define_tensor([-1]))
    assert info.value.op == "imag" and "complex" in str(info.value)


@pytest.mark.parametrize("name", ["isposinf", "isneginf", "signbit", "erfinv", "frac"])
def test_real_only_ops_refuse_complex(name: str) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        getattr(fd.ops, name)(fd.define_tensor([-1], dtype=DataType.ComplexFloat))
    assert "complex" in str(info.value)


# -- binary ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_nextafter(dtype: DataType) -> None:
    rng = _rng("nextafter", dtype)
    a, b = random_array(rng, ODD, dtype), random_array(rng, ODD, dtype)
    b.reshape(-1)[0] = a.reshape(-1)[0]
    out, fd = run_one(lambda fd, x, y: fd.ops.nextafter(x, y), a, b)
    compute = _compute_dtype(dtype).numpy
    assert out.dtype == compute
    np.testing.assert_array_equal(out, np.nextafter(a.astype(compute), b.astype(compute)))
    assert "nextafter(" in fd.fusion_ir() and "nextafterf" not in fd.fusion_ir()


@pytest.mark.parametrize("dtype", (*INTS, DataType.Bool), ids=lambda d: d.name)
def test_nextafter_refuses_non_floats(dtype: DataType) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1], dtype=dtype)
        fd.ops.nextafter(t, t)
    assert info.value.op == "nextafter" and "Float or Double" in str(info.value)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_gcd(dtype: DataType) -> None:
    rng = _rng("gcd", dtype)
    a = random_array(rng, ODD, dtype, -60, 60)
    b = random_array(rng, ODD, dtype, -60, 60)
    a.reshape(-1)[:2], b.reshape(-1)[:2] = 0, [0, -12]
    out, fd = run_one(lambda fd, x, y: fd.ops.gcd(x, y), a, b)
    expected = [math.gcd(int(p), int(q)) for p, q in zip(a.reshape(-1), b.reshape(-1), strict=True)]
    np.testing.assert_array_equal(out.reshape(-1), expected)
    assert out.dtype == a.dtype
    assert "gcd(" in fd.fusion_ir()


@pytest.mark.parametrize("name", ["gcd", "bitwise_left_shift", "bitwise_right_shift", "logical_right_shift"])
@pytest.mark.parametrize("dtype", (DataType.Float, DataType.Bool), ids=lambda d: d.name)
def test_integer_only_ops_refuse_others(name: str, dtype: DataType) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1], dtype=dtype)
        getattr(fd.ops, name)(t, t)
    assert "integer" in str(info.value)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.name)
def test_shifts(dtype: DataType) -> None:
    rng = _rng("shift", dtype)
    bits = 64 if dtype == DataType.Int else 32
    x = random_array(rng, ODD, dtype, -1000, 1000)
    s = rng.integers(0, bits, size=ODD).astype(dtype.numpy)
    s.reshape(-1)[:2] = [0, bits - 1]
    outs, fd = run_fusion(
        lambda fd, a, b: [a << b, a >> b, fd.ops.bitwise_left_shift(a, 3), fd.ops.logical_right_shift(a, b)],
        [x, s],
    )
    unsigned = np.uint64 if bits == 64 else np.uint32
    np.testing.assert_array_equal(outs[0], (x.view(unsigned) << s.view(unsigned)).view(x.dtype))
    np.testing.assert_array_equal(outs[1], np.floor_divide(x.astype(object), 2 ** s.astype(object)).astype(x.dtype))
    np.testing.assert_array_equal(outs[2], x * 8)
    np.testing.assert_array_equal(outs[3], (x.view(unsigned) >> s.view(unsigned)).view(x.dtype))
    text = fd.fusion_ir()
    assert " << " in text and " >> " in text


@pytest.mark.parametrize("dtype", (*FLOATS, *INTS), ids=lambda d: d.name)
def test_add_alpha_sub_alpha_addcmul(dtype: DataType) -> None:
    rng = _rng("alpha", dtype)
    a, b, c = (random_array(rng, ODD, dtype) for _ in range(3))
    alpha = 3 if dtype.is_integral else 0.75
    outs, _ = run_fusion(
        lambda fd, x, y, z: [
            fd.ops.add_alpha(x, y, alpha),
            fd.ops.sub_alpha(x, y, alpha),
            fd.ops.addcmul(x, y, z, alpha),
        ],
        [a, b, c],
    )
    x, y, z = (as_float64(v) for v in (a, b, c))
    out_dtype = _compute_dtype(dtype) if dtype.is_floating else dtype
    assert all(o.dtype == out_dtype.numpy for o in outs)
    for out, expected in zip(outs, (x + y * alpha, x - y * alpha, x + y * (z * alpha)), strict=True):
        assert_close(out, expected, DataType.Float if dtype.is_reduced_float else dtype)


def test_alpha_must_be_a_scalar() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        fd.ops.add_alpha(t, t, t)
    assert info.value.op == "add_alpha" and "alpha must be a scalar" in str(info.value)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_inverse_hyperbolics(dtype: DataType) -> None:
    rng = _rng("hyp", dtype)
    x = random_array(rng, ODD, dtype, 1.1, 3.0)
    y = random_array(rng, ODD, dtype, -0.9, 0.9)
    outs, _ = run_fusion(lambda fd, a, b: [fd.ops.acosh(a), fd.ops.asinh(b), fd.ops.atanh(b)], [x, y])
    tol_dtype = _compute_dtype(dtype)
    assert_close(outs[0], np.arccosh(as_float64(x)), tol_dtype)
    assert_close(outs[1], np.arcsinh(as_float64(y)), tol_dtype)
    assert_close(outs[2], np.arctanh(as_float64(y)), tol_dtype)


@pytest.mark.parametrize(
    "name", ["erfinv", "erfcinv", "frac", "signbit", "isneginf", "isposinf", "isreal", "acosh", "real"]
)
def test_unary_on_empty_tensors(name: str) -> None:
    x = np.zeros((0, 5), dtype=np.float32)
    out, _ = run_one(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert out.shape == (0, 5)


@pytest.mark.parametrize("name", ["nextafter", "gcd", "bitwise_left_shift", "logical_right_shift", "add_alpha"])
def test_binary_on_empty_tensors(name: str) -> None:
    dtype = np.float32 if name == "nextafter" else np.int64
    x = np.zeros((4, 0), dtype=dtype)
    if name == "add_alpha":
        out, _ = run_one(lambda fd, a, b: fd.ops.add_alpha(a, b, 2), x, x)
    else:
        out, _ = run_one(lambda fd, a, b: getattr(fd.ops, name)(a, b), x, x)
    assert out.shape == (4, 0)


def test_scalar_operands_fold() -> None:
    with FusionDefinition() as fd:
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.gcd(s, 18))
        fd.add_output(fd.ops.nextafter(fd.define_scalar(1.0), 2.0))
    out = fd.execute([12])
    assert out[0] == 6
    assert out[1] == np.nextafter(1.0, 2.0)
