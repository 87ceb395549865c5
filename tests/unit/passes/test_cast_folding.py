"""Consecutive-cast folding: exactly the chains whose first cast loses nothing fold, and
the NumPy reference gives the same results before and after, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.printer import print_math
from fuser_core.passes import run_presegmentation_passes
from fuser_core.passes.cast_folding import fold_consecutive_casts

from ._helpers import applied, assert_names_kept, assert_same_results, op_names, random_values, reference, tensor_uses

B, I32, I64 = DataType.Bool, DataType.Int32, DataType.Int
H, BF, F, D = DataType.Half, DataType.BFloat16, DataType.Float, DataType.Double
E4M3, E5M2 = DataType.Float8_e4m3fn, DataType.Float8_e5m2
MAIN = (B, I32, I64, H, BF, F, D)

# Which wider types hold every value of a type exactly, written out independently of
# the pass: the rule under test is "fold when the middle type is one of these".
HOLDS = {
    B: {I32, I64, H, BF, F, D},
    I32: {I64, D},
    I64: set(),
    H: {F, D},
    BF: {F, D},
    F: {D},
    D: set(),
}

CHAINS = [
    pytest.param(src, mid, dst, id=f"{src.name}-{mid.name}-{dst.name}")
    for src in MAIN
    for mid in MAIN
    for dst in MAIN
    if mid not in (src, dst)
]


def chain(*dtypes: DataType) -> FusionDefinition:
    """x of dtypes[0], cast to each of the others in turn; the last is the output."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtypes[0])
        for dtype in dtypes[1:]:
            t = fd.ops.cast(t, dtype)
        fd.add_output(fd.ops.abs(t) if dtypes[-1] != B else fd.ops.logical_not(t))
    return fd


@pytest.mark.parametrize(("src", "mid", "dst"), CHAINS)
def test_a_chain_folds_exactly_when_the_middle_type_holds_the_source(src, mid, dst):
    fd = chain(src, mid, dst)
    fusion, changed = applied(fd.fusion, fold_consecutive_casts)
    folds = mid in HOLDS[src]
    assert changed == folds
    casts = [name for name in op_names(fusion) if name in ("cast", "set")]
    if not folds:
        assert casts == ["cast", "cast"]
    else:
        assert casts == (["set"] if dst == src else ["cast"])  # there and back is a copy
        assert fusion.exprs()[0].inputs[0] is fusion.inputs[0]
    assert_names_kept(fd.fusion, fusion)
    assert_same_results(fd.fusion, fusion, [random_values([512], src, seed=len(CHAINS))])


@pytest.mark.parametrize(
    ("dtypes", "value"),
    [
        ((F, H, D), 1e5),  # Half overflows
        ((F, H, D), 1.0 + 2.0**-20),  # Half rounds
        ((I64, I32, D), 2**40 + 3),  # int32 wraps
        ((D, F, H), 1.0 + 2.0**-11 + 2.0**-40),  # two roundings: Float lands on Half's tie
    ],
    ids=["half-overflows", "half-rounds", "int32-wraps", "double-rounding"],
)
def test_the_chains_left_alone_would_change_a_value(dtypes, value):
    """Why a lossy middle type blocks the fold: the direct cast gives another value."""
    x = np.array([value], dtype=dtypes[0].numpy)
    through = reference(chain(*dtypes).fusion, [x])[0]
    direct = reference(chain(dtypes[0], dtypes[-1]).fusion, [x])[0]
    assert not np.array_equal(through, direct)
    assert not fold_consecutive_casts(chain(*dtypes).fusion.clone()[0])


def fp8_input(dtype: DataType) -> np.ndarray:
    values = random_values([256], F, seed=3) / 1e3
    values[:3] = [np.inf, -np.inf, 500.0]
    return values.astype(dtype.numpy) if dtype != F else values


