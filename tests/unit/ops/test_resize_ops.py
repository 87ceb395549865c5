"""Resize ops against NumPy: slice, pad and cat."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import MAIN_DTYPES, random_array, run_one


def rand(shape: tuple[int, ...], dtype: DataType = DataType.Float, seed: int = 0) -> np.ndarray:
    return random_array(np.random.default_rng(seed), shape, dtype)


# -- slice --------------------------------------------------------------------------


SLICES = [
    ([1, 2], [3, 5]),
    ([0, 0], [4, 6]),
    ([0, 2], [100, 5]),  # an end past the extent is clamped
    ([0, 5], [1, 6]),
    ([2, 0], [2, 6]),  # empty
]


@pytest.mark.parametrize(("starts", "stops"), SLICES, ids=str)
@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
def test_slice(starts: list[int], stops: list[int], static: bool) -> None:
    x = rand((4, 6))
    expected = x[starts[0] : stops[0], starts[1] : stops[1]]
    out, _ = run_one(lambda fd, t: fd.ops.slice(t, starts, stops), x, static=static)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_slice_dtypes_and_unit_strides(dtype: DataType) -> None:
    x = rand((5, 3, 4), dtype)
    out, _ = run_one(lambda fd, t: fd.ops.slice(t, [1, 0, 1], [4, 3, 3], [1, 1, 1]), x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x[1:4, :, 1:3])


def test_slice_with_manual_normalization() -> None:
    x = rand((4, 6))
    out, fd = run_one(lambda fd, t: fd.ops.slice(t, [1, 2], [3, 6], manual_normalization=True), x, static=True)
    np.testing.assert_array_equal(out, x[1:3, 2:6])
    assert "{1, 3, 1}" in fd.fusion_ir() and "{2, 6, 1}" in fd.fusion_ir()


def test_slice_bounds_from_scalar_inputs() -> None:
    x = rand((6, 5))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        start = fd.define_scalar(None, dtype=DataType.Int)
        stop = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.slice(t, [start, 0], [stop, t.size(1)]))
    for lo, hi in [(1, 4), (-3, -1), (0, 6), (-100, 2), (2, 100)]:
        (out,) = fd.execute([x, lo, hi])
        np.testing.assert_array_equal(out, x[lo:hi, :])


@pytest.mark.parametrize(
    ("starts", "stops", "message"),
    [
        ([-3, 0], [-1, -2], "start_indices must be greater-than-or-equal-to 0"),
        ([-10, 2], [100, 5], "start_indices must be greater-than-or-equal-to 0"),
        ([2, -4], [4, 6], "start_indices must be greater-than-or-equal-to 0"),
        ([3, 1], [1, 4], "end_indices must be greater-than-or-equal-to start_indices"),
    ],
    ids=str,
)
def test_negative_or_reversed_constant_bounds_are_refused_as_nvfuser_2024_07_does(
    starts: list[int], stops: list[int], message: str
) -> None:
    """The frontend of the era this project reproduces checks constant bounds before
    any normalization (nvFuser normalized negative bounds only later)."""
    with pytest.raises(FuserError, match=message), FusionDefinition() as fd:
        t = fd.define_tensor(shape=[4, 6], contiguity=[True, True])
        fd.add_output(fd.ops.slice(t, starts, stops))


# -- pad ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("widths", "np_widths"),
    [
        ([1, 2], [(0, 0), (1, 2)]),
        ([0, 0, 2, 1], [(2, 1), (0, 0)]),
        ([1, 1, 1, 1], [(1, 1), (1, 1)]),
        ([3, 0], [(0, 0), (3, 0)]),
    ],
    ids=str,
)
@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
def test_pad_with_zeros(widths: list[int], np_widths: list[tuple[int, int]], static: bool) -> None:
    x = rand((3, 4))
    out, _ = run_one(lambda fd, t: fd.ops.pad(t, widths), x, static=static)
    np.testing.assert_array_equal(out, np.pad(x, np_widths))


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_pad_with_value(dtype: DataType) -> None:
    x = rand((3, 4), dtype)
    value = True if dtype.is_boolean else (7 if dtype.is_integral else 2.5)
    out, _ = run_one(lambda fd, t: fd.ops.pad(t, [1, 2, 0, 1], value), x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, np.pad(x, [(0, 1), (1, 2)], constant_values=value))


def test_pad_with_negative_widths_crops() -> None:
    x = rand((4, 6))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(fd.ops.pad(t, [-1, 2, 1, -2], 1.0))
        fd.add_output(fd.ops.pad(t, [-2, -1]))
    mixed, cropped = fd.execute([x])
    np.testing.assert_array_equal(mixed, np.pad(x[:-2, 1:], [(1, 0), (0, 2)], constant_values=1.0))
    np.testing.assert_array_equal(cropped, x[:, 2:-1])


def test_pad_widths_from_scalar_inputs() -> None:
    x = rand((3, 4))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        left = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.pad(t, [left, 1], -1.0))
    for w in (0, 2, -1):
        (out,) = fd.execute([x, w])
        expected = np.pad(x, [(0, 0), (max(w, 0), 1)], constant_values=-1.0)[:, max(-w, 0) :]
        np.testing.assert_array_equal(out, expected)


def test_pad_with_scalar_input_value() -> None:
    x = rand((2, 3))
    out, _ = run_one(lambda fd, t, v: fd.ops.pad(t, [1, 1], v), x, 3.25)
    np.testing.assert_array_equal(out, np.pad(x, [(0, 0), (1, 1)], constant_values=3.25))


def test_fractional_pad_value_of_an_integer_tensor_is_a_user_error() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.ops.pad(t, [1, 1], 3.5)
    assert info.value.op == "pad"
    assert info.value.tensor == "T0"
    assert "3.5" in str(info.value)


# -- cat ----------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
def test_cat(dim: int, static: bool) -> None:
    shapes = [(3, 4), (2, 4), (1, 4), (4, 4)] if dim in (0, -2) else [(3, 4), (3, 2), (3, 1), (3, 5)]
    xs = [rand(s, seed=i) for i, s in enumerate(shapes)]
    out, _ = run_one(lambda fd, *ts: fd.ops.cat(list(ts), dim), *xs, static=static)
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=dim))


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_cat_dtypes(dtype: DataType) -> None:
    xs = [rand((2, 3), dtype, seed=1), rand((2, 5), dtype, seed=2)]
    out, _ = run_one(lambda fd, a, b: fd.ops.cat([a, b], 1), *xs)
    assert out.dtype == xs[0].dtype
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))


def test_cat_of_three_dimensional_tensors_on_the_middle_axis() -> None:
    xs = [rand((2, n, 3), seed=n) for n in (1, 4, 2)]
    out, _ = run_one(lambda fd, a, b, c: fd.ops.cat([a, b, c], dim=1), *xs)
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))


def test_cat_of_one_tensor_is_a_copy() -> None:
    x = rand((2, 3))
    out, _ = run_one(lambda fd, a: fd.ops.cat([a], 0), x)
    np.testing.assert_array_equal(out, x)


def test_cat_of_slices_rebuilds_the_input() -> None:
    """The rotate-half pattern of RoPE: cat(-x[..., h:], x[..., :h])."""
    x = rand((3, 8))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        first = fd.ops.slice(t, [0, 0], [t.size(0), 4])
        second = fd.ops.slice(t, [0, 4], [t.size(0), 8])
        fd.add_output(fd.ops.cat([-second, first], -1))
    (out,) = fd.execute([x])
    np.testing.assert_array_equal(out, np.concatenate([-x[:, 4:], x[:, :4]], axis=-1))
