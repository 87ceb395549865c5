"""matmul and linear: torch's shape rules (1-D operands, batch broadcasting), the
output domain nvFuser builds (batch axes combined like element-wise axes, a trailing
rK), values against np.matmul, definition-time errors and nvFuser's printed form."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import assert_close, random_array

RNG_SEED = 11


def define(fd: FusionDefinition, shape: tuple[int, ...], dtype: DataType = DataType.Float) -> Any:
    """Size-1 axes are broadcasts (as torch broadcasts them); the rest symbolic."""
    return fd.define_tensor(
        shape=[1 if s == 1 else -1 for s in shape], contiguity=[None if s == 1 else True for s in shape], dtype=dtype
    )


def run_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[np.ndarray, Any, list[np.ndarray]]:
    rng = np.random.default_rng(RNG_SEED)
    a, b = random_array(rng, a_shape, DataType.Float), random_array(rng, b_shape, DataType.Float)
    with FusionDefinition() as fd:
        out = fd.ops.matmul(define(fd, a_shape), define(fd, b_shape))
        fd.add_output(out)
    (result,) = fd.execute([a, b])
    return result, out, [a, b]


# The cases of torch.matmul's documentation.
MATMUL_SHAPES = [
    ((3,), (3,)),  # dot product: 0-D
    ((2, 3), (3,)),  # matrix-vector
    ((3,), (3, 4)),  # vector-matrix: the prepended 1 is removed
    ((2, 3), (3, 4)),  # matrix-matrix
    ((5, 2, 3), (3,)),  # batched matrix-vector
    ((3,), (5, 3, 4)),  # vector-batched matrix
    ((5, 2, 3), (3, 4)),  # batched with a broadcast matrix
    ((2, 3), (5, 3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((1, 2, 3), (4, 3, 5)),  # a's batch axis broadcasts to b's
    ((4, 2, 3), (1, 3, 5)),
    ((6, 1, 2, 3), (7, 3, 5)),  # batch [6, 1] with [7] is [6, 7]
    ((7, 1, 2, 3), (1, 5, 3, 4)),
]


@pytest.mark.parametrize(("a_shape", "b_shape"), MATMUL_SHAPES, ids=str)
def test_matmul_matches_numpy(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    result, out, (a, b) = run_matmul(a_shape, b_shape)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert result.shape == expected.shape
    assert out.ndim == expected.ndim
    assert_close(result, expected, DataType.Float)


def test_batch_axis_broadcast_in_a_takes_b_size() -> None:
    """The reviewer's case: a=[1,2,3] @ b=[4,3,5] has a batch axis of 4, so a sum
    over it adds four products."""
    with FusionDefinition() as fd:
        z = fd.ops.matmul(define(fd, (1, 2, 3)), define(fd, (4, 3, 5)))
        fd.add_output(z)
        fd.add_output(fd.ops.sum(z, [0]))
    ir = fd.fusion_ir()
    assert "T2_g[ iS6{i4}, iS7{i1}, iS8{i6}, rS9{i2} ]" in ir  # b's batch axis, M, N, rK
    product, total = fd.execute([np.ones((1, 2, 3), np.float32), np.ones((4, 3, 5), np.float32)])
    assert product.shape == (4, 2, 5)
    np.testing.assert_array_equal(total, np.full((2, 5), 12.0, np.float32))


def test_matmul_output_domain() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, -1], [True, True])
        b = fd.define_tensor([-1, -1], [True, True])
        v = fd.define_tensor([-1], [True])
        mm = fd.ops.matmul(a, b)
        mv = fd.ops.matmul(a, v)
        vv = fd.ops.matmul(v, v)
    assert mm.tv.to_string() == "T3_l[ iS5{i0}, iS6{i4}, rS7{i1} ]"
    assert mv.tv.to_string() == "T4_l[ iS8{i0}, rS9{i1} ]"
    assert vv.tv.to_string() == "T5_l[ rS10{i5} ]"
    assert (mm.ndim, mv.ndim, vv.ndim) == (2, 1, 0)


def test_broadcast_k_gives_no_reduction_axis() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, 1], [True, None])
        b = fd.define_tensor([1, -1], [None, True])
        out = fd.ops.matmul(a, b)
        assert out.tv.to_string() == "T2_l[ iS4{i0}, iS5{i3} ]"
        fd.add_output(out)
    x, y = np.array([[2.0], [3.0]], np.float32), np.array([[1.0, 10.0]], np.float32)
    (result,) = fd.execute([x, y])
    np.testing.assert_array_equal(result, x @ y)


LINEAR_SHAPES = [
    ((2, 3), (4, 3), (4,)),
    ((2, 3), (4, 3), ()),
    ((2, 3), (4, 3), None),
    ((5, 2, 3), (4, 3), (4,)),
    ((3,), (4, 3), (4,)),
    ((2, 3), (3,), None),  # a 1-D weight: the out_features axis disappears
    ((5, 2, 3), (3,), None),
    ((3,), (3,), None),
]


@pytest.mark.parametrize(("a_shape", "w_shape", "bias_shape"), LINEAR_SHAPES, ids=str)
def test_linear_matches_numpy(
    a_shape: tuple[int, ...], w_shape: tuple[int, ...], bias_shape: tuple[int, ...] | None
) -> None:
    rng = np.random.default_rng(RNG_SEED)
    shapes = [a_shape, w_shape] + ([bias_shape] if bias_shape is not None else [])
    arrays = [random_array(rng, s, DataType.Float) for s in shapes]
    with FusionDefinition() as fd:
        tensors = [define(fd, s) for s in shapes]
        out = fd.ops.linear(*tensors)
        fd.add_output(out)
    (result,) = fd.execute(arrays)
    a, w = (x.astype(np.float64) for x in arrays[:2])
    expected = np.matmul(a, w.T if w.ndim == 2 else w)
    if bias_shape is not None:
        expected = expected + arrays[2].astype(np.float64)
    assert result.shape == expected.shape
    assert out.ndim == expected.ndim
    assert_close(result, expected, DataType.Float)


def test_linear_output_domain() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, -1, -1], [True, True, True])
        w = fd.define_tensor([-1, -1], [True, True])
        bias = fd.define_tensor([-1], [True])
        out = fd.ops.linear(a, w, bias)
    assert out.tv.to_string() == "T3_l[ iS6{i0}, iS7{i1}, iS8{i4}, rS9{i2} ]"


def test_printed_like_nvfuser() -> None:
    """MatmulOp/LinearOp::toString: B indented by 12, linear's stray `  )` kept."""
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, -1], [True, True])
        w = fd.define_tensor([-1, -1], [True, True])
        bias = fd.define_tensor([-1], [True])
        fd.add_output(fd.ops.matmul(a, w))
        fd.add_output(fd.ops.linear(a, w))
        fd.add_output(fd.ops.linear(a, w, bias))
    math = fd.fusion_ir().split("%kernel_math {\n")[1]
    assert math.split("\n}")[0] + "\n" == (
        "T3_g[ iS5{i0}, iS6{i4}, rS7{i1} ]\n"
        "   = matmul(T0_g[ iS0{i0}, iS1{i1} ],\n"
        "            T1_g[ iS2{i3}, iS3{i4} ])\n"
        "T4_g[ iS8{i0}, iS9{i3}, rS10{i1} ]\n"
        "   = linear(T0_g[ iS0{i0}, iS1{i1} ],\n"
        "            T1_g[ iS2{i3}, iS3{i4} ]  )\n"
        "T5_g[ iS11{i0}, iS12{i3}, rS13{i1} ]\n"
        "   = linear(T0_g[ iS0{i0}, iS1{i1} ],\n"
        "            T1_g[ iS2{i3}, iS3{i4} ]  ,\n"
        "          T2_g[ iS4{i5} ]  )\n"
    )


