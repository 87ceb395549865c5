"""Launch sizes evaluated on the host (runtime/launch_sizes): C integer arithmetic, and
the clamps and selects a slice with run-time bounds puts into an extent (the fuzzer's
seed 5 case 3451: `cannot evaluate fmax(0, fmin(2, where(s6 < 0, s6 + 2, s6)))`)."""

from __future__ import annotations

import pytest

from fuser_core.codegen import kernel_ir as k
from fuser_core.ir.dtype import DataType
from fuser_core.runtime.launch_sizes import evaluate

IDX = DataType.Index
B = DataType.Bool


def _c(v: int) -> k.Node:
    return k.Const(IDX, v)


def _eval(node: k.Node, **scalars: int) -> int:
    return evaluate(node, {"T0": (7, 5)}, {"T0": (5, 1)}, scalars)


def _slice_end() -> k.Node:
    s = k.ScalarParam(IDX, "s6")
    wrapped = k.Call(IDX, "where", (k.Bin(B, "<", s, _c(0)), k.Bin(IDX, "+", s, _c(2)), s))
    return k.Call(IDX, "fmax", (_c(0), k.Call(IDX, "fmin", (_c(2), k.Cast(IDX, wrapped)))))


@pytest.mark.parametrize(("s6", "end"), [(-1, 1), (-5, 0), (1, 1), (2, 2), (9, 2)])
def test_a_slice_bound_from_a_scalar_is_clamped_and_wrapped(s6, end):
    assert _eval(_slice_end(), s6=s6) == end


@pytest.mark.parametrize(("a", "b", "quotient", "remainder"), [(7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1)])
def test_integer_division_truncates_as_in_c(a, b, quotient, remainder):
    assert _eval(k.Bin(IDX, "/", _c(a), _c(b))) == quotient
    assert _eval(k.Bin(IDX, "%", _c(a), _c(b))) == remainder


def test_division_stays_exact_past_2_to_the_53():
    big = 2**60 + 3
    assert _eval(k.Bin(IDX, "/", _c(big), _c(3))) == big // 3


def test_sizes_strides_and_logic():
    size = k.TensorField(IDX, "T0", "logical_size", 1)
    stride = k.TensorField(IDX, "T0", "alloc_stride", 0)
    both = k.Bin(B, "&&", k.Bin(B, "==", size, stride), k.Un(B, "!", k.Bin(B, ">", size, _c(9))))
    assert _eval(k.Call(IDX, "where", (both, k.Call(IDX, "ceilDiv", (size, _c(2))), _c(0)))) == 3


def test_an_unknown_function_is_a_clear_error():
    from fuser_core import FuserError

    with pytest.raises(FuserError, match="cannot evaluate"):
        _eval(k.Call(IDX, "tanh", (_c(1),)))
