"""fp8 stores saturate as nvFuser's kernels convert (runtime/fp8_support.cu: cvt.rn.satfinite):
a finite value past the largest one, or an infinity, becomes +-448 (e4m3) or
+-57344 (e5m2); NaN stays NaN. Double converts through half first, as __double2e4m3 does."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition

from ._helpers import run_one

E4M3, E5M2 = DataType.Float8_e4m3fn, DataType.Float8_e5m2
LARGEST = {E4M3: 448.0, E5M2: 57344.0}


def as_f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


@pytest.mark.parametrize("dst", [E4M3, E5M2], ids=str)
@pytest.mark.parametrize("src", [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16], ids=str)
def test_cast_to_fp8_saturates(src: DataType, dst: DataType) -> None:
    top = LARGEST[dst]
    big = 60000.0 if src == DataType.Half else 1e6  # half's largest is 65504; both fp8 tops are below
    x = np.array([big, -big, np.inf, -np.inf, np.nan, 1.5, -0.0], np.float64).astype(src.numpy)
    out, _ = run_one(lambda fd, t: fd.ops.cast(t, dst), x)
    assert out.dtype == dst.numpy
    got = as_f32(out)
    np.testing.assert_array_equal(got[:2], [top, -top])
    np.testing.assert_array_equal(got[2:4], [top, -top])
    assert np.isnan(got[4])
    np.testing.assert_array_equal(got[5:], [1.5, -0.0])


def test_values_in_range_round_to_nearest_even() -> None:
    x = np.array([0.1, 3.3, 447.0, 449.0, 464.0, 500.0, -470.0], np.float32)
    out, _ = run_one(lambda fd, t: fd.ops.cast(t, E4M3), x)
    expected = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(as_f32(out), as_f32(expected))
    np.testing.assert_array_equal(as_f32(out)[2:], [448.0, 448.0, 448.0, 448.0, -448.0])


def test_double_converts_through_half_as_double2e4m3_does() -> None:
    """1.0625 is the tie between e4m3's 1.0 and 1.125. Just above it, a float rounds
    up; a double first rounds to half (exactly 1.0625), then the tie goes to even."""
    value = 1.0625 + 2.0**-20
    as_float, _ = run_one(lambda fd, t: fd.ops.cast(t, E4M3), np.array([value], np.float32))
    as_double, _ = run_one(lambda fd, t: fd.ops.cast(t, E4M3), np.array([value], np.float64))
    assert as_f32(as_float)[0] == 1.125
    assert as_f32(as_double)[0] == 1.0


def test_fp8_result_of_arithmetic_saturates() -> None:
    x = np.array([300.0, -300.0, 2.0], np.float32).astype(ml_dtypes.float8_e4m3fn)

    def build(fd: FusionDefinition, t):  # type: ignore[no-untyped-def]
        return fd.ops.cast(fd.ops.mul(t, 2.0), E4M3)

    out, _ = run_one(build, x)
    np.testing.assert_array_equal(as_f32(out), [448.0, -448.0, 4.0])


def test_sum_into_fp8_saturates() -> None:
    x = np.full((4, 3), 240.0, np.float32).astype(ml_dtypes.float8_e4m3fn)
    out, _ = run_one(lambda fd, t: fd.ops.sum(t, [0]), x)
    assert out.dtype == E4M3.numpy
    np.testing.assert_array_equal(as_f32(out), [448.0, 448.0, 448.0])


def test_full_with_a_large_fill_saturates() -> None:
    with FusionDefinition() as fd:
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.full([2], 1000.0, E4M3))
        fd.add_output(fd.ops.full([2], s, E5M2))
        fd.add_output(fd.ops.full([2], -1e9, E5M2))
    constant, symbolic, negative = fd.execute([1e6])
    np.testing.assert_array_equal(as_f32(constant), [448.0, 448.0])
    np.testing.assert_array_equal(as_f32(symbolic), [57344.0, 57344.0])
    np.testing.assert_array_equal(as_f32(negative), [-57344.0, -57344.0])


def test_fp8_to_wider_types_is_exact() -> None:
    x = np.array([448.0, -0.25, 0.001953125], np.float32).astype(ml_dtypes.float8_e4m3fn)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=E4M3)
        for dst in (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16):
            fd.add_output(fd.ops.cast(t, dst))
    for out in fd.execute([x]):
        np.testing.assert_array_equal(as_f32(out), as_f32(x))