@pytest.mark.parametrize(
    ("dtypes", "folds"),
    [
        ((F, D, E4M3), False),  # Double to fp8 rounds through Half: a second rounding
        ((F, D, E5M2), False),
        ((H, D, E4M3), True),  # ... which loses nothing when the value is a Half already
        ((BF, F, E5M2), True),
        ((E4M3, H, E4M3), True),  # there and back: a copy
        ((E5M2, F, E5M2), False),  # the way back saturates infinity to 57344
        ((E4M3, F, E5M2), False),  # nvFuser has no fp8 to fp8 conversion
    ],
    ids=lambda v: "-".join(d.name for d in v) if isinstance(v, tuple) else str(v),
)
def test_fp8_chains(dtypes, folds):
    fd = chain(*dtypes)
    fusion, changed = applied(fd.fusion, fold_consecutive_casts)
    assert changed == folds
    assert_same_results(fd.fusion, fusion, [fp8_input(dtypes[0])])


def test_e5m2_infinity_does_not_survive_the_round_trip():
    x = np.array([np.inf, -np.inf, 1.0], dtype=E5M2.numpy)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=E5M2)
        fd.add_output(fd.ops.cast(fd.ops.cast(t, F), E5M2))
    (out,) = reference(fd.fusion, [x])
    np.testing.assert_array_equal(out.astype(np.float32), [57344.0, -57344.0, 1.0])


def test_a_long_chain_folds_whole():
    fd = chain(BF, F, D, H)
    fusion, changed = applied(fd.fusion, fold_consecutive_casts)
    assert changed
    (cast, _abs) = fusion.exprs()
    assert (cast.inputs[0], cast.outputs[0].dtype) == (fusion.inputs[0], H)
    assert [u.op_name for u in tensor_uses(fusion.inputs[0])] == ["cast"]  # the others are gone
    assert_same_results(fd.fusion, fusion, [random_values([300], BF)])


def test_a_middle_cast_with_other_uses_stays_and_only_this_use_is_rewired():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=BF)
        wide = fd.ops.cast(x, F)
        fd.add_output(fd.ops.cast(wide, H))
        fd.add_output(fd.ops.exp(wide))
    fusion, changed = applied(fd.fusion, fold_consecutive_casts)
    assert changed
    assert print_math(fusion).split("%kernel_math {\n")[1] == (
        "T2_g[ iS2{i0} ]\n"
        "   = __bfloat2half(T0_g[ iS0{i0} ]);\n"
        "T1_l[ iS1{i0} ]\n"
        "   = __bfloat2float(T0_g[ iS0{i0} ]);\n"
        "T3_g[ iS3{i0} ]\n"
        "   = expf(T1_l[ iS1{i0} ]);\n"
        "}\n"
    )
    to_half, to_float = (e for e in fusion.exprs() if e.op_name == "cast")
    assert to_half.outputs[0].dtype == H and to_half.inputs[0] is fusion.inputs[0]
    assert to_float.outputs[0].dtype == F and [u.op_name for u in to_float.outputs[0].uses] == ["exp"]
    assert_same_results(fd.fusion, fusion, [random_values([64], BF)])


def test_a_round_trip_copy_is_then_removed_by_the_pipeline_unless_it_is_an_output():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=H)
        back = fd.ops.cast(fd.ops.cast(x, D), H)
        fd.add_output(fd.ops.abs(back))
        fd.add_output(fd.ops.cast(fd.ops.cast(x, F), H))  # a copy of an input: stays
    fusion, _ = fd.fusion.clone()
    run_presegmentation_passes(fusion)
    assert sorted(op_names(fusion)) == ["abs", "set"]
    abs_op = next(e for e in fusion.exprs() if e.op_name == "abs")
    assert abs_op.inputs[0] is fusion.inputs[0]
    assert sorted(u.op_name for u in tensor_uses(fusion.inputs[0])) == ["abs", "set"]
    assert_same_results(fd.fusion, fusion, [random_values([64], H)])
