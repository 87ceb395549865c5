"""cast between every pair of the main dtypes, against NumPy / ml_dtypes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition

from ._helpers import BF16, MAIN_DTYPES, as_float64, random_array, run_one

PAIRS = [pytest.param(src, dst, id=f"{src.name}-to-{dst.name}") for src in MAIN_DTYPES for dst in MAIN_DTYPES]


def cast_input(dtype: DataType, seed: int) -> np.ndarray:
    x = random_array(np.random.default_rng(seed), (4, 6), dtype, -100, 100)
    if dtype.is_floating:  # some exact integers, halves and zeros among the fractions
        flat = x.reshape(-1)
        flat[:4] = np.array([0.0, -0.0, 2.5, -3.0]).astype(dtype.numpy)
    return x


def expected_cast(x: np.ndarray, dst: DataType) -> np.ndarray:
    if dst.is_boolean:
        return as_float64(x) != 0
    if dst.is_integral:  # C conversion: truncate toward zero
        return np.trunc(as_float64(x)).astype(dst.numpy)
    return as_float64(x).astype(dst.numpy)  # float64 holds every source value exactly


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_cast_pair(src: DataType, dst: DataType) -> None:
    x = cast_input(src, seed=list(DataType).index(src))
    out, fd = run_one(lambda fd, t: fd.ops.cast(t, dst), x)
    assert out.dtype == dst.numpy
    np.testing.assert_array_equal(as_float64(out), as_float64(expected_cast(x, dst)))
    ir = fd.fusion_ir()
    if src == dst:
        assert "Set(" in ir  # a cast to the same type is a copy
    elif dst == DataType.BFloat16:
        assert "2bfloat(" in ir
    elif src == DataType.Half:
        assert "__half2" in ir


def test_float_to_bfloat16_rounds_to_nearest_even() -> None:
    """Ties (low 16 bits exactly 0x8000) go to the even bf16; everything else to
    the nearest: bit for bit what ml_dtypes (and __float2bfloat16_rn) produce."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=4000, dtype=np.uint64).astype(np.uint32)
    bits[:1000] = (bits[:1000] & 0xFFFF0000) | 0x8000  # exact ties
    bits[1000:1500] = (bits[1000:1500] & 0xFFFF0000) | 0x7FFF  # just below a tie
    bits[1500:2000] = (bits[1500:2000] & 0xFFFF0000) | 0x8001  # just above a tie
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    wide = x.view(np.uint32).astype(np.uint64)
    rne = ((wide + 0x7FFF + ((wide >> 16) & 1)) >> 16).astype(np.uint16)
    # The ties really split both ways.
    ties = (wide & 0xFFFF) == 0x8000
    assert ((rne[ties] & 1) == 0).all() and len(set((wide[ties] >> 16) & 1)) == 2

    out, _ = run_one(lambda fd, t: fd.ops.cast(t, DataType.BFloat16), x)
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.view(np.uint16), rne)
    np.testing.assert_array_equal(out.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_float_to_half_rounds_to_nearest_even() -> None:
    # 1 + 2**-11 lies halfway between two halves: it rounds to the even one, 1.0.
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 65504.0, 1e-8], dtype=np.float32)
    out, _ = run_one(lambda fd, t: fd.ops.cast(t, DataType.Half), x)
    np.testing.assert_array_equal(out, [1.0, 1 + 2**-9, -1.0, 65504.0, 0.0])


def test_float_to_int_truncates_toward_zero() -> None:
    x = np.array([2.9, -2.9, 0.5, -0.5, 7.0], dtype=np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.add_output(fd.ops.cast(t, DataType.Int))
        fd.add_output(fd.ops.cast(t, DataType.Int32))
    as_int, as_int32 = fd.execute([x])
    np.testing.assert_array_equal(as_int, [2, -2, 0, 0, 7])
    np.testing.assert_array_equal(as_int32, [2, -2, 0, 0, 7])
    assert (as_int.dtype, as_int32.dtype) == (np.int64, np.int32)


@pytest.mark.parametrize("src", MAIN_DTYPES, ids=lambda d: d.name)
def test_cast_to_complex_float(src: DataType) -> None:
    x = cast_input(src, seed=3)
    out, _ = run_one(lambda fd, t: fd.ops.cast(t, DataType.ComplexFloat), x)
    assert out.dtype == np.complex64
    np.testing.assert_array_equal(out.real, as_float64(x).astype(np.float32))
    np.testing.assert_array_equal(out.imag, np.zeros(x.shape, np.float32))


def test_cast_of_a_scalar_input() -> None:
    with FusionDefinition() as fd:
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.cast(s, DataType.Int))
        fd.add_output(fd.ops.cast(s, DataType.Float))
    as_int, as_float = fd.execute([3.0])
    assert as_int == 3 and isinstance(as_int, int)
    assert as_float == 3.0 and isinstance(as_float, float)


@pytest.mark.parametrize(("value", "expected"), [(3.7, 3), (-3.7, -3), (0.2, 0), (5.0, 5)])
def test_cast_of_a_fractional_scalar_input_truncates(value: float, expected: int) -> None:
    """C conversion of a Double scalar to an integer type, as the kernels do it."""
    with FusionDefinition() as fd:
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.cast(s, DataType.Int))
        fd.add_output(fd.ops.cast(s, DataType.Int32))
        fd.add_output(fd.ops.cast(s, DataType.Bool))
    as_int, as_int32, as_bool = fd.execute([value])
    assert as_int == as_int32 == expected
    assert as_bool is True


def test_cast_of_a_constant_folds_with_c_conversion() -> None:
    with FusionDefinition() as fd:
        truncated = fd.ops.cast(-2.75, DataType.Int)
        widened = fd.ops.cast(3, DataType.Double)
        fd.add_output(truncated)
        fd.add_output(widened)
    assert truncated.val.is_const and widened.val.is_const
    assert fd.execute([]) == [-2, 3.0]
