"""Concretization of dynamic reshapes and resizes: the info, the concretized IR, purity."""

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.dynamic.concretization_info import compute_info
from fuser_core.dynamic.concretize import concretize
from fuser_core.dynamic.initial_info import analyze_fusion
from fuser_core.ir.printer import print_kernel
from fuser_core.runtime.arguments import bind_inputs


def reshape_with_scalars() -> FusionDefinition:
    """x[a, b, c, d] -> [a, S0, S1, -1], then relu and a sum over the last axis."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
        s0 = fd.define_scalar(None, dtype=DataType.Int)
        s1 = fd.define_scalar(None, dtype=DataType.Int)
        t1 = fd.ops.reshape(t0, [t0.size(0), s0, s1, -1])
        t2 = fd.ops.relu(t1)
        fd.add_output(t2)
        fd.add_output(fd.ops.sum(t2, dims=[3]))
    return fd


def info_for(fd: FusionDefinition, inputs, resize_extents=True):
    _, ev = bind_inputs(fd.fusion, inputs)
    return compute_info(analyze_fusion(fd.fusion), ev, resize_extents)


def test_dynamic_reshape_output_is_symbolic_until_concretized():
    fd = reshape_with_scalars()
    text = fd.fusion_ir()
    assert "= view( T0_g[" in text
    assert "?S" in text.split("= view(")[0]  # the reshape's output axes print as ?S
    x = np.ones((8, 3, 35, 9), np.float32)
    info = info_for(fd, [x, 5, 21])
    concrete = concretize(fd.fusion, info)
    printed = print_kernel(concrete)
    assert "?S" not in printed
    assert "Merge: " in printed and "Outer split: " in printed and "by factor 5" in printed


def test_minus_one_is_resolved_from_the_element_count():
    fd = reshape_with_scalars()
    x = np.random.default_rng(0).standard_normal((8, 3, 35, 9), dtype=np.float32)
    info = info_for(fd, [x, 5, 21])
    (entry,) = info.reshapes
    assert entry.out_sizes == (8, 5, 21, 9)
    assert entry.analysis.describe() == "merge(1) split(1, 5)"
    out, total = fd.execute([x, 5, 21])
    expected = np.maximum(x.reshape(8, 5, 21, 9), 0)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_allclose(total, expected.sum(axis=3), rtol=1e-5)


def test_minus_one_given_at_run_time_as_a_scalar_value():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s0 = fd.define_scalar(None, dtype=DataType.Int)
        s1 = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.reshape(t0, [s0, s1]))
    x = np.random.default_rng(1).standard_normal((6, 10), dtype=np.float32)
    (out,) = fd.execute([x, -1, 3])
    np.testing.assert_array_equal(out, x.reshape(-1, 3))
    with pytest.raises(FuserError, match="at most one -1"):
        fd.execute([x, -1, -1])


def test_a_size_one_output_axis_becomes_a_broadcast():
    fd = reshape_with_scalars()
    x = np.random.default_rng(2).standard_normal((8, 3, 35, 9), dtype=np.float32)
    info = info_for(fd, [x, 1, 105])
    assert info.reshapes[0].analysis.broadcast == (False, True, False, False)
    concrete = concretize(fd.fusion, info)
    assert any(d.is_broadcast for d in concrete.outputs[0].logical)
    out, _ = fd.execute([x, 1, 105])
    assert out.shape == (8, 1, 105, 9)


def test_an_impossible_reshape_names_the_op_and_line():
    fd = reshape_with_scalars()
    x = np.ones((8, 3, 35, 9), np.float32)
    with pytest.raises(FuserError) as err:
        fd.execute([x, 4, 4])
    assert err.value.op == "reshape"
    assert "cannot infer the -1" in str(err.value)
    assert err.value.location is not None and err.value.location.filename.endswith("test_concretization.py")


def test_concretize_is_pure():
    fd = reshape_with_scalars()
    before = print_kernel(fd.fusion)
    x = np.ones((8, 3, 35, 9), np.float32)
    concretize(fd.fusion, info_for(fd, [x, 5, 21]))
    concretize(fd.fusion, info_for(fd, [x, 3, 35]))
    assert print_kernel(fd.fusion) == before


def test_infos_compare_by_decomposition_not_by_sizes_merges_absorb():
    fd = reshape_with_scalars()
    a = info_for(fd, [np.ones((8, 3, 35, 9), np.float32), 5, 21])
    b = info_for(fd, [np.ones((4, 3, 35, 9), np.float32), 5, 21])
    c = info_for(fd, [np.ones((8, 3, 35, 9), np.float32), 3, 35])
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert c.diff(a) == ["reshape T1: [8, 5, 21, 9] -> [8, 3, 35, 9]"]


def slice_pad() -> FusionDefinition:
    """A slice with scalar bounds and a pad with scalar widths on the last axis."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        start = fd.define_scalar(None, dtype=DataType.Int)
        left = fd.define_scalar(None, dtype=DataType.Int)
        t1 = fd.ops.slice(t0, [0, start], [t0.size(0), t0.size(1)])
        t2 = fd.ops.pad(t1, [left, 0])
        fd.add_output(t2)
    return fd


