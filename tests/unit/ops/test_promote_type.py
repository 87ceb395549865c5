"""promote_type is nvFuser's promoteType (symmetric; UInt64 meets no signed integer),
and common_type is its computeTypes (combineCategories keeps a float's precision
when a complex scalar joins)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.ir.dtype import promote_type

TYPES = [dt for dt in DataType if dt != DataType.Null]
TABLE = Path(__file__).with_name("promote_type_nvfuser.txt")


def nvfuser_table() -> dict[tuple[DataType, DataType], DataType | None]:
    rows = [line.split() for line in TABLE.read_text().splitlines() if line and not line.startswith("#")]
    return {(DataType[a], DataType[b]): None if c == "ERR" else DataType[c] for a, b, c in rows}


def promoted(a: DataType, b: DataType) -> DataType | None:
    try:
        return promote_type(a, b)
    except FuserError:
        return None


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations_with_replacement(TYPES, 2)), ids=str)
def test_promote_type_is_commutative(a: DataType, b: DataType) -> None:
    assert promoted(a, b) == promoted(b, a)


def test_promote_type_is_nvfuser_promote_type_for_every_pair() -> None:
    table = nvfuser_table()
    assert set(table) == set(itertools.product(TYPES, TYPES))
    wrong = {pair: (promoted(*pair), want) for pair, want in table.items() if promoted(*pair) != want}
    assert wrong == {}


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (DataType.Int, DataType.Int32, DataType.Int),
        (DataType.Index, DataType.Int, DataType.Index),  # Index wins among integers
        (DataType.Index, DataType.UInt64, DataType.Index),
        (DataType.Index, DataType.Float, DataType.Float),
        (DataType.Bool, DataType.Int32, DataType.Int32),
        (DataType.UInt64, DataType.Float, DataType.Float),
        (DataType.UInt64, DataType.ComplexFloat, DataType.ComplexFloat),
        (DataType.Int, DataType.Float, DataType.Float),  # C++: int64_t with float is float
        (DataType.Half, DataType.BFloat16, DataType.Float),
        (DataType.Half, DataType.Float8_e4m3fn, DataType.Float),
        (DataType.Float8_e4m3fn, DataType.Float8_e5m2, DataType.Float),
        (DataType.BFloat16, DataType.Double, DataType.Double),
        (DataType.Half, DataType.Int, DataType.Half),
        (DataType.Double, DataType.ComplexFloat, DataType.ComplexDouble),  # ATen's rule, not C++'s
        (DataType.Float, DataType.ComplexFloat, DataType.ComplexFloat),
        (DataType.Half, DataType.ComplexFloat, DataType.ComplexFloat),
        (DataType.Null, DataType.Half, DataType.Half),
    ],
    ids=str,
)
def test_promote_type_examples(a: DataType, b: DataType, want: DataType) -> None:
    assert promote_type(a, b) == promote_type(b, a) == want


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (DataType.Int, DataType.UInt64),
        (DataType.Int32, DataType.UInt64),
        (DataType.Bool, DataType.UInt64),
        (DataType.Index, DataType.Bool),
    ],
    ids=str,
)
def test_pairs_without_a_common_type(a: DataType, b: DataType) -> None:
    for x, y in ((a, b), (b, a)):
        with pytest.raises(FuserError, match="no common type"):
            promote_type(x, y)


@pytest.mark.parametrize("swap", [False, True])
def test_int_plus_uint64_tensors_is_refused_in_either_order(swap: bool) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        a = fd.define_tensor([-1], [True], dtype=DataType.Int)
        b = fd.define_tensor([-1], [True], dtype=DataType.UInt64)
        fd.ops.add(*((b, a) if swap else (a, b)))
    assert info.value.op == "add"
    assert info.value.tensor == ("T1" if swap else "T0")
    assert "DataType.Int" in info.value.message and "DataType.UInt64" in info.value.message


def test_uint64_tensor_with_an_int_literal_stays_uint64() -> None:
    """Scalars do not promote a tensor of the same category (no promoteType call)."""
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=DataType.UInt64)
        out = fd.ops.add(t, 1)
        fd.add_output(out)
    assert out.dtype == DataType.UInt64
    (result,) = fd.execute([np.array([1, 2**63], np.uint64)])
    assert result.dtype == np.uint64
    np.testing.assert_array_equal(result, np.array([2, 2**63 + 1], np.uint64))


@pytest.mark.parametrize(
    ("dtype", "want"),
    [
        (DataType.Float, DataType.ComplexFloat),  # complex of the tensor's float precision
        (DataType.Double, DataType.ComplexDouble),
        (DataType.Int, DataType.ComplexDouble),  # an integer takes the scalar's complex type
        (DataType.Bool, DataType.ComplexDouble),
    ],
    ids=str,
)
def test_tensor_times_a_complex_literal(dtype: DataType, want: DataType) -> None:
    x = np.array([1, 2, 0], dtype=dtype.numpy)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=dtype)
        out = fd.ops.mul(t, 1j)
        fd.add_output(out)
    assert out.dtype == want
    (result,) = fd.execute([x])
    assert result.dtype == want.numpy
    np.testing.assert_array_equal(result, x.astype(np.complex128) * 1j)


def test_complex_float_tensor_times_a_double_scalar_stays_complex_float() -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=DataType.ComplexFloat)
        out = fd.ops.mul(t, 2.5)
        fd.add_output(out)
    assert out.dtype == DataType.ComplexFloat


@pytest.mark.parametrize("dtype", [DataType.Half, DataType.BFloat16])
def test_half_tensor_times_a_complex_literal_has_no_complex_type(dtype: DataType) -> None:
    """nvFuser's getComplexTypeFromType knows only Float and Double."""
    with pytest.raises(FuserError, match="no complex type") as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=dtype)
        fd.ops.mul(t, 1j)
    assert info.value.op == "mul"
    assert info.value.tensor == "T0"


def test_a_fully_reduced_tensor_still_counts_as_a_tensor_with_axes() -> None:
    """nvFuser counts the logical domain, reduction axes included: sum(Float) decides
    over a 0-D Double tensor, as a tensor with axes does."""
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], [True, True])
        zero_d = fd.define_tensor([], [], dtype=DataType.Double)
        total = fd.ops.sum(t, [0, 1])
        out = fd.ops.mul(total, zero_d)
        fd.add_output(out)
    assert out.dtype == DataType.Float
    (result,) = fd.execute([np.ones((2, 3), np.float32), np.array(0.5)])
    assert result.dtype == np.float32
    assert float(result) == 3.0
