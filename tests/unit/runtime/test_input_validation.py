"""Execution-time input validation: a wrong input count, dtype, rank, size or layout
is a FuserError that says which input and why, before anything runs."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition


def make_fusion(
    shape: list[int],
    contiguity: list[bool | None],
    dtype: DataType = DataType.Float,
    stride_order: list[int] | None = None,
) -> FusionDefinition:
    """T0 (as given) * i1 (an Int scalar input)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=shape, contiguity=contiguity, dtype=dtype, stride_order=stride_order)
        s1 = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(t0 * s1)
    return fd


def rand(shape: tuple[int, ...], dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


def run_error(fd: FusionDefinition, inputs: list) -> FuserError:  # type: ignore[type-arg]
    with pytest.raises(FuserError) as info:
        fd.execute(inputs)
    return info.value


@pytest.fixture
def symbolic() -> FusionDefinition:
    return make_fusion([-1, -1], [True, True])


def test_valid_inputs_run(symbolic: FusionDefinition) -> None:
    x = rand((3, 4))
    (out,) = symbolic.execute([x, 3])
    np.testing.assert_array_equal(out, x * 3)


@pytest.mark.parametrize("count", [0, 1, 3])
def test_wrong_input_count(symbolic: FusionDefinition, count: int) -> None:
    inputs = [rand((3, 4)), 2, 5][:count]
    err = run_error(symbolic, inputs)
    assert "expected 2 inputs" in err.message
    assert f"got {count}" in err.message
    assert "T0" in err.message and "i" in err.message  # names what the fusion expects


@pytest.mark.parametrize("np_dtype", [np.float64, np.float16, np.int64, np.int32, np.bool_])
def test_wrong_tensor_dtype(symbolic: FusionDefinition, np_dtype: type) -> None:
    err = run_error(symbolic, [rand((3, 4)).astype(np_dtype), 2])
    assert "input 0 (T0)" in err.message
    assert "DataType.Float" in err.message  # what the fusion defines
    assert "dtype" in err.message


def test_unsupported_array_dtype_names_the_input(symbolic: FusionDefinition) -> None:
    err = run_error(symbolic, [rand((3, 4)).astype(np.uint8), 2])
    assert "input 0 (T0)" in err.message
    assert "uint8" in err.message


@pytest.mark.parametrize("shape", [(12,), (3, 4, 1), ()])
def test_wrong_rank(symbolic: FusionDefinition, shape: tuple[int, ...]) -> None:
    err = run_error(symbolic, [rand(shape), 2])
    assert "input 0 (T0)" in err.message
    assert f"has {len(shape)} dimensions" in err.message
    assert "defines 2" in err.message


def test_a_scalar_where_a_tensor_belongs(symbolic: FusionDefinition) -> None:
    err = run_error(symbolic, [1.5, 2])
    assert "input 0 (T0) must be a tensor" in err.message
    assert "float" in err.message


def test_a_list_is_not_a_tensor(symbolic: FusionDefinition) -> None:
    err = run_error(symbolic, [[[1.0, 2.0]], 2])
    assert "input 0 (T0) must be a tensor" in err.message
    assert "list" in err.message


def test_a_tensor_where_a_scalar_belongs(symbolic: FusionDefinition) -> None:
    err = run_error(symbolic, [rand((3, 4)), rand((3, 4))])
    assert "input 1" in err.message
    assert "must be a scalar" in err.message and "DataType.Int" in err.message


@pytest.mark.parametrize("value", [1.5, True])
def test_a_scalar_of_the_wrong_kind(symbolic: FusionDefinition, value: object) -> None:
    err = run_error(symbolic, [rand((3, 4)), value])
    assert "input 1" in err.message
    assert "DataType.Int" in err.message
    assert repr(value) in err.message


def test_scalars_of_compatible_kinds_are_accepted() -> None:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        d = fd.define_scalar(None, dtype=DataType.Double)
        i = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(t0 * d + i)
    x = rand((3,))
    for d_value, i_value in [(2, 1), (np.float64(2.0), np.int64(1)), (np.float32(2.0), np.int32(1))]:
        (out,) = fd.execute([x, d_value, i_value])
        np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)


