"""Cast names as nvFuser's 2024 printer writes them (supported_casts2string), for
every pair of this project's dtypes, and the casts nvFuser has no function for are
refused when defined."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.ir.dtype import TENSOR_DTYPES
from fuser_core.ir.elementwise import CAST_NAMES, cast_name, is_supported_cast

TYPES = [dt for dt in DataType if dt != DataType.Null]
TABLE = Path(__file__).with_name("cast_names_nvfuser.txt")


def nvfuser_table() -> dict[tuple[DataType, DataType], str]:
    rows = [line.split() for line in TABLE.read_text().splitlines() if line and not line.startswith("#")]
    return {(DataType[src], DataType[dst]): name for src, dst, name in rows}


def test_cast_names_are_nvfuser_table_for_every_pair() -> None:
    table = nvfuser_table()
    assert len(table) == 126
    assert table == CAST_NAMES
    for src, dst in itertools.product(TYPES, TYPES):
        assert is_supported_cast(src, dst) == (src == dst or (src, dst) in table)


# Read off csrc/type.cpp by hand, one or two per `case` group.
@pytest.mark.parametrize(
    ("src", "dst", "name"),
    [
        (DataType.Int, DataType.Int32, "(int32_t)"),
        (DataType.Index, DataType.Int32, "(int32_t)"),
        (DataType.Int32, DataType.Int, "(int64_t)"),
        (DataType.Double, DataType.Float, "(float)"),
        (DataType.Bool, DataType.Double, "(double)"),
        (DataType.Float, DataType.Index, "(nvfuser_index_t)"),
        (DataType.Int, DataType.UInt64, "(uint64_t)"),
        (DataType.Float, DataType.Bool, "(bool)"),
        (DataType.ComplexFloat, DataType.Float, "(float)std::real"),
        (DataType.ComplexDouble, DataType.Int32, "(int32_t)std::real"),
        (DataType.ComplexFloat, DataType.Bool, "(bool)std::real"),
        (DataType.ComplexFloat, DataType.ComplexDouble, "(std::complex<double>)"),
        (DataType.Double, DataType.ComplexFloat, "(std::complex<float>)"),
        (DataType.Float, DataType.Half, "__float2half"),
        (DataType.Index, DataType.Half, "__int2half"),
        (DataType.UInt64, DataType.BFloat16, "__int2bfloat"),
        (DataType.Bool, DataType.BFloat16, "__bool2bfloat"),
        (DataType.ComplexDouble, DataType.Half, "__real_then_2half"),
        (DataType.ComplexFloat, DataType.BFloat16, "__real_then_2bfloat"),
        (DataType.Half, DataType.Int32, "__half2int32"),
        (DataType.Half, DataType.Int, "__half2int"),
        (DataType.BFloat16, DataType.UInt64, "__bfloat2uint"),
        (DataType.BFloat16, DataType.Index, "__bfloat2index"),
        (DataType.Half, DataType.BFloat16, "__half2bfloat"),
        (DataType.Half, DataType.ComplexFloat, "(std::complex<float>)__half2float"),
        (DataType.BFloat16, DataType.ComplexDouble, "(std::complex<double>)__bfloat2double"),
        (DataType.Float8_e4m3fn, DataType.Float, "__e4m32float"),
        (DataType.Double, DataType.Float8_e4m3fn, "__double2e4m3"),
        (DataType.Float8_e5m2, DataType.BFloat16, "__e5m22bfloat"),
        (DataType.Half, DataType.Float8_e5m2, "__half2e5m2"),
    ],
    ids=str,
)
def test_cast_name_examples(src: DataType, dst: DataType, name: str) -> None:
    assert cast_name(src, dst) == name


def _printed_cast(src: DataType, dst: DataType) -> str:
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=src)
        fd.add_output(fd.ops.cast(t, dst))
    math = fd.fusion_ir().split("%kernel_math {\n")[1]
    return math.split("\n")[1]


@pytest.mark.parametrize(
    ("src", "dst"),
    [(s, d) for s in TENSOR_DTYPES for d in TENSOR_DTYPES if (s, d) in CAST_NAMES],
    ids=str,
)
def test_printed_tensor_cast(src: DataType, dst: DataType) -> None:
    assert _printed_cast(src, dst) == f"   = {nvfuser_table()[src, dst]}(T0_g[ iS0{{i0}} ]);"


def test_printed_cast_of_int_to_int32_and_complex_to_float() -> None:
    assert _printed_cast(DataType.Int, DataType.Int32) == "   = (int32_t)(T0_g[ iS0{i0} ]);"
    assert _printed_cast(DataType.ComplexFloat, DataType.Float) == "   = (float)std::real(T0_g[ iS0{i0} ]);"


@pytest.mark.parametrize("dst", [DataType.Int, DataType.Float, DataType.Bool, DataType.Double], ids=str)
def test_printed_scalar_cast_from_index(dst: DataType) -> None:
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True])
        fd.add_output(fd.ops.cast(fd.ops.size(t, 0), dst))
    assert f" = {nvfuser_table()[DataType.Index, dst]}(i0);" in fd.fusion_ir()


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (DataType.Int, DataType.Float8_e4m3fn),
        (DataType.Bool, DataType.Float8_e5m2),
        (DataType.Float8_e4m3fn, DataType.Int32),
        (DataType.Float8_e5m2, DataType.Bool),
        (DataType.Float8_e4m3fn, DataType.Float8_e5m2),
        (DataType.ComplexFloat, DataType.Float8_e4m3fn),
    ],
    ids=str,
)
def test_cast_nvfuser_has_no_function_for_is_refused(src: DataType, dst: DataType) -> None:
    with pytest.raises(FuserError, match="illegal cast") as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=src)
        fd.ops.cast(t, dst)
    assert info.value.op == "cast"
    assert info.value.tensor == "T0"


def test_cast_of_a_symbolic_scalar_nvfuser_has_no_function_for_is_refused() -> None:
    with pytest.raises(FuserError, match="illegal cast"), FusionDefinition() as fd:
        s = fd.define_scalar(None, dtype=DataType.Int)
        fd.ops.cast(s, DataType.Float8_e4m3fn)


@pytest.mark.parametrize("dst", [DataType.Float, DataType.Int32, DataType.Bool, DataType.Half], ids=str)
def test_complex_to_real_casts_keep_the_real_part(dst: DataType) -> None:
    """`std::real` first: 0.75+2j is 0 as an integer and 0+1j is false as a bool."""
    x = np.array([0.75 + 2j, -1.5 - 1j, 0 + 1j, 3 + 0j], np.complex64)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=DataType.ComplexFloat)
        fd.add_output(fd.ops.cast(t, dst))
    (out,) = fd.execute([x])
    real = x.real.astype(np.float64)
    expected = {
        DataType.Bool: real != 0,
        DataType.Int32: np.trunc(real).astype(np.int32),
    }.get(dst, real.astype(dst.numpy))
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == dst.numpy


def test_cast_of_a_complex_constant_to_a_real_type_keeps_the_real_part() -> None:
    with FusionDefinition() as fd:
        out = fd.ops.cast(2.5 - 1j, DataType.Float)
        fd.add_output(out)
    assert out.val.is_const and out.val.value == 2.5


def test_implicit_casts_nvfuser_has_no_function_for_name_the_users_op() -> None:
    """where keeps fp8 (no half_to_float), so an Int scalar would need Int -> fp8;
    logical ops cast to Bool, which fp8 has no conversion to either."""
    with pytest.raises(FuserError, match="illegal cast of i") as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=DataType.Float8_e4m3fn)
        cond = fd.define_tensor([-1], [True], dtype=DataType.Bool)
        fd.ops.where(cond, t, fd.define_scalar(None, dtype=DataType.Int))
    assert info.value.op == "where"
    with pytest.raises(FuserError, match="illegal cast of T0") as info, FusionDefinition() as fd:
        t = fd.define_tensor([-1], [True], dtype=DataType.Float8_e5m2)
        fd.ops.logical_and(t, t)
    assert info.value.op == "logical_and"
