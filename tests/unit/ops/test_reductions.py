"""Reductions (sum, prod, max, min) and var / var_mean against NumPy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import FLOATS, INTS, MAIN_DTYPES, as_float64, assert_close, output_dtype, random_array, run_one

REDUCERS: dict[str, Callable[..., np.ndarray]] = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}

SHAPE = (3, 4, 5)


def reduction_input(name: str, dtype: DataType, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "prod":  # keep products of up to 60 factors in range
        low, high = (-2, 2) if not dtype.is_floating else (0.7, 1.4)
        x = random_array(rng, SHAPE, dtype, low, high)
        if dtype.is_floating:
            x = (x * rng.choice(np.array([-1, 1], dtype=x.dtype), size=x.shape)).astype(x.dtype)
        return x
    return random_array(rng, SHAPE, dtype, -9, 9)


def expected_reduction_dtype(name: str, dtype: DataType) -> DataType:
    if name in ("sum", "prod") and not dtype.is_floating:
        return DataType.Int  # integer and bool sums accumulate in int64, as in nvFuser
    return dtype


def reference(name: str, x: np.ndarray, axes: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    integral = x.dtype.kind in "biu"
    if name in ("sum", "prod"):
        acc = x.astype(np.int64) if integral else as_float64(x)
        return REDUCERS[name](acc, axis=axes, keepdims=keepdims)
    return REDUCERS[name](x if integral else as_float64(x), axis=axes, keepdims=keepdims)


@pytest.mark.parametrize("dims", [[0], [1], [2], [-1], [0, 2], [-3, 1], [0, 1, 2]], ids=str)
@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_reduction_matches_numpy(name: str, dtype: DataType, dims: list[int]) -> None:
    x = reduction_input(name, dtype, seed=len(dims) * 7 + list(DataType).index(dtype))
    out, _ = run_one(lambda fd, t: getattr(fd.ops, name)(t, dims=dims), x)
    assert output_dtype(out) == expected_reduction_dtype(name, dtype)
    expected = reference(name, x, tuple(dims))
    if dtype.is_floating:
        assert_close(out, expected)
    else:
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_reduction_keepdim(name: str, dtype: DataType) -> None:
    x = reduction_input(name, dtype, seed=3)
    out, _ = run_one(lambda fd, t: getattr(fd.ops, name)(t, dims=[0, 2], keepdim=True), x)
    assert out.shape == (1, 4, 1)
    assert_close(out, reference(name, x, (0, 2), keepdims=True), output_dtype(out))


def test_sum_argument_forms() -> None:
    """dims=, axes=, dim=, positional (dims, keepdim, dtype) and (dtype) alone."""
    x = random_array(np.random.default_rng(1), SHAPE, DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        fd.add_output(fd.ops.sum(t, dims=[1]))
        fd.add_output(fd.ops.sum(t, axes=[1]))
        fd.add_output(fd.ops.sum(t, dim=1))
        fd.add_output(fd.ops.sum(t, [-1], False, DataType.Float))
        fd.add_output(fd.ops.sum(t, [-1], True, DataType.Double))
        fd.add_output(fd.ops.sum(t, DataType.Float))
        fd.add_output(fd.ops.sum(t, DataType.Double))
        fd.add_output(fd.ops.sum(t))
        fd.add_output(fd.ops.sum(t, [0, 1], keepdim=True, dtype=DataType.Double))
    by_dims, by_axes, by_dim, positional, positional_keep, all_float, all_double, default, keyword = fd.execute([x])
    xd = as_float64(x)
    for out in (by_dims, by_axes, by_dim):
        assert out.dtype == np.float32
        assert_close(out, xd.sum(1))
    assert positional.dtype == np.float32
    assert_close(positional, xd.sum(-1))
    assert positional_keep.dtype == np.float64 and positional_keep.shape == (3, 4, 1)
    assert_close(positional_keep, x.astype(np.float64).sum(-1, keepdims=True))
    assert all_float.shape == default.shape == all_double.shape == ()
    assert all_float.dtype == default.dtype == np.float32
    assert_close(all_float, xd.sum())
    assert_close(default, xd.sum())
    assert all_double.dtype == np.float64
    assert_close(all_double, x.astype(np.float64).sum())
    assert keyword.dtype == np.float64 and keyword.shape == (1, 1, 5)
    assert_close(keyword, x.astype(np.float64).sum((0, 1), keepdims=True))


@pytest.mark.parametrize("name", ["max", "min", "prod"])
def test_reduction_argument_forms_of_other_ops(name: str) -> None:
    x = reduction_input(name, DataType.Float, seed=2)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        fd.add_output(getattr(fd.ops, name)(t, axes=[0]))
        fd.add_output(getattr(fd.ops, name)(t, [-1], True))
        fd.add_output(getattr(fd.ops, name)(t))
    by_axes, positional, everything = fd.execute([x])
    assert_close(by_axes, reference(name, x, (0,)))
    assert_close(positional, reference(name, x, (2,), keepdims=True))
    assert_close(everything, reference(name, x, (0, 1, 2)))


@pytest.mark.parametrize(
    ("dtype", "to", "want"),
    [
        (DataType.Int32, DataType.Null, DataType.Int),
        (DataType.Bool, DataType.Null, DataType.Int),
        (DataType.Int32, DataType.Float, DataType.Float),
        (DataType.Int, DataType.Int32, DataType.Int32),
        (DataType.Half, DataType.Float, DataType.Float),
        (DataType.BFloat16, DataType.Double, DataType.Double),
        (DataType.Float, DataType.Double, DataType.Double),
    ],
    ids=lambda v: v.name,
)
def test_sum_dtype_argument(dtype: DataType, to: DataType, want: DataType) -> None:
    x = random_array(np.random.default_rng(4), SHAPE, dtype, -9, 9)
    out, fd = run_one(lambda fd, t: fd.ops.sum(t, dims=[1], dtype=to), x)
    assert output_dtype(out) == want
    expected = reference("sum", x, (1,))
    if want.is_floating:
        assert_close(out, expected)
    else:
        np.testing.assert_array_equal(out, expected)
    # A dtype other than the input's casts the input first, visibly in the IR.
    reduced = "T1_l" if want != dtype else "T0_g"
    assert f"reduction( {reduced}[" in fd.fusion_ir()


def test_integer_sum_does_not_overflow_int32() -> None:
    x = np.full((4, 3), 2**30, dtype=np.int32) + np.arange(12, dtype=np.int32).reshape(4, 3)
    out, _ = run_one(lambda fd, t: fd.ops.sum(t, dims=[0]), x)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, x.astype(np.int64).sum(0))


@pytest.mark.parametrize("name", sorted(REDUCERS))
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Int, DataType.Half], ids=lambda d: d.name)
def test_reducing_a_size_one_broadcast_axis(name: str, dtype: DataType) -> None:
    x = np.ascontiguousarray(reduction_input(name, dtype, seed=5)[:, :1, :])  # (3, 1, 5): axis 1 is a broadcast
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True], dtype=dtype)
        fd.add_output(getattr(fd.ops, name)(t, dims=[1]))
        fd.add_output(getattr(fd.ops, name)(t, dims=[1, 2], keepdim=True))
    squeezed, kept = fd.execute([x])
    assert output_dtype(squeezed) == output_dtype(kept) == expected_reduction_dtype(name, dtype)
    assert squeezed.shape == (3, 5) and kept.shape == (3, 1, 1)
    assert_close(squeezed, reference(name, x, (1,)), output_dtype(squeezed))
    assert_close(kept, reference(name, x, (1, 2), keepdims=True), output_dtype(kept))


@pytest.mark.parametrize("name", sorted(REDUCERS))
@pytest.mark.parametrize(
    "dtype", [DataType.Float, DataType.Int32, DataType.Half, DataType.BFloat16], ids=lambda d: d.name
)
def test_reducing_an_expanded_broadcast_axis(name: str, dtype: DataType) -> None:
    """An expanded axis holds the same value n times: a sum scales, a product powers."""
    x = reduction_input(name, dtype, seed=6)[:1, :, :]  # (1, 4, 5)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[1, -1, -1], contiguity=[None, True, True], dtype=dtype)
        expanded = fd.ops.expand(t, [3, t.size(1), t.size(2)])
        fd.add_output(getattr(fd.ops, name)(expanded, dims=[0]))
        fd.add_output(getattr(fd.ops, name)(expanded, dims=[0, 1]))
    first, both = fd.execute([x])
    big = np.broadcast_to(x, (3, 4, 5))
    want = expected_reduction_dtype(name, dtype)
    assert output_dtype(first) == output_dtype(both) == want
    assert_close(first, reference(name, big, (0,)), want)
    assert_close(both, reference(name, big, (0, 1)), want)


def test_reducing_broadcast_in_dim_output() -> None:
    x = random_array(np.random.default_rng(7), (4,), DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        b = fd.ops.broadcast_in_dim(t, [3, 4], [1])
        fd.add_output(fd.ops.sum(b, dims=[0]))
        fd.add_output(fd.ops.max(b, dims=[1]))
    summed, maxed = fd.execute([x])
    assert_close(summed, 3 * as_float64(x))
    assert_close(maxed, np.full(3, x.max()))


def test_reduction_of_a_zero_dim_tensor_is_a_copy() -> None:
    x = np.array(2.5, dtype=np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[], contiguity=[])
        fd.add_output(fd.ops.sum(t))
        fd.add_output(fd.ops.max(t))
    s, m = fd.execute([x])
    assert s.shape == m.shape == ()
    assert float(s) == float(m) == 2.5


def test_max_and_min_of_bools() -> None:
    x = np.array([[True, False, False], [False, False, False], [True, True, True]])
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Bool)
        fd.add_output(fd.ops.max(t, dims=[1]))
        fd.add_output(fd.ops.min(t, dims=[1]))
        fd.add_output(fd.ops.sum(t, dims=[1]))
    any_, all_, count = fd.execute([x])
    np.testing.assert_array_equal(any_, [True, False, True])
    np.testing.assert_array_equal(all_, [False, False, True])
    np.testing.assert_array_equal(count, [1, 0, 3])
    assert count.dtype == np.int64


def test_max_and_min_keep_infinities_and_extremes() -> None:
    x = np.array([[-np.inf, 1.0, 2.0], [np.inf, -3.0, 0.5]], dtype=np.float32)
    xi = np.array([[np.iinfo(np.int32).min, 0], [np.iinfo(np.int32).max, -1]], dtype=np.int32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        u = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
        fd.add_output(fd.ops.max(t, dims=[1]))
        fd.add_output(fd.ops.min(t, dims=[1]))
        fd.add_output(fd.ops.max(u, dims=[0]))
        fd.add_output(fd.ops.min(u, dims=[0]))
    mx, mn, imx, imn = fd.execute([x, xi])
    np.testing.assert_array_equal(mx, [2.0, np.inf])
    np.testing.assert_array_equal(mn, [-np.inf, -3.0])
    np.testing.assert_array_equal(imx, [np.iinfo(np.int32).max, 0])
    np.testing.assert_array_equal(imn, [np.iinfo(np.int32).min, -1])


def test_sum_of_complex() -> None:
    x = random_array(np.random.default_rng(8), SHAPE, DataType.ComplexFloat)
    out, _ = run_one(lambda fd, t: fd.ops.sum(t, dims=[0, 2]), x)
    assert out.dtype == np.complex64
    assert_close(out, x.astype(np.complex128).sum((0, 2)), DataType.ComplexFloat)


# -- var and var_mean -------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("dims", [[1], [0, 2], [-1]], ids=str)
@pytest.mark.parametrize("dtype", [*FLOATS, DataType.Int], ids=lambda d: d.name)
def test_var(dtype: DataType, dims: list[int], correction: int, keepdim: bool) -> None:
    x = random_array(np.random.default_rng(9), SHAPE, dtype, -4, 4)
    out, _ = run_one(lambda fd, t: fd.ops.var(t, dims, correction, keepdim), x)
    want = DataType.Double if dtype == DataType.Double else DataType.Float
    assert output_dtype(out) == want
    # Half types are summed into their own type for the mean: their precision bounds the result.
    tolerance = dtype if dtype.is_reduced_float else want
    assert_close(out, np.var(as_float64(x), axis=tuple(dims), ddof=correction, keepdims=keepdim), tolerance)


def test_var_keyword_forms() -> None:
    x = random_array(np.random.default_rng(10), SHAPE, DataType.Double)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Double)
        fd.add_output(fd.ops.var(t, dims=[0, 1], correction=0, keepdim=True))
        fd.add_output(fd.ops.var(t, axes=[2]))
        fd.add_output(fd.ops.var(t))
    kw, axes, everything = fd.execute([x])
    assert_close(kw, np.var(x, axis=(0, 1), keepdims=True))
    assert_close(axes, np.var(x, axis=2, ddof=1))
    assert_close(everything, np.var(x, ddof=1))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("dims", [[1], [0, 2], [-1, -2]], ids=str)
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double, DataType.Int32], ids=lambda d: d.name)
def test_var_mean(dtype: DataType, dims: list[int], correction: int, keepdim: bool) -> None:
    x = random_array(np.random.default_rng(11), SHAPE, dtype, -4, 4)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=dtype)
        var, mean = fd.ops.var_mean(t, dims, correction, keepdim)
        fd.add_output(var)
        fd.add_output(mean)
    var_out, mean_out = fd.execute([x])
    want = DataType.Double if dtype == DataType.Double else DataType.Float
    assert output_dtype(var_out) == output_dtype(mean_out) == want
    axes = tuple(dims)
    xd = as_float64(x)
    assert_close(var_out, np.var(xd, axis=axes, ddof=correction, keepdims=keepdim), want)
    assert_close(mean_out, np.mean(xd, axis=axes, keepdims=keepdim), want)


def test_var_mean_keywords() -> None:
    x = random_array(np.random.default_rng(12), SHAPE, DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        var, mean = fd.ops.var_mean(t, dims=[2], correction=0, keepdim=True)
        fd.add_output(var)
        fd.add_output(mean)
    var_out, mean_out = fd.execute([x])
    assert var_out.shape == mean_out.shape == (3, 4, 1)
    assert_close(var_out, np.var(as_float64(x), axis=2, keepdims=True))
    assert_close(mean_out, np.mean(as_float64(x), axis=2, keepdims=True))


def test_var_of_a_broadcast_axis_is_zero() -> None:
    x = random_array(np.random.default_rng(13), (3, 1, 5), DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True])
        fd.add_output(fd.ops.var(t, [1], 0))
        var, mean = fd.ops.var_mean(t, [1], 0)
        fd.add_output(var)
        fd.add_output(mean)
    var_only, var_out, mean_out = fd.execute([x])
    np.testing.assert_array_equal(var_only, np.zeros((3, 5), np.float32))
    np.testing.assert_array_equal(var_out, np.zeros((3, 5), np.float32))
    assert_close(mean_out, as_float64(x)[:, 0, :])


def test_var_mean_rejects_bfloat16() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.ops.var_mean(t, [1])
    err = info.value
    assert err.op == "var_mean"
    assert err.tensor == "T0"
    assert "BFloat16" in str(err)


def test_var_mean_of_bfloat16_cast_to_float_works() -> None:
    x = random_array(np.random.default_rng(14), (4, 6), DataType.BFloat16)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        var, mean = fd.ops.var_mean(fd.ops.cast(t, DataType.Float), [1])
        fd.add_output(var)
        fd.add_output(mean)
    var_out, mean_out = fd.execute([x])
    assert_close(var_out, np.var(as_float64(x), axis=1, ddof=1))
    assert_close(mean_out, np.mean(as_float64(x), axis=1))


@pytest.mark.parametrize("name", ["var", "var_mean"])
def test_negative_correction_is_rejected(name: str) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        getattr(fd.ops, name)(t, [1], -1)
    assert info.value.op == name
    assert "-1" in str(info.value)


def test_reductions_of_empty_axes_give_the_identity() -> None:
    x = np.zeros((0, 3), dtype=np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        for name in ("sum", "prod", "max", "min"):
            fd.add_output(getattr(fd.ops, name)(t, dims=[0]))
        fd.add_output(fd.ops.sum(t, dims=[1]))
    summed, product, maxed, mined, empty = fd.execute([x])
    np.testing.assert_array_equal(summed, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(product, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(maxed, [-np.inf, -np.inf, -np.inf])
    np.testing.assert_array_equal(mined, [np.inf, np.inf, np.inf])
    assert empty.shape == (0,)


def test_max_and_min_propagate_nan() -> None:
    """As torch.max / torch.maximum (and nvFuser's NaN-propagating fmax)."""
    x = random_array(np.random.default_rng(15), (3, 4), DataType.Float)
    x[0, 1] = np.nan
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(fd.ops.max(t, dims=[1]))
        fd.add_output(fd.ops.min(t, dims=[1]))
        fd.add_output(fd.ops.maximum(t, 0.0))
        fd.add_output(fd.ops.minimum(0.0, t))
    maxed, mined, clipped_low, clipped_high = fd.execute([x])
    assert np.isnan(maxed[0]) and np.isnan(mined[0])
    np.testing.assert_array_equal(maxed[1:], x[1:].max(1))
    np.testing.assert_array_equal(mined[1:], x[1:].min(1))
    np.testing.assert_array_equal(clipped_low, np.maximum(x, 0))
    np.testing.assert_array_equal(clipped_high, np.minimum(0, x))
    assert np.isnan(clipped_low[0, 1]) and np.isnan(clipped_high[0, 1])