def test_resize_keys_with_and_without_extents():
    fd = slice_pad()
    x = np.ones((4, 10), np.float32)
    on = info_for(fd, [x, 3, 2], resize_extents=True)
    off = info_for(fd, [x, 3, 2], resize_extents=False)
    assert [e.value_text() for e in on.resizes] == ["(10, -3, 0)", "(7, 2, 0)"]
    assert [e.value_text() for e in off.resizes] == ["Iteration", "Iteration"]
    assert on != off


def test_a_resize_by_zero_is_removed():
    fd = slice_pad()
    x = np.random.default_rng(3).standard_normal((4, 10), dtype=np.float32)
    info = info_for(fd, [x, 0, 0])
    assert all(e.is_trivial for e in info.resizes)
    concrete = concretize(fd.fusion, info)
    assert "Resize:" not in print_kernel(concrete)
    (out,) = fd.execute([x, 0, 0])
    np.testing.assert_array_equal(out, x)


def test_slice_then_pad_values():
    fd = slice_pad()
    x = np.random.default_rng(4).standard_normal((4, 10), dtype=np.float32)
    (out,) = fd.execute([x, 3, 2])
    np.testing.assert_array_equal(out, np.pad(x[:, 3:], [(0, 0), (2, 0)]))
    (out,) = fd.execute([x, -4, 1], _disable_options=["concretize_resize_extents"])
    np.testing.assert_array_equal(out, np.pad(x[:, -4:], [(0, 0), (1, 0)]))


def test_pad_that_would_make_a_negative_extent_is_a_fuser_error():
    fd = slice_pad()
    x = np.ones((4, 10), np.float32)
    with pytest.raises(FuserError, match="size -1"):
        fd.execute([x, 3, -8])


def test_chained_dynamic_reshapes_with_an_op_between():
    """The second reshape is concretized after the op between has concrete axes."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        s1 = fd.define_scalar(None, dtype=DataType.Int)
        t2 = fd.ops.reshape(t0, new_shape=[s1, -1])
        t3 = fd.ops.relu(t2)
        fd.add_output(fd.ops.reshape(t3, new_shape=[-1]))
    x = np.random.default_rng(5).standard_normal((3, 64), dtype=np.float32)
    (out,) = fd.execute([x, 4])
    np.testing.assert_array_equal(out, np.maximum(x, 0).reshape(-1))
    assert "?S" not in print_kernel(fd.executor_cache.last_runtime.fusion)


def test_reshape_then_slice_with_constant_extents():
    """A reshape's extent substitution and the resize constants chain: the slice's
    bounds end up as literals, nothing stays bound to a removed value."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=True)
        b = fd.define_scalar(None, dtype=DataType.Int)
        t = fd.define_scalar(None, dtype=DataType.Int)
        y = fd.ops.reshape(x, [b, t, -1])
        fd.add_output(fd.ops.slice(y, [0, 1, 0], [fd.ops.size(y, 0), fd.ops.size(y, 1), fd.ops.size(y, 2)]))
    data = np.random.default_rng(7).standard_normal((2, 5, 8), dtype=np.float32)
    for disable in ([], ["concretize_resize_extents"]):
        (out,) = fd.execute([data, 2, 5], _disable_options=disable)
        np.testing.assert_array_equal(out, data[:, 1:, :])


def test_constant_extents_fold_away_the_scalar_math():
    """With concretize_resize_extents the slice bounds' min/max arithmetic folds to
    constants: no scalar expression of constants is left in the concretized IR."""
    with FusionDefinition() as fd:
        q = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.slice(q, [0, 0], [4, 8]))
    fd.execute([np.ones((4, 32), np.float32)])
    printed = print_kernel(fd.executor_cache.last_runtime.fusion)
    assert "fmin" not in printed and "fmax" not in printed
    assert "= slice( T0_g[ iS" in printed and "{ {0, 4, 1} {0, 8, 1} }" in printed


def test_empty_reshapes_of_different_shapes_do_not_share_a_runtime():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        s0 = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.reshape(t0, [s0, -1]))
    x = np.zeros((0, 4), np.float32)
    assert fd.execute([x, 2])[0].shape == (2, 0)
    assert fd.execute([x, 3])[0].shape == (3, 0)
    assert not fd.executor_cache.events[-1].hit


def test_linear_after_a_dynamic_reshape():
    """Symbolic axes resolve through linear/matmul's axis mapping too."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=True)
        rows = fd.define_scalar(None, dtype=DataType.Int)
        w = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.linear(fd.ops.reshape(a, [rows, -1]), w))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 6), dtype=np.float32)
    weight = rng.standard_normal((5, 3), dtype=np.float32)
    (out,) = fd.execute([x, 8, weight])
    np.testing.assert_allclose(out, x.reshape(8, 3) @ weight.T, rtol=1e-5, atol=1e-6)
