"""TensorSpec and ScalarSpec: lazy description, and NumPy data with the exact layout."""

import dataclasses
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FuserError, ScalarSpec, TensorSpec
from fuser_core.script.input_spec import contiguous_strides, format_bytes, materialize_inputs


def element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)


# -- description without allocation -----------------------------------------------------------
def test_describe_names_shape_dtype_strides_device_fill_and_size():
    spec = TensorSpec((8, 32, 4096, 128), DataType.BFloat16, device="cuda")
    assert spec.strides == (16777216, 524288, 128, 1)
    assert spec.nbytes == 8 * 32 * 4096 * 128 * 2
    assert spec.describe() == (
        "tensor [8, 32, 4096, 128] BFloat16 strides [16777216, 524288, 128, 1] cuda randn (256.0 MiB)"
    )


def test_a_3_gb_input_is_described_without_allocating_it():
    tracemalloc.start()
    try:
        spec = TensorSpec((3, 1024, 1024, 256), DataType.Float, device="cuda", kind="empty")
        text = spec.describe()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert spec.nbytes == 3 * 2**30
    assert text.endswith("empty (3.0 GiB)")
    assert peak < 1_000_000


@pytest.mark.parametrize(
    ("count", "text"), [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * 2**20, "3.0 MiB"), (2**41, "2.0 TiB")]
)
def test_format_bytes(count, text):
    assert format_bytes(count) == text


def test_contiguous_strides_count_size_zero_axes_as_one():
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert contiguous_strides((2, 0, 4)) == (4, 4, 1)
    assert contiguous_strides(()) == ()


