"""Shared helpers of the op tests: random inputs, one-op fusions, dtype tolerances.

Every fusion here is defined through the nvFuser-compatible frontend and executed
on the NumPy reference backend; expected values are computed independently with
NumPy in float64 (or exactly, for integers and bools).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.dtype import dtype_from_numpy

FLOATS = (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16)
INTS = (DataType.Int, DataType.Int32)
MAIN_DTYPES = (*FLOATS, *INTS, DataType.Bool)

# (rtol, atol) per output dtype; integers and bools compare exactly.
TOLERANCES: dict[DataType, tuple[float, float]] = {
    DataType.Double: (1e-12, 1e-12),
    DataType.Float: (1e-5, 1e-6),
    DataType.Half: (1e-3, 1e-3),
    DataType.BFloat16: (1e-2, 1e-2),
    DataType.ComplexFloat: (1e-5, 1e-6),
    DataType.ComplexDouble: (1e-12, 1e-12),
}

BF16 = np.dtype(ml_dtypes.bfloat16)


def dtype_id(dtype: DataType) -> str:
    return dtype.name


def random_array(
    rng: np.random.Generator,
    shape: Sequence[int],
    dtype: DataType,
    low: float = -3.0,
    high: float = 3.0,
) -> np.ndarray:
    """Random values of `dtype` in [low, high): never all zeros, never constant."""
    shape = tuple(shape)
    if dtype.is_boolean:
        values = rng.random(shape) < 0.5
        flat = values.reshape(-1)
        if flat.size >= 2:  # both values present, whatever the seed
            flat[0], flat[1] = True, False
        return values
    if dtype.is_integral:  # the integers inside [low, high]
        lo, hi = int(np.ceil(low)), int(np.floor(high))
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype.numpy)
    if dtype.is_complex:
        real = rng.uniform(low, high, shape)
        imag = rng.uniform(low, high, shape)
        return (real + 1j * imag).astype(dtype.numpy)
    return rng.uniform(low, high, shape).astype(dtype.numpy)


def as_float64(array: Any) -> np.ndarray:
    """Exact float64 (or complex128) values of an array of any dtype, bf16 included."""
    arr = np.asarray(array)
    if arr.dtype.kind == "c":
        return arr.astype(np.complex128)
    return arr.astype(np.float32).astype(np.float64) if arr.dtype == BF16 else arr.astype(np.float64)


def define_input(fd: FusionDefinition, value: Any, *, static: bool = False) -> Any:
    """A fusion input for `value`: a tensor of its dtype and rank (symbolic sizes
    unless `static`; size-1 axes are broadcasts), or a scalar input."""
    if isinstance(value, np.ndarray):
        dtype = _dtype_of(value.dtype)
        shape = [s if (static or s == 1) else -1 for s in value.shape]
        contiguity = [None if s == 1 else True for s in value.shape]
        return fd.define_tensor(shape=shape, contiguity=contiguity, dtype=dtype)
    return fd.define_scalar(None, dtype=scalar_dtype(value))


def scalar_dtype(value: Any) -> DataType:
    if isinstance(value, (bool, np.bool_)):
        return DataType.Bool
    if isinstance(value, (int, np.integer)):
        return DataType.Int
    if isinstance(value, complex):
        return DataType.ComplexDouble
    return DataType.Double


def _dtype_of(np_dtype: np.dtype) -> DataType:
    found = dtype_from_numpy(np_dtype)
    assert found is not None, f"no DataType for {np_dtype}"
    return found


def run_fusion(
    build: Callable[..., Any],
    inputs: Sequence[Any],
    *,
    static: bool = False,
) -> tuple[list[Any], FusionDefinition]:
    """Define a fusion whose inputs match `inputs`, whose outputs are what
    `build(fd, *input_handles)` returns (one value or a list), and execute it."""
    with FusionDefinition() as fd:
        handles = [define_input(fd, v, static=static) for v in inputs]
        outs = build(fd, *handles)
        for out in outs if isinstance(outs, (list, tuple)) else [outs]:
            fd.add_output(out)
    return fd.execute(list(inputs)), fd


def run_one(build: Callable[..., Any], *inputs: Any, static: bool = False) -> tuple[Any, FusionDefinition]:
    """Like run_fusion for a fusion with exactly one output."""
    outs, fd = run_fusion(build, inputs, static=static)
    assert len(outs) == 1
    return outs[0], fd


def output_dtype(array: np.ndarray) -> DataType:
    return _dtype_of(array.dtype)


def assert_close(actual: Any, expected: Any, dtype: DataType | None = None) -> None:
    """Values equal within the tolerance of `dtype` (the actual array's dtype by
    default); integers and bools exactly. Shapes must match; NaNs and infinities
    must sit at the same places."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    dtype = dtype if dtype is not None else output_dtype(actual)
    assert actual.shape == expected.shape, f"shape {actual.shape} != expected {expected.shape}"
    if dtype.is_integral or dtype.is_boolean:
        np.testing.assert_array_equal(actual, expected)
        return
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(as_float64(actual), as_float64(expected), rtol=rtol, atol=atol, equal_nan=True)


def rounded(expected: Any, dtype: DataType) -> np.ndarray:
    """`expected` (float64) rounded to how `dtype` stores it, then back to float64."""
    return as_float64(np.asarray(expected).astype(dtype.numpy))
