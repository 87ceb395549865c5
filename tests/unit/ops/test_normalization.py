"""welford, batch_norm and stride_order against NumPy formulas on random data: every
dtype each accepts, odd sizes, empty tensors, and the definition-time refusals."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.ir.dtype import to_storage

from ._helpers import FLOATS, MAIN_DTYPES, TOLERANCES, as_float64, assert_close, random_array, run_fusion

REAL_FLOATS = (DataType.Float, DataType.Double)


# -- welford ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", REAL_FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize(
    ("shape", "dims"), [((5, 7), [1]), ((3, 1, 9), [0, 2]), ((4, 6, 5), [-1, 0]), ((2, 3), [0, 1])]
)
def test_welford_matches_mean_m2_and_count(dtype, shape, dims):
    x = random_array(np.random.default_rng(3), shape, dtype)
    (avg, m2, n), fd = run_fusion(lambda fd, t: list(fd.ops.welford(t, dims)), [x])
    axes = tuple(d % len(shape) for d in dims)
    x64 = as_float64(x)
    assert_close(avg, x64.mean(axis=axes), dtype)
    assert_close(m2, ((x64 - x64.mean(axis=axes, keepdims=True)) ** 2).sum(axis=axes), dtype)
    np.testing.assert_array_equal(n, np.full(avg.shape, int(np.prod([shape[a] for a in axes]))))
    assert avg.dtype == m2.dtype == dtype.numpy and n.dtype == np.int64
    assert "(Avg),\n" in fd.fusion_ir() and "= Welford ( T0_g" in fd.fusion_ir()


def test_welford_of_an_empty_axis_is_nan_mean_zero_m2_zero_count():
    x = np.zeros((0, 4), np.float32)
    (avg, m2, n), _ = run_fusion(lambda fd, t: list(fd.ops.welford(t, [0])), [x])
    assert np.isnan(avg).all() and (m2 == 0).all() and (n == 0).all() and avg.shape == (4,)


@pytest.mark.parametrize("dtype", [d for d in MAIN_DTYPES if d not in REAL_FLOATS], ids=lambda d: d.name)
def test_welford_refuses_other_dtypes_naming_the_tensor(dtype):
    pattern = r"welford: takes a Float or Double tensor, got .* input T0"
    with pytest.raises(FuserError, match=pattern) as info, FusionDefinition() as fd:
        fd.ops.welford(fd.define_tensor([-1, -1], [True, True], dtype=dtype), [1])
    assert info.value.location is not None and "test_normalization.py" in info.value.location.filename


@pytest.mark.parametrize(("dims", "message"), [([], "no reduction axis"), ([2], "out of range"), ([0, 0], "")])
def test_welford_refuses_bad_dims(dims, message):
    with pytest.raises(FuserError, match=f"welford.*{message}"), FusionDefinition() as fd:
        fd.ops.welford(fd.define_tensor([-1, -1], [True, True]), dims)


# -- stride_order ------------------------------------------------------------------------------------
def _strides_rank(array: np.ndarray) -> list[int]:
    """The stride order of an array: entry i is axis i's rank among the strides."""
    order = sorted(range(array.ndim), key=lambda i: (array.strides[i], -i))
    ranks = [0] * array.ndim
    for rank, axis in enumerate(order):
        ranks[axis] = rank
    return ranks


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("order", [[0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]])
def test_stride_order_output_is_laid_out_as_required(dtype, order):
    x = random_array(np.random.default_rng(4), (3, 5, 7), dtype)
    (out, twice), fd = run_fusion(lambda fd, t: [fd.ops.stride_order(t, order), fd.ops.add(t, t)], [x])
    np.testing.assert_array_equal(out, x)
    assert _strides_rank(twice) == [2, 1, 0]  # the other output keeps the input's (row-major) layout
    assert _strides_rank(out) == order
    runtime = fd.runtime_for([x])
    (required,) = [tv for tv in runtime.fusion.outputs if tv.domain.allocation is not None and tv.name == 1]
    assert required.domain.allocation_is_hint is False  # a requirement, not an inferred hint
    assert "allocation domain" in fd.fusion_ir_with_transforms()


def test_stride_order_on_an_intermediate_survives_the_passes_and_keeps_values():
    x = random_array(np.random.default_rng(5), (4, 6), DataType.Float)
    out, fd = run_fusion(lambda fd, t: fd.ops.exp(fd.ops.stride_order(t, [0, 1])), [x])
    assert_close(out[0], np.exp(as_float64(x)), DataType.Float)
    fusion = fd.runtime_for([x]).fusion
    kept = [e for e in fusion.exprs() if type(e).__name__ == "LoadStoreOp"]
    assert len(kept) == 1 and kept[0].output.domain.allocation_is_hint is False