def test_specs_are_frozen_and_hashable():
    spec = TensorSpec((2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.shape = (3,)  # type: ignore[misc]
    assert spec == TensorSpec((2, 3)) and hash(spec) == hash(TensorSpec((2, 3)))


# -- fills ----------------------------------------------------------------------------------------
def test_randn_is_standard_normal_float32_and_seeded():
    spec = TensorSpec((100, 100))
    a = spec.materialize(seed=1)
    assert a.dtype == np.float32 and a.shape == (100, 100)
    assert abs(float(a.mean())) < 0.05 and abs(float(a.std()) - 1) < 0.05
    np.testing.assert_array_equal(a, spec.materialize(seed=1))
    assert not np.array_equal(a, spec.materialize(seed=2))


def test_empty_is_random_normal_not_zeros():
    a = TensorSpec((64, 64), kind="empty").materialize(0)
    assert np.count_nonzero(a) > 4000
    assert float(a.min()) < -1 < 1 < float(a.max())


def test_rand_is_uniform_in_0_1():
    a = TensorSpec((10_000,), DataType.Double, kind="rand").materialize(0)
    assert a.dtype == np.float64
    assert float(a.min()) >= 0 and float(a.max()) < 1 and abs(float(a.mean()) - 0.5) < 0.02


@pytest.mark.parametrize("kind", ["randn", "empty", "make_tensor", "randint"])
def test_bool_random_kinds_give_both_values(kind):
    a = TensorSpec((1000,), DataType.Bool, kind=kind, low=0 if kind == "randint" else None, high=2).materialize(0)
    assert a.dtype == np.bool_ and a.any() and not a.all()


def test_randint_stays_in_its_range():
    a = TensorSpec((5000,), DataType.Int, kind="randint", low=-3, high=4).materialize(0)
    assert a.dtype == np.int64 and set(np.unique(a).tolist()) == set(range(-3, 4))


def test_make_tensor_ints_use_torch_default_range_and_floats_their_bounds():
    ints = TensorSpec((5000,), DataType.Int32, kind="make_tensor").materialize(0)
    assert ints.dtype == np.int32 and int(ints.min()) == -9 and int(ints.max()) == 9
    floats = TensorSpec((5000,), DataType.Float, kind="make_tensor", low=-2, high=3).materialize(0)
    assert float(floats.min()) >= -2 and float(floats.max()) < 3 and float(floats.min()) < -1.5


@pytest.mark.parametrize(("kind", "fill", "value"), [("ones", None, 1), ("zeros", None, 0), ("full", 2.5, 2.5)])
def test_constant_fills_are_exact(kind, fill, value):
    a = TensorSpec((3, 4), DataType.Half, kind=kind, fill=fill).materialize(0)
    assert a.dtype == np.float16 and a.shape == (3, 4) and (a == value).all()


def test_full_of_minus_infinity_in_bfloat16():
    a = TensorSpec((4,), DataType.BFloat16, kind="full", fill=float("-inf")).materialize(0)
    assert a.dtype == ml_dtypes.bfloat16 and np.isneginf(a.astype(np.float32)).all()


def test_explicit_data_and_arange_are_exact():
    data = TensorSpec((2, 3), DataType.Int, kind="tensor", data=(1, 2, 3, 4, 5, 6)).materialize(0)
    np.testing.assert_array_equal(data, [[1, 2, 3], [4, 5, 6]])
    ramp = TensorSpec((4,), DataType.Float, kind="arange", fill=1.0, step=0.5).materialize(0)
    np.testing.assert_array_equal(ramp, np.array([1.0, 1.5, 2.0, 2.5], np.float32))


def test_complex_randn_has_random_real_and_imaginary_parts():
    a = TensorSpec((1000,), DataType.ComplexFloat).materialize(0)
    assert a.dtype == np.complex64 and np.count_nonzero(a.real) > 900 and np.count_nonzero(a.imag) > 900


@pytest.mark.parametrize(
    ("dtype", "numpy"), [(DataType.BFloat16, ml_dtypes.bfloat16), (DataType.Float8_e4m3fn, ml_dtypes.float8_e4m3fn)]
)
def test_narrow_floats_use_ml_dtypes(dtype, numpy):
    a = TensorSpec((256,), dtype).materialize(0)
    assert a.dtype == np.dtype(numpy) and np.count_nonzero(a.astype(np.float32)) > 200


# -- layout -------------------------------------------------------------------------------------
def test_materialized_arrays_have_exactly_the_given_element_strides():
    spec = TensorSpec((2, 3), strides=(1, 2))  # column-major
    a = spec.materialize(0)
    assert element_strides(a) == (1, 2) and spec.storage_size == 6
    assert a.flags.writeable


def test_as_strided_view_into_a_larger_storage_with_an_offset():
    spec = TensorSpec(
        (2, 2), DataType.Int, strides=(3, 1), kind="arange", fill=0, step=1, storage_offset=1, storage_size=7
    )
    a = spec.materialize(0)
    assert element_strides(a) == (3, 1)
    np.testing.assert_array_equal(a, [[1, 2], [4, 5]])
    assert spec.nbytes == 7 * 8 and "offset 1" in spec.describe()


def test_expanded_axes_have_stride_zero_and_are_read_only():
    spec = TensorSpec((4, 3), strides=(0, 1))
    a = spec.materialize(0)
    assert element_strides(a) == (0, 1) and spec.storage_size == 3
    assert (a == a[0]).all() and not a.flags.writeable


def test_a_view_outside_its_storage_is_refused():
    with pytest.raises(FuserError, match="needs 7 elements but the storage has 6"):
        TensorSpec((2, 3), strides=(3, 1), storage_offset=1, storage_size=6)


@pytest.mark.parametrize(
    "kwargs",
    [{"strides": (-1,)}, {"kind": "normal"}, {"compare": "approx"}, {"shape": (2.5,)}, {"strides": (1, 1)}],
)
def test_malformed_specs_raise_fuser_error(kwargs):
    with pytest.raises(FuserError):
        TensorSpec(**({"shape": (3,)} | kwargs))


# -- derived specs ---------------------------------------------------------------------------------
def test_comparison_spec_materializes_as_its_source_compared():
    source = TensorSpec((50, 50))
    spec = TensorSpec(
        (50, 50), DataType.Bool, kind="randn", source=source, source_strides=(50, 1), compare="gt", operand=0
    )
    a = spec.materialize(3)
    assert a.dtype == np.bool_ and a.any() and not a.all()
    np.testing.assert_array_equal(a, source.materialize(3) > 0)
    assert spec.describe().endswith("randn > 0 (2.4 KiB)")


def test_copy_spec_lays_out_a_transposed_source_contiguously():
    source = TensorSpec((3, 2), DataType.Int, strides=(1, 3), kind="tensor", data=(1, 2, 3, 4, 5, 6))
    copy = TensorSpec((3, 2), DataType.Float, kind="tensor", source=source, source_strides=(2, 1))
    a = copy.materialize(0)
    np.testing.assert_array_equal(a, [[1, 4], [2, 5], [3, 6]])
    assert a.dtype == np.float32 and element_strides(a) == (2, 1)


# -- scalars and lists ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "dtype"),
    [(2, DataType.Int), (-1.5, DataType.Double), (True, DataType.Bool), (1j, DataType.ComplexDouble)],
)
def test_scalar_spec(value, dtype):
    spec = ScalarSpec(value)
    assert spec.dtype == dtype and spec.materialize(7) == value
    assert spec.describe() == f"scalar {dtype.name} {value!r}"


def test_scalar_spec_refuses_non_numbers():
    with pytest.raises(FuserError, match="must be a Python number"):
        ScalarSpec("1.0")  # type: ignore[arg-type]


def test_materialize_inputs_draws_each_input_from_its_own_stream():
    a, b, s = materialize_inputs([TensorSpec((8,)), TensorSpec((8,)), ScalarSpec(2.0)], seed=0)
    assert not np.array_equal(a, b) and s == 2.0
    again = materialize_inputs([TensorSpec((8,)), TensorSpec((8,))], seed=0)
    np.testing.assert_array_equal(a, again[0])
