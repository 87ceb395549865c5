"""Index folding: constants, cancelling offsets, and div/mod of loop indices whose
extents are known."""

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.simplify import INDEX, add, div, index_bounds, lt, mod, mul, sub
from fuser_core.ir.dtype import DataType


def c(v):
    return k.Const(INDEX, v)


def v(name):
    return k.Var(INDEX, name)


def test_offsets_cancel_and_constants_fold():
    i = v("i")
    assert add(sub(i, c(64)), c(64)) == i
    assert mul(c(3), c(4)) == c(12)
    assert add(c(0), i) == i and mul(i, c(1)) == i and mul(i, c(0)) == c(0)
    assert div(c(17), c(4)) == c(4) and mod(c(17), c(4)) == c(1)


def test_div_and_mod_of_a_vector_lane_under_its_extent_fold():
    block, lane = v("b"), v("lane")
    base = mul(block, c(8))
    with index_bounds() as bounds:
        bounds["lane"] = 8
        assert mod(add(base, lane), c(128)) == add(mod(base, c(128)), lane)
        assert mod(base, c(128)) == mul(mod(block, c(16)), c(8))
        assert div(add(base, lane), c(128)) == div(block, c(16))
        assert mod(lane, c(8)) == lane and div(lane, c(8)) == c(0)
        assert lt(mod(add(base, lane), c(128)), c(128)) == k.Const(DataType.Bool, True)
    # Without the lane's extent nothing is assumed.
    assert mod(add(base, lane), c(128)) == k.Bin(INDEX, "%", k.Bin(INDEX, "+", base, lane), c(128))


def test_multiples_fold_away():
    i, j = v("i"), v("j")
    assert mod(mul(i, c(256)), c(128)) == c(0)
    assert div(mul(i, c(256)), c(128)) == mul(i, c(2))
    assert mod(add(mul(i, c(256)), j), c(128)) == mod(j, c(128))


def test_a_quotient_compared_is_its_dividend_compared_with_the_product():
    i, e = v("i"), k.TensorField(INDEX, "T0", "logical_size", 0)
    assert lt(div(i, e), c(3)) == k.Bin(DataType.Bool, "<", i, mul(c(3), e))
    # by a constant too (an axis made static): no division left in a predicate
    assert lt(div(i, c(4)), e) == k.Bin(DataType.Bool, "<", i, mul(e, c(4)))
    assert lt(div(div(i, c(5)), e), e) == k.Bin(DataType.Bool, "<", i, mul(mul(e, e), c(5)))
