"""Indexing ops against NumPy in every dtype, odd sizes and empty tensors; each runs
as its own expr_eval group; an index out of range is a FuserError at execution
naming the op, the index tensor and the bad value."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.scheduler.base import SchedulerType

from ._helpers import MAIN_DTYPES, assert_close, random_array, run_fusion, run_one

INDEX_DTYPES = (DataType.Int, DataType.Int32)


def _idx(rng: np.random.Generator, high: int, shape: tuple[int, ...], dtype: DataType = DataType.Int) -> np.ndarray:
    return rng.integers(0, high, size=shape).astype(dtype.numpy)


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=lambda d: d.name)
def test_index_select(dtype: DataType, index_dtype: DataType) -> None:
    rng = np.random.default_rng(1)
    x = random_array(rng, (5, 7), dtype)
    i = _idx(rng, 7, (9,), index_dtype)
    out, fd = run_one(lambda fd, t, j: fd.ops.index_select(t, j, 1), x, i)
    np.testing.assert_array_equal(out, x[:, i])
    assert "= indexSelect( T0_g" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_select_with_a_scalar_index(dtype: DataType) -> None:
    x = random_array(np.random.default_rng(2), (3, 5, 7), dtype)
    outs, fd = run_fusion(lambda fd, t, s: [fd.ops.select(t, s, 1), fd.ops.select(t, -1, 2)], [x, 3])
    np.testing.assert_array_equal(outs[0], x[:, 3])
    np.testing.assert_array_equal(outs[1], x[:, :, -1])
    assert "= select( T0_g" in fd.fusion_ir() and ", axis = iS" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_gather_with_a_smaller_index(dtype: DataType) -> None:
    rng = np.random.default_rng(3)
    x = random_array(rng, (5, 7), dtype)
    i = _idx(rng, 5, (3, 4))
    out, fd = run_one(lambda fd, t, j: fd.ops.gather(t, j, 0), x, i)
    expected = np.array([[x[i[r, c], c] for c in range(4)] for r in range(3)], dtype=x.dtype)
    np.testing.assert_array_equal(out, expected)
    assert "= torchGather( T0_g" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_take_along_axis(dtype: DataType) -> None:
    rng = np.random.default_rng(4)
    x = random_array(rng, (5, 7), dtype)
    i = _idx(rng, 7, (5, 11), DataType.Int32)
    out, fd = run_one(lambda fd, t, j: fd.ops.take_along_axis(t, j, 1), x, i)
    np.testing.assert_array_equal(out, np.take_along_axis(x, i.astype(np.int64), axis=1))
    assert "= takeAlongAxis( T0_g" in fd.fusion_ir()


def test_take_along_axis_refuses_mismatched_static_sizes() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor([5, 7])
        j = fd.define_tensor([4, 3], dtype=DataType.Int)
        fd.ops.take_along_axis(t, j, 1)
    assert info.value.op == "take_along_axis" and "axis 0" in str(info.value)


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_scatter_tensor_and_scalar_src(dtype: DataType) -> None:
    rng = np.random.default_rng(5)
    x = random_array(rng, (6, 5), dtype)
    src = random_array(rng, (6, 5), dtype)
    i = np.stack([rng.permutation(5)[:3] for _ in range(6)])  # distinct per row: no write races
    outs, fd = run_fusion(lambda fd, t, j, s: [fd.ops.scatter(t, j, s, 1), fd.ops.scatter(t, j, 1, 1)], [x, i, src])
    expected = x.copy()
    np.put_along_axis(expected, i, src[:, :3], axis=1)
    np.testing.assert_array_equal(outs[0], expected)
    ones = x.copy()
    np.put_along_axis(ones, i, np.ones((), x.dtype), axis=1)
    np.testing.assert_array_equal(outs[1], ones)
    assert "= scatter(in = T0_g" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16, *INDEX_DTYPES))
def test_index_put_accumulate_adds_repeated_rows(dtype: DataType) -> None:
    rng = np.random.default_rng(6)
    acc = random_array(rng, (5, 3), dtype)
    value = random_array(rng, (8, 3), dtype)
    i = np.array([0, 4, 4, 2, 0, 0, 1, 4])
    out, fd = run_one(lambda fd, a, j, v: fd.ops.index_put_accumulate(a, j, v), acc, i, value)
    expected = acc.astype(np.float64)
    for r, row in enumerate(i):
        expected[row] += value[r].astype(np.float64)
    assert_close(out, expected, dtype)
    assert "= indexPutAccumulate( T0_g" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16))
def test_embedding_fwd(dtype: DataType) -> None:
    rng = np.random.default_rng(7)
    weight = random_array(rng, (11, 6), dtype)
    ids = _idx(rng, 11, (3, 5))
    outs, fd = run_fusion(
        lambda fd, i, w: [fd.ops.embedding_fwd(i, w), fd.ops.embedding_fwd(i, w, padding_idx=0)], [ids, weight]
    )
    np.testing.assert_array_equal(outs[0], weight[ids])
    np.testing.assert_array_equal(outs[1], weight[ids])  # padding_idx changes only the gradient
    text = fd.fusion_ir()
    assert "   = embedding(T0_g" in text and "            padding_idx = 0," in text


def test_embedding_max_norm_is_refused() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        i = fd.define_tensor([-1], dtype=DataType.Int)
        w = fd.define_tensor([-1, -1])
        fd.ops.embedding_fwd(i, w, None, 1.0)
    assert info.value.op == "embedding_fwd" and "max_norm" in str(info.value)


BAD_INDEX_CASES = [
    ("index_select", lambda fd, t, j: fd.ops.index_select(t, j, 0), (2,), [1, 5], "index 5 at position [1]"),
    ("gather", lambda fd, t, j: fd.ops.gather(t, j, 1), (2, 2), [[0, 1], [-1, 0]], "index -1 at position [1, 0]"),
    ("take_along_axis", lambda fd, t, j: fd.ops.take_along_axis(t, j, 1), (5, 3), None, "index 3 at position"),
    ("scatter", lambda fd, t, j: fd.ops.scatter(t, j, 0.5, 0), (2, 3), [[0, 1, 2], [5, 0, 0]], "index 5"),
    ("embedding_fwd", lambda fd, t, j: fd.ops.embedding_fwd(j, t), (2,), [3, 9], "index 9 at position [1]"),
]


@pytest.mark.parametrize(("op", "build", "shape", "values", "message"), BAD_INDEX_CASES, ids=lambda c: str(c))
def test_out_of_range_index_is_a_fuser_error(
    op: str, build: object, shape: tuple, values: object, message: str
) -> None:
    x = random_array(np.random.default_rng(8), (5, 3), DataType.Float)
    if values is None:
        index = np.zeros(shape, dtype=np.int64)
        index[2, 1] = 3
    else:
        index = np.array(values, dtype=np.int64)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        j = fd.define_tensor([-1] * len(shape), dtype=DataType.Int)
        fd.add_output(build(fd, t, j))  # type: ignore[operator]
    with pytest.raises(FuserError) as info:
        fd.execute([x, index])
    assert info.value.op == op
    assert info.value.tensor == "T1"
    assert message in str(info.value)


def test_select_out_of_range_names_the_index_value() -> None:
    x = np.ones((3, 4), np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.select(t, s, 1))
    with pytest.raises(FuserError) as info:
        fd.execute([x, 4])
    assert info.value.op == "select" and "index 4" in str(info.value) and "size 4" in str(info.value)


def test_index_must_be_an_integer_tensor() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        fd.ops.index_select(t, t, 0)
    assert info.value.op == "index_select" and "Int or Int32" in str(info.value)


def test_empty_index_and_empty_lookup() -> None:
    x = random_array(np.random.default_rng(9), (4, 3), DataType.Float)
    empty_idx = np.zeros((0,), np.int64)
    out, _ = run_one(lambda fd, t, j: fd.ops.index_select(t, j, 0), x, empty_idx)
    assert out.shape == (0, 3)
    ids = np.zeros((2, 0), np.int64)
    out, _ = run_one(lambda fd, j, w: fd.ops.embedding_fwd(j, w), ids, x)
    assert out.shape == (2, 0, 3)


def test_indexing_runs_as_its_own_expr_eval_group() -> None:
    x = random_array(np.random.default_rng(10), (6, 4), DataType.Float)
    i = np.array([5, 1, 1])
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        j = fd.define_tensor([-1], dtype=DataType.Int)
        fd.add_output(fd.ops.exp(fd.ops.index_select(fd.ops.neg(t), j, 0)))
    groups = fd.runtime_for([x, i]).segmented.groups
    assert [g.scheduler for g in groups].count(SchedulerType.expr_eval) == 1
    assert len(groups) == 3
    np.testing.assert_allclose(fd.execute([x, i])[0], np.exp(-x[i]), rtol=1e-6)