@pytest.mark.parametrize(
    ("op", "shapes", "dtypes", "match"),
    [
        ("matmul", [(2, 3), ()], None, "at least one axis"),
        ("matmul", [(2, 3), (3, 4)], [DataType.Float, DataType.Half], "same dtype"),
        ("matmul", [(2, 1), (3, 4)], None, "broadcast in T0 but not in T1"),
        ("matmul", [(2, 3), (5, 4)], None, "contracted axis"),
        ("matmul", [(2, 2, 3), (5, 3, 4)], None, "batch axis 0 has size 2 in T0 but 5 in T1"),
        ("linear", [(2, 3), (4, 3, 3)], None, "1-D or 2-D"),
        ("linear", [(2, 3), (3,), (4,)], None, "needs a 2-D weight"),
        ("linear", [(2, 3), (4, 3), (4, 4)], None, "must be 0-D or 1-D"),
        ("linear", [(2, 3), (4, 3), (5,)], None, "out_features has size 4 in T1 but 5 in T2"),
        ("linear", [(2, 3), (4, 3), (4,)], [DataType.Float, DataType.Float, DataType.Double], "same dtype"),
    ],
    ids=str,
)
def test_definition_errors(op: str, shapes: list[tuple[int, ...]], dtypes: list[DataType] | None, match: str) -> None:
    dtypes = dtypes or [DataType.Float] * len(shapes)
    with pytest.raises(FuserError, match=match) as info, FusionDefinition() as fd:
        tensors = [
            fd.define_tensor(list(s), [None if d == 1 else True for d in s], dtype=dt)
            for s, dt in zip(shapes, dtypes, strict=True)
        ]
        getattr(fd.ops, op)(*tensors)
    assert info.value.op == op


def test_matmul_of_bfloat16_keeps_the_dtype() -> None:
    rng = np.random.default_rng(RNG_SEED)
    a, b = random_array(rng, (2, 3), DataType.BFloat16), random_array(rng, (3, 4), DataType.BFloat16)
    with FusionDefinition() as fd:
        out = fd.ops.matmul(define(fd, (2, 3), DataType.BFloat16), define(fd, (3, 4), DataType.BFloat16))
        fd.add_output(out)
    (result,) = fd.execute([a, b])
    assert out.dtype == DataType.BFloat16
    assert_close(result, a.astype(np.float64) @ b.astype(np.float64), DataType.BFloat16)