def test_stride_order_of_an_empty_tensor():
    x = np.zeros((0, 3), np.float32)
    out, _ = run_fusion(lambda fd, t: fd.ops.stride_order(t, [0, 1]), [x])
    assert out[0].shape == (0, 3)


@pytest.mark.parametrize("order", [[0, 1], [0, 0, 1], [1, 2, 3]])
def test_stride_order_refuses_what_is_not_a_permutation(order):
    pattern = r"stride_order: stride_order .* is not a permutation of 0..2 .* T0"
    with pytest.raises(FuserError, match=pattern), FusionDefinition() as fd:
        fd.ops.stride_order(fd.define_tensor([-1, -1, -1], [True] * 3), order)


# -- batch_norm ----------------------------------------------------------------------------------------
def _reference(x, w, b, rm, rv, momentum, eps, training, c_axis):
    x64 = as_float64(x)
    axes = tuple(a for a in range(x.ndim) if a != c_axis)
    shape = [1] * x.ndim
    shape[c_axis] = x.shape[c_axis]
    if training or rm is None:
        mean, var = x64.mean(axis=axes), x64.var(axis=axes)
        n = x64.size // x.shape[c_axis]
        new_rm = None if rm is None else (1 - momentum) * as_float64(rm) + momentum * mean
        new_rv = None if rv is None else (1 - momentum) * as_float64(rv) + momentum * var * n / (n - 1)
    else:
        mean, var, new_rm, new_rv = as_float64(rm), as_float64(rv), None, None
    invstd = 1 / np.sqrt(var + eps)
    y = (x64 - mean.reshape(shape)) * invstd.reshape(shape)
    if w is not None:
        y = y * as_float64(w).reshape(shape)
    if b is not None:
        y = y + as_float64(b).reshape(shape)
    return y, mean, invstd, new_rm, new_rv


def _batch_norm(x, w, b, rm, rv, momentum, eps, training, channels_last=False):
    given = [v for v in (x, w, b, rm, rv) if v is not None]
    with FusionDefinition() as fd:
        handles = iter([fd.define_tensor([-1] * v.ndim, [True] * v.ndim, dtype=_dt(v)) for v in given])
        args = [next(handles) if v is not None else None for v in (x, w, b, rm, rv)]
        mom = fd.define_scalar(None, dtype=DataType.Double)
        outs = fd.ops.batch_norm(*args, mom, eps, training, channels_last)
        for out in outs:
            fd.add_output(out)
    return fd.execute([*given, momentum]), fd


def _dt(array: np.ndarray) -> DataType:
    from fuser_core.ir.dtype import dtype_from_numpy

    return dtype_from_numpy(array.dtype)


