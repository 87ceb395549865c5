"""What `FusionDefinition.execute` takes and gives back, as nvFuser's: NumPy in, NumPy
out; torch CPU tensors in, torch tensors out; aliased outputs written into their inputs
in place and not returned; vectors given as lists or tuples; 0-D CPU scalar tensors;
complex constants; index_select by a 0-D index; nvFuser's slice errors, in its order."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def relu_and_sum() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(fd.ops.relu(t0))
        fd.add_output(fd.ops.sum(t0, dims=[0]))
    return fd


def accumulate() -> FusionDefinition:
    """acc += x (written into acc, not returned); returns acc_old * x."""
    with FusionDefinition() as fd:
        acc = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(fd.ops.add(acc, x), alias_input=acc)
        fd.add_output(fd.ops.mul(acc, x))
    return fd


# -- frameworks in and out ---------------------------------------------------------------------
def test_numpy_inputs_give_numpy_outputs(rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    relu, total = relu_and_sum().execute([x])
    assert type(relu) is np.ndarray and type(total) is np.ndarray
    np.testing.assert_array_equal(relu, np.maximum(x, 0))
    np.testing.assert_allclose(total, x.sum(axis=0), rtol=1e-5)


def test_torch_cpu_inputs_give_torch_cpu_outputs_of_the_fusions_dtypes():
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half)
        t1 = fd.ops.cast(t0, DataType.Float)
        fd.add_output(fd.ops.relu(t1))
        fd.add_output(fd.ops.cast(fd.ops.mul(t1, t1), DataType.BFloat16))
    x = torch.randn(4, 7, dtype=torch.float16)
    relu, square = fd.execute([x])
    assert isinstance(relu, torch.Tensor) and relu.device.type == "cpu" and relu.dtype == torch.float32
    assert square.dtype == torch.bfloat16 and square.shape == (4, 7)
    torch.testing.assert_close(relu, torch.relu(x.float()))
    torch.testing.assert_close(square, (x.float() * x.float()).bfloat16())


# -- aliased outputs ------------------------------------------------------------------------------
def test_an_aliased_output_is_written_into_its_numpy_input_and_not_returned(rng):
    acc = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    before = acc.copy()
    outputs = accumulate().execute([acc, x])
    assert len(outputs) == 1
    np.testing.assert_allclose(outputs[0], before * x, rtol=1e-6)
    np.testing.assert_allclose(acc, before + x, rtol=1e-6)


def test_an_aliased_output_is_written_into_its_torch_input_in_place():
    torch = pytest.importorskip("torch")
    acc, x = torch.randn(3, 4), torch.randn(3, 4)
    before, storage = acc.clone(), acc.data_ptr()
    fd = accumulate()
    (product,) = fd.execute([acc, x])
    torch.testing.assert_close(product, before * x)
    torch.testing.assert_close(acc, before + x)
    assert acc.data_ptr() == storage
    fd.execute([acc, x])  # a second run accumulates again
    torch.testing.assert_close(acc, before + 2 * x)


def test_an_aliased_output_into_a_read_only_array_is_a_fuser_error(rng):
    acc = rng.standard_normal((2, 2)).astype(np.float32)
    acc.flags.writeable = False
    with pytest.raises(FuserError, match="input T0 must be a writable array or tensor"):
        accumulate().execute([acc, rng.standard_normal((2, 2)).astype(np.float32)])


def test_an_alias_must_match_its_inputs_dtype_and_rank():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        half = fd.ops.cast(t0, DataType.Half)
        with pytest.raises(FuserError, match="aliased tensors must have the same dtype and rank"):
            fd.add_output(half, alias_input=t0)
        fd.add_output(half)


# -- vector inputs --------------------------------------------------------------------------------
def test_a_vector_input_is_given_as_a_list_or_a_tuple(rng):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        shape = fd.define_vector(2)
        fd.add_output(fd.ops.reshape(t0, shape))
    x = rng.standard_normal(12).astype(np.float32)
    as_list = fd.execute([x, [3, 4]])[0]
    as_tuple = fd.execute([x, (4, 3)])[0]
    np.testing.assert_array_equal(as_list, x.reshape(3, 4))
    np.testing.assert_array_equal(as_tuple, x.reshape(4, 3))
    with pytest.raises(FuserError, match=r"input 1 is a vector of 2 ints: give a list or tuple of 2, got \[12\]"):
        fd.execute([x, [12]])


# -- from_pytorch -------------------------------------------------------------------------------
def test_from_pytorch_refuses_a_cpu_tensor_that_is_not_0d_with_a_clear_message():
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        with pytest.raises(ValueError, match="Found unsupported device cpu, only cuda is supported") as caught:
            fd.from_pytorch(torch.randn(2, 3))
        assert isinstance(caught.value, FuserError) and "from_pytorch" in str(caught.value)
        fd.add_output(fd.define_tensor(shape=[-1], contiguity=[True]))


def test_a_0d_cpu_tensor_is_a_scalar_input_from_pytorch():
    torch = pytest.importorskip("torch")
    scale = torch.tensor(1.75)
    x = torch.randn(4, 5)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        s = fd.from_pytorch(scale)
        fd.add_output(fd.ops.mul(t0, s))
    assert "dtype=DataType.Float, is_cpu=True, stride_order=[])" in repr(fd)
    torch.testing.assert_close(fd.execute([x, scale])[0], x * 1.75)


# -- constants and indexing ----------------------------------------------------------------------
def test_a_complex_scalar_constant_multiplies_a_complex_tensor(rng):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.ComplexFloat)
        c = fd.define_scalar(complex(1.5, -2.0))
        fd.add_output(fd.ops.mul(t0, c))
    assert "S1 = fd.define_scalar(complex(1.5, -2.0), dtype=DataType.ComplexDouble)" in repr(fd)
    z = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np.complex64)
    out = fd.execute([z])[0]
    assert out.dtype == np.complex64
    np.testing.assert_allclose(out, z * (1.5 - 2j), rtol=1e-6)


def test_index_select_with_a_0d_index_keeps_the_axis_with_one_entry(rng):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        index = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Int)
        fd.add_output(fd.ops.index_select(t0, index, 1))
    x = rng.standard_normal((4, 5)).astype(np.float32)
    out = fd.execute([x, np.array(3, dtype=np.int64)])[0]
    assert out.shape == (4, 1)
    np.testing.assert_array_equal(out[:, 0], x[:, 3])


# -- slice errors: nvFuser's opinfo error samples, on a (10, 10) tensor -------------------------
SLICE_ERRORS = [
    (
        ([-1, -2], [5, 5], [7, 7]),
        "Slice operation start_indices must be greater-than-or-equal-to 0. "
        "Start Indices: [-1, -2] End Indices: [5, 5] Strides: [7, 7]",
    ),
    (
        ([3, 4], [1, 2], [1, 1]),
        "Slice operation end_indices must be greater-than-or-equal-to start_indices. "
        "Start Indices: [3, 4] End Indices: [1, 2] Strides: [1, 1]",
    ),
    (
        ([0, 0], [5, 5], [5, 5]),
        "nvFuser Limitation: All slice operation strides must be of size 1. "
        "Start Indices: [0, 0] End Indices: [5, 5] Strides: [5, 5]",
    ),
    (
        ([0, 0, 0], [4, 4, 4], [1, 1, 1]),
        "Number of tensor dimensions does not match slice dimensions! Tensor-dims: 2 Slice-dims: 3",
    ),
    (([0, 0, 0], [4, 4], [1, 1]), "Slice start_indices and strides don't match! Start Indices: 3 Strides: 2"),
    (
        ([0, 0], [4, 4, 4], [1, 1]),
        "Slice indexing attribute dimensions don't match! Start Indices: 2 End Indices: 3",
    ),
    (([0, 0], [4, 4], [1, 1, 1]), "Slice start_indices and strides don't match! Start Indices: 2 Strides: 3"),
]


@pytest.mark.parametrize(
    ("args", "message"), SLICE_ERRORS, ids=[m.split("!")[0].split(".")[0] for _, m in SLICE_ERRORS]
)
def test_slice_errors_are_nvfusers_messages_in_its_order(args, message):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        with pytest.raises(FuserError) as caught:
            fd.ops.slice(t0, *args)
        fd.add_output(t0)
    text = str(caught.value)
    assert f"slice: {message}" in text
    assert "fd.ops.slice(t0, *args)" in text  # the user's line


def test_a_slice_without_strides_is_not_an_error(rng):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        fd.add_output(fd.ops.slice(t0, start_indices=[2, 2], end_indices=[4, 4]))
    x = rng.standard_normal((10, 10)).astype(np.float32)
    np.testing.assert_array_equal(fd.execute([x])[0], x[2:4, 2:4])


def test_a_torch_dtype_given_to_an_op_is_accepted_or_a_fuser_error():
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Half)
        try:
            out = fd.ops.cast(t0, dtype=torch.float32)
        except FuserError as err:
            assert "cast" in str(err)
            out = fd.ops.cast(t0, dtype=DataType.Float)
        fd.add_output(out)
    assert "fd.ops.cast(T0, dtype=DataType.Float)" in repr(fd)
