"""Type promotion as nvFuser does it: tensors decide before scalars, half types
compute in Float with explicit casts in the IR, integer division stays integral
unless it is truediv, comparisons give Bool, integer sums give Int."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition

from ._helpers import as_float64, assert_close, output_dtype, random_array


def define(fd: FusionDefinition, kind: str, dtype: DataType):  # type: ignore[no-untyped-def]
    """A 2-D tensor, a 0-D tensor or a scalar input of `dtype`."""
    if kind == "tensor":
        return fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    if kind == "0-d":
        return fd.define_tensor(shape=[], contiguity=[], dtype=dtype)
    return fd.define_scalar(None, dtype=dtype)


def value(kind: str, dtype: DataType, seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    if kind == "tensor":
        return random_array(rng, (2, 3), dtype, 1, 4)
    if kind == "0-d":
        return random_array(rng, (), dtype, 1, 4)
    return {"bool": True, "int": 3, "float": 2.5}[dtype.value.kind]


PROMOTIONS = [
    # (lhs kind, lhs dtype, rhs kind, rhs dtype, op, result dtype)
    ("tensor", DataType.Float, "scalar", DataType.Double, "mul", DataType.Float),
    ("tensor", DataType.Float, "0-d", DataType.Double, "mul", DataType.Float),
    ("tensor", DataType.Float, "tensor", DataType.Double, "mul", DataType.Double),
    ("tensor", DataType.Half, "scalar", DataType.Double, "mul", DataType.Float),
    ("tensor", DataType.BFloat16, "tensor", DataType.BFloat16, "add", DataType.Float),
    ("tensor", DataType.Half, "tensor", DataType.Half, "add", DataType.Float),
    ("tensor", DataType.Half, "tensor", DataType.BFloat16, "add", DataType.Float),
    ("tensor", DataType.Half, "tensor", DataType.Double, "add", DataType.Double),
    ("tensor", DataType.Int, "scalar", DataType.Double, "add", DataType.Double),
    ("tensor", DataType.Int32, "scalar", DataType.Double, "add", DataType.Double),
    ("tensor", DataType.Int32, "scalar", DataType.Int, "add", DataType.Int32),
    ("tensor", DataType.Int32, "tensor", DataType.Int, "add", DataType.Int),
    ("tensor", DataType.Int, "tensor", DataType.Float, "add", DataType.Float),
    ("tensor", DataType.Int, "0-d", DataType.Double, "add", DataType.Double),
    ("tensor", DataType.Bool, "tensor", DataType.Int32, "add", DataType.Int32),
    ("tensor", DataType.Bool, "scalar", DataType.Double, "mul", DataType.Double),
    ("tensor", DataType.Bool, "tensor", DataType.Bool, "add", DataType.Bool),
    ("tensor", DataType.Int, "tensor", DataType.Int, "truediv", DataType.Float),
    ("tensor", DataType.Int32, "scalar", DataType.Int, "truediv", DataType.Float),
    ("tensor", DataType.Double, "tensor", DataType.Double, "truediv", DataType.Double),
    ("tensor", DataType.Int, "tensor", DataType.Int, "div", DataType.Int),
    ("scalar", DataType.Double, "tensor", DataType.Float, "sub", DataType.Float),
    ("scalar", DataType.Int, "tensor", DataType.BFloat16, "sub", DataType.Float),
    ("tensor", DataType.Float, "tensor", DataType.Int32, "atan2", DataType.Float),
    ("tensor", DataType.Int, "tensor", DataType.Int, "atan2", DataType.Float),
    ("scalar", DataType.Double, "scalar", DataType.Int, "mul", DataType.Double),
    ("scalar", DataType.Int, "scalar", DataType.Int, "truediv", DataType.Float),
]


def _py_type(dtype: DataType) -> type:
    return {"bool": bool, "int": int, "float": float}[dtype.value.kind]


@pytest.mark.parametrize(("lkind", "ldtype", "rkind", "rdtype", "op", "want"), PROMOTIONS, ids=str)
def test_binary_promotion(lkind: str, ldtype: DataType, rkind: str, rdtype: DataType, op: str, want: DataType) -> None:
    lhs, rhs = value(lkind, ldtype, 1), value(rkind, rdtype, 2)
    with FusionDefinition() as fd:
        a, b = define(fd, lkind, ldtype), define(fd, rkind, rdtype)
        out = getattr(fd.ops, op)(a, b)
        fd.add_output(out)
    assert out.dtype == want
    (result,) = fd.execute([lhs, rhs])
    ref = {"mul": np.multiply, "add": np.add, "sub": np.subtract, "truediv": np.divide, "atan2": np.arctan2}
    if isinstance(result, np.ndarray):
        assert output_dtype(result) == want
    else:
        assert type(result) is _py_type(want)
    if op == "div":
        np.testing.assert_array_equal(result, np.trunc(lhs / rhs))
    elif want.is_floating:
        assert_close(result, ref[op](as_float64(lhs), as_float64(rhs)), want)
    else:
        np.testing.assert_array_equal(result, ref[op](lhs, rhs))


@pytest.mark.parametrize(
    ("dtype", "cast"),
    [(DataType.BFloat16, "__bfloat2float"), (DataType.Half, "__half2float")],
    ids=lambda v: getattr(v, "name", v),
)
def test_half_types_compute_in_float_with_explicit_casts(dtype: DataType, cast: str) -> None:
    x = random_array(np.random.default_rng(3), (2, 3), dtype)
    y = random_array(np.random.default_rng(4), (2, 3), dtype)
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        out = a + b
        fd.add_output(out)
        fd.add_output(fd.ops.cast(out, dtype))
    ir = fd.fusion_ir()
    assert ir.count(f"= {cast}(T") == 2  # one cast per operand
    assert f"__float2{cast.split('2')[0].removeprefix('__')}(" in ir  # and the explicit cast back
    math_lines = ir.split("%kernel_math {")[1]
    assert math_lines.index(cast) < math_lines.index(" + ")
    wide, narrow = fd.execute([x, y])
    assert wide.dtype == np.float32
    assert output_dtype(narrow) == dtype
    assert_close(wide, as_float64(x) + as_float64(y), DataType.Float)
    assert_close(narrow, as_float64(x) + as_float64(y), dtype)


def test_float_tensor_times_double_scalar_has_no_cast() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True])
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(t * s)
    ir = fd.fusion_ir()
    assert "(float)" not in ir and "(double)" not in ir
    assert "* d" in ir
    (out,) = fd.execute([np.array([1.5, -2.0], np.float32), 0.1])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.array([0.15, -0.2], np.float32), rtol=1e-6)


def test_int_tensor_plus_double_scalar_casts_the_tensor() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(t + 0.5)
    assert "= (double)(T0_g" in fd.fusion_ir()
    (out,) = fd.execute([np.array([1, -2, 3])])
    np.testing.assert_array_equal(out, [1.5, -1.5, 3.5])
    assert out.dtype == np.float64


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
@pytest.mark.parametrize(
    ("ldtype", "rdtype"),
    [
        (DataType.Float, DataType.Double),
        (DataType.Half, DataType.Half),
        (DataType.BFloat16, DataType.Float),
        (DataType.Int32, DataType.Float),
        (DataType.Int, DataType.Bool),
        (DataType.Bool, DataType.Bool),
    ],
    ids=str,
)
def test_comparisons_give_bool(op: str, ldtype: DataType, rdtype: DataType) -> None:
    rng = np.random.default_rng(5)
    a, b = random_array(rng, (3, 4), ldtype, -2, 2), random_array(rng, (3, 4), rdtype, -2, 2)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=ldtype)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=rdtype)
        fd.add_output(getattr(fd.ops, op)(x, y))
        fd.add_output(getattr(fd.ops, op)(x, 1))
    tensor_cmp, literal_cmp = fd.execute([a, b])
    ref: Callable = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater}.get(
        op, np.greater_equal
    )
    assert tensor_cmp.dtype == literal_cmp.dtype == np.bool_
    np.testing.assert_array_equal(tensor_cmp, ref(as_float64(a), as_float64(b)))
    np.testing.assert_array_equal(literal_cmp, ref(as_float64(a), 1.0))


@pytest.mark.parametrize(
    ("dtype", "op", "want"),
    [
        (DataType.Int32, "sum", DataType.Int),
        (DataType.Bool, "sum", DataType.Int),
        (DataType.Int32, "prod", DataType.Int),
        (DataType.Int32, "max", DataType.Int32),
        (DataType.Half, "sum", DataType.Half),
        (DataType.Float, "sum", DataType.Float),
    ],
    ids=str,
)
def test_reduction_result_types(dtype: DataType, op: str, want: DataType) -> None:
    x = random_array(np.random.default_rng(6), (3, 4), dtype, -2, 2)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        out = getattr(fd.ops, op)(t, dims=[1])
        fd.add_output(out)
    assert out.dtype == want
    (result,) = fd.execute([x])
    assert output_dtype(result) == want
    np_op = {"sum": np.sum, "prod": np.prod, "max": np.max}[op]
    expected = np_op(x.astype(np.int64) if not dtype.is_floating else as_float64(x), axis=1)
    assert_close(result, expected, want)


def test_scalar_only_arithmetic_folds_constants() -> None:
    with FusionDefinition() as fd:
        two = fd.define_scalar(2.0)
        three = fd.define_scalar(3)
        folded = two * three + 1
        fd.add_output(folded)
    assert folded.dtype == DataType.Double
    assert folded.val.is_const and folded.val.value == 7.0
    assert "%kernel_math {\n}" in fd.fusion_ir()  # nothing left to compute
    assert "double(7)" in fd.fusion_ir()
    assert fd.execute([]) == [7.0]


def test_scalar_inputs_compute_at_run_time() -> None:
    with FusionDefinition() as fd:
        d = fd.define_scalar(None, dtype=DataType.Double)
        i = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(d * i + 2)
        fd.add_output(i * 4 - 1)
        fd.add_output(i / 2)
        fd.add_output(fd.ops.truediv(i, 2))
        fd.add_output(i % 3)
        fd.add_output(-d)
        fd.add_output(d > 1.0)
    ir = fd.fusion_ir()
    assert "= (double)(i" in ir  # the Int input is cast to Double explicitly
    outs = fd.execute([2.5, 7])
    assert outs == [19.5, 27, 3, 3.5, 1, -2.5, True]
    assert [type(o) for o in outs] == [float, int, int, float, int, float, bool]
    outs = fd.execute([-1.0, -7])
    assert outs == [9.0, -29, -3, -3.5, -1, 1.0, False]


def test_scalar_and_tensor_mix() -> None:
    x = random_array(np.random.default_rng(7), (2, 3), DataType.Float)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(t * (s + 1.0) - s)
    (out,) = fd.execute([x, 0.5])
    assert out.dtype == np.float32
    assert_close(out, as_float64(x) * 1.5 - 0.5)