@pytest.mark.parametrize("dtype", REAL_FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("stats_dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("channels_last", [False, True], ids=["NCHW", "NHWC"])
def test_batch_norm_training_updates_the_running_stats_in_place(dtype, stats_dtype, channels_last):
    rng = np.random.default_rng(6)
    shape = (3, 5, 7, 2) if not channels_last else (3, 7, 2, 5)
    c_axis = 3 if channels_last else 1
    x = random_array(rng, shape, dtype)
    w, b = random_array(rng, (5,), dtype), random_array(rng, (5,), dtype)
    rm, rv = random_array(rng, (5,), stats_dtype), random_array(rng, (5,), stats_dtype, 0.5, 2.0)
    rm0, rv0 = rm.copy(), rv.copy()
    (y, mean, invstd), fd = _batch_norm(x, w, b, rm, rv, 0.1, 1e-5, True, channels_last)
    ey, emean, einvstd, erm, erv = _reference(x, w, b, rm0, rv0, 0.1, 1e-5, True, c_axis)
    assert_close(y, ey, dtype)
    assert_close(mean.reshape(-1), emean, dtype)
    assert_close(invstd.reshape(-1), einvstd, dtype)
    # written back into the inputs, rounded to their dtype, and not returned
    assert rm.dtype == rm0.dtype and rv.dtype == rv0.dtype
    # the batch statistics are computed in x's dtype: the looser tolerance of the two holds
    loose = max(dtype, stats_dtype, key=lambda d: TOLERANCES[d][0])
    assert_close(rm, to_storage(erm, stats_dtype), loose)
    assert_close(rv, to_storage(erv, stats_dtype), loose)
    assert len(fd.aliases) == 2 and len(fd.fusion.outputs) == 5
    # a second execution starts from the updated stats, as nvFuser's aliased outputs do
    rm1 = rm.copy()
    fd.execute([x, w, b, rm, rv, 0.1])
    _, _, _, erm2, _ = _reference(x, w, b, rm1, rv0, 0.1, 1e-5, True, c_axis)
    assert_close(rm, to_storage(erm2, stats_dtype), loose)


@pytest.mark.parametrize("dtype", REAL_FLOATS, ids=lambda d: d.name)
def test_batch_norm_inference_uses_the_running_stats_and_leaves_them(dtype):
    rng = np.random.default_rng(7)
    x = random_array(rng, (2, 3, 5), dtype)
    w, b = random_array(rng, (3,), dtype), random_array(rng, (3,), dtype)
    rm, rv = random_array(rng, (3,), dtype), random_array(rng, (3,), dtype, 0.5, 2.0)
    rm0, rv0 = rm.copy(), rv.copy()
    (y, mean, invstd), fd = _batch_norm(x, w, b, rm, rv, 0.1, 1e-3, False)
    ey, emean, einvstd, _, _ = _reference(x, w, b, rm0, rv0, 0.1, 1e-3, False, 1)
    assert_close(y, ey, dtype)
    assert_close(mean, emean, dtype)
    assert_close(invstd, einvstd, dtype)
    np.testing.assert_array_equal(rm, rm0)
    np.testing.assert_array_equal(rv, rv0)
    assert fd.aliases == [] and "= Set( T3_g" in fd.fusion_ir()


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_without_weight_bias_or_stats_normalizes_by_the_batch(training):
    x = random_array(np.random.default_rng(8), (4, 3), DataType.Float)
    (y, mean, invstd), fd = _batch_norm(x, None, None, None, None, 0.1, 1e-5, training)
    ey, emean, einvstd, _, _ = _reference(x, None, None, None, None, 0.1, 1e-5, True, 1)
    assert_close(y, ey, DataType.Float)
    assert_close(mean.reshape(-1), emean, DataType.Float)
    assert_close(invstd.reshape(-1), einvstd, DataType.Float)
    assert fd.aliases == []


def test_batch_norm_of_an_empty_batch_has_nan_statistics():
    x = np.zeros((0, 3, 2), np.float32)
    (y, mean, invstd), _ = _batch_norm(x, None, None, None, None, 0.1, 1e-5, True)
    assert y.shape == (0, 3, 2) and np.isnan(mean).all() and invstd.shape == (3,)


REFUSALS = [
    ("x Half", "must be Float or Double, got DataType.Half"),
    ("x 1-D", "must have at least 2 axes"),
    ("weight 2-D", "weight T1 must have 1 axis"),
    ("only running_mean", "running_mean and running_var must be given together"),
    ("static mismatch", "the channel axis 1"),
    ("momentum int", "momentum must be a floating-point scalar"),
    ("training not bool", "training must be True or False"),
]


@pytest.mark.parametrize(("case", "message"), REFUSALS, ids=[c for c, _ in REFUSALS])
def test_batch_norm_refusals_name_the_op_and_tensor(case, message):
    with pytest.raises(FuserError, match=f"batch_norm: .*{message}") as info, FusionDefinition() as fd:
        dtype = DataType.Half if case == "x Half" else DataType.Float
        shape = [-1] if case == "x 1-D" else ([2, 3, 4] if case == "static mismatch" else [-1, -1, -1])
        x = fd.define_tensor(shape, [True] * len(shape), dtype=dtype)
        w = fd.define_tensor([-1, -1] if case == "weight 2-D" else ([5] if case == "static mismatch" else [-1]))
        rm = fd.define_tensor([-1], [True])
        rv = None if case == "only running_mean" else fd.define_tensor([-1], [True])
        momentum = fd.define_scalar(None, dtype=DataType.Int) if case == "momentum int" else 0.1
        training = 1 if case == "training not bool" else True
        fd.ops.batch_norm(x, w, None, rm, rv, momentum, 1e-5, training)
    assert info.value.location is not None and info.value.location.lineno > 0


def test_add_output_alias_input_writes_into_the_input():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    acc = np.ones((2, 3), np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], [True, True])
        a = fd.define_tensor([-1, -1], [True, True])
        fd.add_output(fd.ops.add(t, a), alias_input=a)
        fd.add_output(fd.ops.neg(t))
    (out,) = fd.execute([x, acc])
    np.testing.assert_array_equal(out, -x)
    np.testing.assert_array_equal(acc, x + 1)


def test_aliases_are_checked():
    pattern = r"add_output: T1 .* cannot be written into T0 .* same dtype and rank"
    with pytest.raises(FuserError, match=pattern), FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], [True, True])
        fd.add_output(fd.ops.sum(t, [0]), alias_input=t)
    with pytest.raises(FuserError, match="add_output: T1 is not a fusion input"), FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True])
        fd.add_output(t, alias_input=fd.ops.neg(t))
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True])
        fd.add_output(fd.ops.neg(t), alias_input=t)
    with pytest.raises(FuserError, match="execute: input T0 must be a writable array or tensor"):
        frozen = np.ones(3, np.float32)
        frozen.flags.writeable = False
        fd.execute([frozen])
