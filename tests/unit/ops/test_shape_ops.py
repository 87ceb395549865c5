"""Shape ops against NumPy: broadcast_in_dim, broadcast, squeeze, permute, reshape,
expand, set and segment_set, and shapes built from size / shape / tensor_sizes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

from ._helpers import MAIN_DTYPES, as_float64, assert_close, random_array, run_fusion, run_one


def rand(shape: tuple[int, ...], dtype: DataType = DataType.Float, seed: int = 0) -> np.ndarray:
    return random_array(np.random.default_rng(seed), shape, dtype)


# -- broadcast_in_dim and broadcast ----------------------------------------------------


@pytest.mark.parametrize(
    ("in_shape", "out_shape", "dims"),
    [
        ((3,), (2, 3), [1]),
        ((3,), (3, 2), [0]),
        ((3,), (2, 3, 4), [1]),
        ((2, 3), (5, 2, 3), [1, 2]),
        ((2, 3), (2, 4, 3), [0, 2]),
        ((1, 3), (4, 3), [0, 1]),
        ((2, 1), (2, 5), [0, 1]),
        ((2, 3), (2, 3), [0, 1]),
        ((), (2, 3), []),
    ],
    ids=str,
)
def test_broadcast_in_dim(in_shape: tuple[int, ...], out_shape: tuple[int, ...], dims: list[int]) -> None:
    x = rand(in_shape, seed=len(out_shape))
    out, _ = run_one(lambda fd, t: fd.ops.broadcast_in_dim(t, list(out_shape), dims), x)
    expected_view = x.reshape([in_shape[dims.index(p)] if p in dims else 1 for p in range(len(out_shape))])
    np.testing.assert_array_equal(out, np.broadcast_to(expected_view, out_shape))


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_broadcast_in_dim_to_another_tensors_shape(dtype: DataType) -> None:
    bias = rand((4,), dtype, seed=1)
    x = rand((3, 4), dtype, seed=2)
    with FusionDefinition() as fd:
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        fd.add_output(fd.ops.broadcast_in_dim(b, t.shape(), [1]))
        fd.add_output(fd.ops.broadcast_in_dim(b, fd.ops.shape(t), [1]))
        fd.add_output(fd.ops.broadcast_in_dim(b, [fd.ops.size(t, 0), t.size(1)], [1]))
    for out in fd.execute([bias, x]):
        assert out.dtype == x.dtype
        np.testing.assert_array_equal(out, np.broadcast_to(bias, (3, 4)))


@pytest.mark.parametrize(
    ("in_shape", "flags"),
    [((3,), [True, False]), ((3,), [False, True]), ((2, 3), [True, False, True, False]), ((2,), [False])],
    ids=str,
)
def test_broadcast(in_shape: tuple[int, ...], flags: list[bool]) -> None:
    x = rand(in_shape)
    out, _ = run_one(lambda fd, t: fd.ops.broadcast(t, flags), x)
    np.testing.assert_array_equal(out, np.expand_dims(x, tuple(i for i, f in enumerate(flags) if f)))


def test_broadcast_then_add_is_an_outer_sum() -> None:
    a, b = rand((3,), seed=3), rand((4,), seed=4)
    out, _ = run_one(lambda fd, x, y: fd.ops.broadcast(x, [False, True]) + fd.ops.broadcast(y, [True, False]), a, b)
    assert_close(out, a.astype(np.float64)[:, None] + b.astype(np.float64)[None, :])


# -- squeeze ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "dims"),
    [((2, 1, 3), [1]), ((2, 1, 3), [-2]), ((1, 2, 1), [0, 2]), ((1, 2, 1), [2, -3]), ((1,), [0])],
    ids=str,
)
def test_squeeze(shape: tuple[int, ...], dims: list[int]) -> None:
    x = rand(shape)
    out, _ = run_one(lambda fd, t: fd.ops.squeeze(t, dims), x)
    np.testing.assert_array_equal(out, np.squeeze(x, axis=tuple(dims)))


def test_squeeze_of_a_symbolic_axis_that_is_one_at_run_time() -> None:
    x = rand((2, 1, 3))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        fd.add_output(fd.ops.squeeze(t, [1]))
    (out,) = fd.execute([x])
    np.testing.assert_array_equal(out, x[:, 0, :])


def test_squeeze_of_an_expanded_axis() -> None:
    x = rand((1, 3))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[1, -1], contiguity=[None, True])
        e = fd.ops.expand(t, [4, t.size(1)])
        fd.add_output(fd.ops.squeeze(fd.ops.slice(e, [0, 0], [1, 3]), [0]))
    (out,) = fd.execute([x])
    np.testing.assert_array_equal(out, x[0])


# -- permute ------------------------------------------------------------------------


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))), ids=str)
def test_permute(perm: tuple[int, ...]) -> None:
    x = rand((2, 3, 4))
    out, _ = run_one(lambda fd, t: fd.ops.permute(t, list(perm)), x)
    np.testing.assert_array_equal(out, np.transpose(x, perm))


def test_permute_with_negative_dims() -> None:
    x = rand((2, 3, 4))
    out, _ = run_one(lambda fd, t: fd.ops.permute(t, [-1, 0, -2]), x)
    np.testing.assert_array_equal(out, np.transpose(x, (2, 0, 1)))


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_permute_then_elementwise(dtype: DataType) -> None:
    a, b = rand((2, 3), dtype, seed=5), rand((3, 2), dtype, seed=6)
    out, _ = run_one(lambda fd, x, y: fd.ops.maximum(fd.ops.permute(x, [1, 0]), y), a, b)
    np.testing.assert_array_equal(as_float64(out), np.maximum(as_float64(a).T, as_float64(b)))


# -- reshape ------------------------------------------------------------------------


RESHAPES = [
    ((2, 3, 4), [24]),
    ((2, 3, 4), [6, 4]),
    ((2, 3, 4), [2, 12]),
    ((2, 3, 4), [4, 3, 2]),
    ((2, 3, 4), [4, -1, 2]),
    ((2, 3, 4), [-1]),
    ((2, 3, 4), [1, 6, 1, 4]),
    ((2, 3, 4), [3, 8]),
    ((6,), [2, 3]),
    ((6,), [3, -1]),
    ((1, 6), [6]),
    ((2, 1, 3), [3, 1, 2]),
    ((4, 6), [2, 2, 2, 3]),
]


@pytest.mark.parametrize(("in_shape", "new_shape"), RESHAPES, ids=str)
@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
def test_reshape(in_shape: tuple[int, ...], new_shape: list[int], static: bool) -> None:
    x = rand(in_shape)
    out, _ = run_one(lambda fd, t: fd.ops.reshape(t, new_shape), x, static=static)
    np.testing.assert_array_equal(out, x.reshape(new_shape))


def test_static_reshape_is_decided_at_definition() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[2, 3, 4], contiguity=[True, True, True])
        r = fd.ops.reshape(t, [4, -1, 2])
        fd.add_output(r)
    ir = fd.fusion_ir()
    assert "= view( T0_g[ iS0{2}, iS1{3}, iS2{4} ] )" in ir
    assert "{4}rf" in ir and "{3}rf" in ir and "{2}rf" in ir
    assert "?" not in ir  # nothing Symbolic left for concretization


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_reshape_with_sizes_from_size_and_tensor_sizes(dtype: DataType) -> None:
    x = rand((2, 3, 4), dtype)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=dtype)
        s0, s1, s2 = fd.ops.tensor_sizes(t)
        fd.add_output(fd.ops.reshape(t, [s0 * s1, s2]))
        fd.add_output(fd.ops.reshape(t, [fd.ops.size(t, 0), -1]))
        fd.add_output(fd.ops.reshape(t, [t.size(-1), t.size(0) * t.size(1)]))
    merged, tail, swapped = fd.execute([x])
    np.testing.assert_array_equal(merged, x.reshape(6, 4))
    np.testing.assert_array_equal(tail, x.reshape(2, 12))
    np.testing.assert_array_equal(swapped, x.reshape(4, 6))
    assert merged.dtype == tail.dtype == swapped.dtype == x.dtype


def test_reshape_of_a_symbolic_input_follows_each_run() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(fd.ops.reshape(t, [-1]))
        fd.add_output(fd.ops.reshape(t, [t.size(1), t.size(0)]))
    for shape in [(2, 3), (4, 5), (1, 7)]:
        x = rand(shape, seed=shape[0])
        flat, flipped = fd.execute([x])
        np.testing.assert_array_equal(flat, x.reshape(-1))
        np.testing.assert_array_equal(flipped, x.reshape(shape[1], shape[0]))


def test_view_is_reshape() -> None:
    x = rand((2, 6))
    out, _ = run_one(lambda fd, t: fd.ops.view(t, [3, 4]), x)
    np.testing.assert_array_equal(out, x.reshape(3, 4))


# -- expand -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("in_shape", "shape", "expected"),
    [
        ((1, 4), [3, 4], (3, 4)),
        ((1, 4), [3, -1], (3, 4)),
        ((2, 1), [-1, 5], (2, 5)),
        ((1, 1), [2, 3], (2, 3)),
        ((4,), [2, 3, 4], (2, 3, 4)),
        ((3, 4), [3, 4], (3, 4)),
    ],
    ids=str,
)
def test_expand(in_shape: tuple[int, ...], shape: list[int], expected: tuple[int, ...]) -> None:
    x = rand(in_shape)
    out, _ = run_one(lambda fd, t: fd.ops.expand(t, shape), x)
    np.testing.assert_array_equal(out, np.broadcast_to(x, expected))


def test_expand_to_sizes_of_another_tensor() -> None:
    row, x = rand((1, 4), seed=1), rand((3, 4), seed=2)
    with FusionDefinition() as fd:
        r = fd.define_tensor(shape=[1, -1], contiguity=[None, True])
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        e = fd.ops.expand(r, t.shape())
        fd.add_output(e)
        fd.add_output(e + t)
        fd.add_output(fd.ops.expand(r, [fd.ops.size(t, 0), -1]))
    expanded, added, by_size = fd.execute([row, x])
    np.testing.assert_array_equal(expanded, np.broadcast_to(row, (3, 4)))
    assert_close(added, row.astype(np.float64) + x)
    np.testing.assert_array_equal(by_size, np.broadcast_to(row, (3, 4)))


def test_expanded_input_defined_with_contiguity_none() -> None:
    """A -1 size with contiguity None is an expanded broadcast: stride 0 on that axis."""
    row = rand((1, 4))
    x = np.broadcast_to(row, (3, 4))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[None, True])
        fd.add_output(t * 2.0)
        fd.add_output(fd.ops.sum(t, dims=[0]))
    doubled, summed = fd.execute([x])
    np.testing.assert_array_equal(doubled, x * 2)
    assert_close(summed, 3 * row[0].astype(np.float64))


# -- set and segment_set ------------------------------------------------------------


@pytest.mark.parametrize("name", ["set", "segment_set"])
@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_set_copies(name: str, dtype: DataType) -> None:
    x = rand((3, 4), dtype)
    out, fd = run_one(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)
    assert not np.shares_memory(out, x)
    assert ("SegmenterSet(" if name == "segment_set" else "Set(") in fd.fusion_ir()


def test_shape_returns_extents_of_each_axis() -> None:
    x = rand((2, 3, 4))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        shape = fd.ops.shape(t)
        assert len(shape) == 3
        for s in shape:
            fd.add_output(s)
        fd.add_output(fd.ops.size(t, -1) * 10)
    assert fd.execute([x]) == [2, 3, 4, 40]


def test_outputs_of_several_shape_ops() -> None:
    x = rand((2, 3))
    outs, _ = run_fusion(
        lambda fd, t: [fd.ops.permute(t, [1, 0]), fd.ops.reshape(t, [3, 2]), fd.ops.broadcast(t, [False, True, False])],
        [x],
    )
    np.testing.assert_array_equal(outs[0], x.T)
    np.testing.assert_array_equal(outs[1], x.reshape(3, 2))
    np.testing.assert_array_equal(outs[2], x[:, None, :])


@pytest.mark.parametrize("new_shape", [[12], [2, 6], [6, 2], [3, 2, 2], [-1]], ids=str)
@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
def test_reshape_of_an_expanded_tensor_reads_every_element(new_shape: list[int], static: bool) -> None:
    row = rand((1, 4))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[1, 4] if static else [1, -1], contiguity=[None, True])
        expanded = fd.ops.expand(t, [3, 4] if static else [3, t.size(1)])
        fd.add_output(fd.ops.reshape(expanded, new_shape))
    (out,) = fd.execute([row])
    np.testing.assert_array_equal(out, np.broadcast_to(row, (3, 4)).reshape(new_shape))


# -- reshape to a constant 1: a Broadcast axis, as in nvFuser (issue 12, item 6) --------


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
def test_channel_parameter_reshaped_to_one_c_one_one_then_broadcast(dtype: DataType) -> None:
    """A per-channel parameter [C] reshaped to [1, C, 1, 1] and broadcast to the
    activation's shape, as every batch-norm backward does."""
    rng = np.random.default_rng(5)
    w = random_array(rng, (3,), dtype)
    x = random_array(rng, (2, 3, 5, 7), dtype)
    with FusionDefinition() as fd:
        tw = fd.define_tensor([-1], dtype=dtype)
        tx = fd.define_tensor([-1, -1, -1, -1], dtype=dtype)
        r = fd.ops.reshape(tw, [1, fd.ops.size(tx, 1), 1, 1])
        b = fd.ops.broadcast_in_dim(r, fd.ops.shape(tx), [0, 1, 2, 3])
        fd.add_output(fd.ops.mul(tx, b))
    view_line = next(line for line in fd.fusion_ir().splitlines() if "= view(" in line)
    assert view_line.startswith("T2_l[ bS") and ", bS8{1}rf, bS9{1}rf ]" in view_line
    out = fd.execute([w, x])[0]
    expected = as_float64(x) * as_float64(w).reshape(1, 3, 1, 1)
    assert_close(out, expected, dtype if not dtype.is_reduced_float else DataType.Float)


def test_reshape_to_one_then_expand_to_a_static_shape() -> None:
    rng = np.random.default_rng(6)
    w = random_array(rng, (5,), DataType.Float)
    with FusionDefinition() as fd:
        tw = fd.define_tensor([-1])
        r = fd.ops.reshape(tw, [1, -1])
        fd.add_output(fd.ops.expand(r, [4, 5]))
    out = fd.execute([w])[0]
    np.testing.assert_array_equal(out, np.broadcast_to(w, (4, 5)))


def test_dynamic_reshape_to_only_ones_is_still_concretized() -> None:
    """All new sizes constant (so no Symbolic axis), but the input size is known only
    at run time: the reshape is still checked, and concretized, per run."""
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1])
        fd.add_output(fd.ops.reshape(t, [1, 1]))
    np.testing.assert_array_equal(fd.execute([np.array([2.5], np.float32)])[0], [[2.5]])
    with pytest.raises(FuserError) as info:
        fd.execute([np.arange(3, dtype=np.float32)])
    assert info.value.op == "reshape"