def test_a_size_that_contradicts_a_static_axis() -> None:
    fd = make_fusion([3, 4], [True, True])
    (out,) = fd.execute([rand((3, 4)), 2])
    assert out.shape == (3, 4)
    err = run_error(fd, [rand((3, 5)), 2])
    assert "input 0 (T0)" in err.message
    assert "axis 1" in err.message
    assert "size 5" in err.message and "4" in err.message


def test_a_symbolic_axis_tied_to_a_static_one_must_have_its_size() -> None:
    """Kernels index an axis by the constant of a static axis the ops tie it to, so the
    runtime refuses an input whose size there differs, naming the op."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, 6], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t1))
    a, b = rand((3, 6)), rand((3, 6), seed=1)
    (out,) = fd.execute([a, b])
    np.testing.assert_allclose(out, a + b)
    err = run_error(fd, [rand((3, 5)), rand((3, 6))])
    assert err.op == "add"
    assert "input 0 (T0) axis 1 has size 5" in err.message and "has size 6" in err.message


def test_an_expand_of_an_iterated_axis_to_another_size_names_expand() -> None:
    """expand([-1, 8]) of an input whose axis 1 is not a broadcast is a copy that ties the
    axis to 8: an input of another width is refused naming expand (not the copy's set)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.expand(t0, shape=[-1, 8]))
    x = rand((5, 8))
    (out,) = fd.execute([x])
    np.testing.assert_allclose(out, x)
    err = run_error(fd, [rand((5, 3))])
    assert err.op == "expand"
    assert "input 0 (T0) axis 1 has size 3" in err.message and "has size 8" in err.message


@pytest.mark.parametrize("tied_to", ["static", "input"])
def test_a_size_from_a_scalar_input_must_fit_the_axis_it_is_combined_with(tied_to: str) -> None:
    """iota(n) broadcast along x's rows and added: kernels index that axis by x's width
    (or the static 6), so an n of another value is refused naming the op, not computed
    as if n were the width."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(
            shape=[-1, 6 if tied_to == "static" else -1], contiguity=[True, True], dtype=DataType.Float
        )
        n = fd.define_scalar(dtype=DataType.Int)
        ramp = fd.ops.iota(n, fd.define_scalar(0), fd.define_scalar(1), dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, fd.ops.broadcast_in_dim(ramp, shape=x.shape(), broadcast_dims=[1])))
    a = rand((3, 6))
    (out,) = fd.execute([a, 6])
    np.testing.assert_allclose(out, a + np.arange(6, dtype=np.float32))
    err = run_error(fd, [a, 4])
    assert err.op == "add"
    assert "an axis of size 4, from the scalar inputs, is combined with one of size 6" in err.message
    if tied_to == "input":
        assert "(input 0 (T0) axis 1)" in err.message


def test_a_pad_made_static_by_concretization_ties_the_other_operand() -> None:
    """With concretize_resize_extents (the default) a pad by scalar widths has a static
    extent once the widths are known: the tensor it is multiplied with must have it."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        left, right = fd.define_scalar(None, dtype=DataType.Int), fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.mul(t1, fd.ops.pad(t0, [left, right])))
    x, y = rand((3, 4)), rand((3, 7), seed=1)
    (out,) = fd.execute([x, y, 1, 2])
    np.testing.assert_allclose(out, y * np.pad(x, [(0, 0), (1, 2)]))
    err = run_error(fd, [x, rand((3, 8)), 1, 2])
    assert err.op == "mul"
    assert "input 1 (T1) axis 1 has size 8" in err.message and "has size 7" in err.message
    (out,) = fd.execute([x, rand((3, 8), seed=2), 2, 2])  # other widths: another concretization
    assert out.shape == (3, 8)


def test_a_size_that_contradicts_a_broadcast_axis() -> None:
    fd = make_fusion([1, -1], [None, True])
    (out,) = fd.execute([rand((1, 4)), 2])
    assert out.shape == (1, 4)
    err = run_error(fd, [rand((3, 4)), 2])
    assert "input 0 (T0)" in err.message
    assert "axis 0" in err.message and "size 3" in err.message
    assert "broadcast" in err.message


@pytest.mark.parametrize(
    "make",
    [lambda x: x.T, lambda x: x[:, ::2], lambda x: x[::2, :], lambda x: np.asfortranarray(x)],
    ids=["transposed", "strided-inner", "strided-outer", "fortran"],
)
def test_a_non_contiguous_input_declared_contiguous(make) -> None:  # type: ignore[no-untyped-def]
    fd = make_fusion([-1, -1], [True, True])
    x = make(rand((6, 6)))
    assert not x.flags.c_contiguous
    err = run_error(fd, [x, 2])
    assert "input 0 (T0)" in err.message
    assert "stride" in err.message and "contiguous" in err.message


def test_a_non_contiguous_input_declared_non_contiguous_runs() -> None:
    fd = make_fusion([-1, -1], [False, True])
    x = rand((6, 8))[:, :5]
    (out,) = fd.execute([x, 2])
    np.testing.assert_array_equal(out, x * 2)


def test_stride_order_declares_the_memory_layout() -> None:
    fd = make_fusion([-1, -1], [True, True], stride_order=[0, 1])  # column-major
    x = rand((3, 4))
    (out,) = fd.execute([np.asfortranarray(x), 2])
    np.testing.assert_array_equal(out, x * 2)
    err = run_error(fd, [x, 2])
    assert "input 0 (T0)" in err.message
    assert "stride" in err.message


def test_an_expanded_input_has_stride_zero() -> None:
    fd = make_fusion([-1, -1], [None, True])
    row = rand((1, 4))
    (out,) = fd.execute([np.broadcast_to(row, (3, 4)), 2])
    np.testing.assert_array_equal(out, np.broadcast_to(row, (3, 4)) * 2)


def test_the_second_input_is_named() -> None:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        t1 = fd.define_tensor(shape=[-1, 4], contiguity=[True, True], dtype=DataType.Half)
        fd.add_output(t0 + t1)
    x = rand((3, 4))
    err = run_error(fd, [x, x])
    assert "input 1 (T1)" in err.message and "DataType.Half" in err.message
    err = run_error(fd, [x, rand((3, 5)).astype(np.float16)])
    assert "input 1 (T1)" in err.message and "axis 1" in err.message


def test_a_failed_execution_leaves_the_fusion_usable(symbolic: FusionDefinition) -> None:
    run_error(symbolic, [rand((3, 4)).astype(np.float64), 2])
    x = rand((2, 5))
    (out,) = symbolic.execute([x, -1])
    np.testing.assert_array_equal(out, -x)


def test_execute_before_the_definition_is_complete() -> None:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.add_output(t0)
        with pytest.raises(FuserError, match="complete definition"):
            fd.execute([rand((3,))])


def test_empty_inputs_have_no_layout_to_contradict() -> None:
    """NumPy gives empty arrays zero strides; contiguity cannot be wrong without elements."""
    fd = make_fusion([-1, -1], [True, True])
    for shape in [(0, 3), (3, 0), (0, 0)]:
        (out,) = fd.execute([np.zeros(shape, np.float32), 2])
        assert out.shape == shape
        assert out.dtype == np.float32


def test_an_axis_that_may_become_a_broadcast_ties_nothing_before_concretization() -> None:
    """r = reshape(t0, [s0, s1]) with s1 = 1 at run time: r's axis 1 is a broadcast, so t1's
    static 8 and t2's 5 are not tied through it."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, 8], contiguity=[True, True], dtype=DataType.Float)
        t2 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s0, s1 = fd.define_scalar(None, dtype=DataType.Int), fd.define_scalar(None, dtype=DataType.Int)
        r = fd.ops.reshape(t0, [s0, s1])
        fd.add_output(fd.ops.add(r, t1))
        fd.add_output(fd.ops.add(r, t2))
    x, y, z = rand((3,)), rand((3, 8), seed=1), rand((3, 5), seed=2)
    a, b = fd.execute([x, y, z, 3, 1])
    np.testing.assert_allclose(a, x[:, None] + y)
    np.testing.assert_allclose(b, x[:, None] + z)
    err = run_error(fd, [rand((24,)), y, z, 3, 8])  # s1 = 8: now r's axis 1 ties t2's 5 to 8
    assert " has size 5" in err.message and "8" in err.message


def test_two_static_sizes_in_one_set_are_an_error_naming_the_op() -> None:
    with FusionDefinition() as fd:
        t0, t1, t3 = (fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float) for _ in range(3))
        left, right = fd.define_scalar(None, dtype=DataType.Int), fd.define_scalar(None, dtype=DataType.Int)
        a, b = fd.ops.pad(t0, [left, right]), fd.ops.pad(t3, [left, right])
        fd.add_output(fd.ops.add(fd.ops.add(a, t1), b))
    err = run_error(fd, [rand((4,)), rand((7,)), rand((5,)), 1, 2])  # pads of 7 and 8
    assert err.op == "add" and "sizes 7 and 8" in err.message


def test_a_refused_call_leaves_no_concretization_behind() -> None:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        left, right = fd.define_scalar(None, dtype=DataType.Int), fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.mul(t1, fd.ops.pad(t0, [left, right])))
    x = rand((3, 4))
    run_error(fd, [x, rand((3, 8)), 1, 2])
    fd.execute([x, rand((3, 7)), 1, 2])
    cache = fd.executor_cache
    assert cache is not None and "first execution" in cache.last_report.event.line()


def test_an_input_axis_combined_with_a_hard_coded_broadcast_size_names_both_ops() -> None:
    """cross-entropy's one-hot: iota over the vocabulary broadcast to a hard-coded
    [4, 6] and compared with labels of [N]. An N other than 4 is refused before the
    run, naming the comparison, the input and the broadcast_in_dim that fixed 4 (it
    failed inside the reference on NumPy's broadcast error, naming only the comparison)."""
    with FusionDefinition() as fd:
        labels = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        vocab = fd.ops.iota(fd.define_scalar(6), fd.define_scalar(0), fd.define_scalar(1), dtype=DataType.Int)
        ramp = fd.ops.broadcast_in_dim(vocab, shape=[4, 6], broadcast_dims=[1])
        wide = fd.ops.broadcast_in_dim(labels, shape=[4, 6], broadcast_dims=[0])
        fd.add_output(fd.ops.eq(ramp, wide))
    good = np.array([0, 5, 2, 2], dtype=np.int64)
    (out,) = fd.execute([good])
    np.testing.assert_array_equal(out, np.arange(6)[None, :] == good[:, None])
    err = run_error(fd, [np.array([1, 2, 3], dtype=np.int64)])
    assert err.op == "equal"
    assert "input 0 (T0) axis 0 has size 3, but equal combines it with an axis broadcast to size 4" in err.message
    assert "(by broadcast_in_dim at test_input_validation.py:" in err.message


@pytest.mark.parametrize("other", [1, 7])
def test_a_size_computed_from_other_inputs_must_fit_the_input_axis_it_is_combined_with(other: int) -> None:
    """reshape(x [2, 3], [-1]) + y [n]: the kernel indexes y by the reshape's 6 elements, so
    an n of 1 (not a broadcast: defined with -1) or 7 is refused before any backend runs,
    naming the op and both sizes (the review of 609af2e found only the reference refused
    it, on NumPy's broadcast error; a generated kernel would have read past y)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.reshape(x, new_shape=[-1]), y))
    a, b = rand((2, 3)), rand((6,))
    (out,) = fd.execute([a, b])
    np.testing.assert_allclose(out, a.reshape(-1) + b)
    err = run_error(fd, [a, rand((other,))])
    assert err.op == "add"
    assert f"an axis of size 6, computed from the inputs' sizes (by reshape), is combined with one of size {other}" in (
        err.message
    )
