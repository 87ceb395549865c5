"""Factories against NumPy: iota and full, with static and symbolic sizes."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import MAIN_DTYPES, as_float64, assert_close, random_array


def run_factory(build, inputs=()):  # type: ignore[no-untyped-def]
    with FusionDefinition() as fd:
        handles = [fd.define_scalar(None, dtype=DataType.Int) for _ in inputs]
        fd.add_output(build(fd, *handles))
    (out,) = fd.execute(list(inputs))
    return out, fd


@pytest.mark.parametrize(
    ("length", "start", "step", "dtype"),
    [
        (5, None, None, DataType.Int),
        (6, 2, 3, DataType.Int),
        (4, -3, -2, DataType.Int32),
        (5, 2.0, 3.0, DataType.Float),
        (5, 1.5, 0.25, DataType.Double),
        (4, -1.0, 0.5, DataType.Half),
        (4, 0.5, 2.0, DataType.BFloat16),
        (1, 7, 1, DataType.Int),
    ],
    ids=str,
)
def test_iota(length: int, start: float | None, step: float | None, dtype: DataType) -> None:
    out, _ = run_factory(lambda fd: fd.ops.iota(length, start, step, dtype))
    first = 0 if start is None else start
    stride = 1 if step is None else step
    expected = first + stride * np.arange(length, dtype=np.float64)
    assert out.dtype == dtype.numpy
    assert out.shape == (length,)
    np.testing.assert_array_equal(as_float64(out), expected)


def test_iota_defaults_to_int() -> None:
    out, fd = run_factory(lambda fd: fd.ops.iota(4))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [0, 1, 2, 3])
    assert "iota(4, 0, 1, int64_t);" in fd.fusion_ir()


def test_iota_with_symbolic_length() -> None:
    with FusionDefinition() as fd:
        n = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.iota(n, 10, -3, DataType.Int))
    for length in (1, 3, 6):
        (out,) = fd.execute([length])
        np.testing.assert_array_equal(out, 10 - 3 * np.arange(length))


def test_iota_with_length_from_a_tensor_size() -> None:
    x = random_array(np.random.default_rng(0), (3, 5), DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        ramp = fd.ops.iota(t.size(1), 0.0, 1.0, DataType.Float)
        fd.add_output(t + ramp)
    (out,) = fd.execute([x])
    assert_close(out, as_float64(x) + np.arange(5))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2.5,), "length must be an integer"),
        ((4, 0, 0), "step must not be zero"),
        ((4, 0, 1, DataType.Bool), "integral or floating"),
        ((4, 1.5, 1, DataType.Int), "1.5"),
    ],
    ids=["float-length", "zero-step", "bool-dtype", "fractional-int-start"],
)
def test_iota_rejects_bad_arguments(args: tuple, message: str) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        fd.ops.iota(*args)
    assert info.value.op == "iota"
    assert message in str(info.value)


@pytest.mark.parametrize("dtype", [*MAIN_DTYPES, DataType.ComplexFloat], ids=lambda d: d.name)
def test_full_static(dtype: DataType) -> None:
    fill = {"bool": True, "int": -7, "float": 1.5, "complex": 1.5 - 2j}[dtype.value.kind]
    out, fd = run_factory(lambda fd: fd.ops.full([2, 3], fill, dtype))
    assert out.dtype == dtype.numpy
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(out, np.full((2, 3), fill, dtype=dtype.numpy))
    assert "full({2, 3}," in fd.fusion_ir()


def test_full_with_a_size_one_axis_and_zero_size() -> None:
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.full([1, 4], 0.5, DataType.Float))
        fd.add_output(fd.ops.full([0, 4], 0.5, DataType.Float))
    ones_row, empty = fd.execute([])
    np.testing.assert_array_equal(ones_row, np.full((1, 4), 0.5, np.float32))
    assert empty.shape == (0, 4)


def test_full_with_symbolic_sizes() -> None:
    with FusionDefinition() as fd:
        rows = fd.define_scalar(None, dtype=DataType.Int)
        fill = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.full([rows, 2], fill, DataType.BFloat16))
    for n, value in ((3, 0.75), (1, -2.0), (5, 3.0)):
        (out,) = fd.execute([n, value])
        assert out.shape == (n, 2)
        np.testing.assert_array_equal(as_float64(out), np.full((n, 2), value))


def test_full_like_another_tensor_shape() -> None:
    x = random_array(np.random.default_rng(1), (2, 4), DataType.Half)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half)
        ones = fd.ops.full(t.shape(), 1, DataType.Half)
        fd.add_output(ones)
        fd.add_output(t + ones)
    ones_out, added = fd.execute([x])
    np.testing.assert_array_equal(ones_out, np.ones((2, 4), np.float16))
    assert added.dtype == np.float32
    assert_close(added, as_float64(x) + 1)


def test_full_rejects_a_negative_size() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        fd.ops.full([2, -3], 1.0, DataType.Float)
    assert info.value.op == "full"
    assert "-3" in str(info.value)


def test_full_rejects_a_fractional_integer_fill() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        fd.ops.full([2], 1.5, DataType.Int32)
    assert info.value.op == "full"
    assert "1.5" in str(info.value) and "Int32" in str(info.value)
