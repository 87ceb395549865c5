"""No-op removal: plain sets, empty squeezes and broadcasts, same-shape reshapes and
expands that expand nothing go; permutes, segment_sets and output copies stay."""

from __future__ import annotations

import numpy as np

from fuser_core import DataType, FusionDefinition
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.op_types import UnaryOpType
from fuser_core.ir.printer import print_math
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import ExpandOp, ViewOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops import arith
from fuser_core.passes import run_presegmentation_passes
from fuser_core.passes.noop_removal import remove_noop_ops, same_extent

from ._helpers import (
    applied,
    assert_names_kept,
    assert_same_results,
    op_names,
    output_names,
    random_values,
    tensor_uses,
)


def x_values(shape=(2, 3)) -> list[np.ndarray]:
    return [random_values(list(shape), DataType.Float)]


def test_every_kind_of_noop_in_a_chain_goes_and_the_consumer_reads_the_input():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float)
        t = fd.ops.squeeze(x, dims=[])
        t = fd.ops.broadcast(t, [False, False])
        t = fd.ops.set(t)
        fd.add_output(fd.ops.exp(t))
    assert op_names(fd.fusion) == ["squeeze", "broadcast", "set", "exp"]
    fusion, changed = applied(fd.fusion, remove_noop_ops)
    assert changed
    assert op_names(fusion) == ["exp"]
    assert fusion.exprs()[0].inputs[0] is fusion.inputs[0]
    assert [u.op_name for u in tensor_uses(fusion.inputs[0])] == ["exp"]
    assert_names_kept(fd.fusion, fusion)
    assert_same_results(fd.fusion, fusion, x_values())


def same_shape_op(fusion: Fusion, inp: TensorView, kind: str) -> TensorView:
    """A reshape or an expand to the input's own shape, then a neg of it (the frontend
    makes a set of those; concretization or other passes may leave these)."""
    with fusion.guard():
        out = TensorView(TensorDomain([d.clone_with() for d in inp.logical]), inp.dtype)
        if kind == "reshape":
            ViewOp(out, inp)
        else:
            ExpandOp(out, inp, [d.maybe_expanded_extent for d in inp.logical])
        result = arith.unary(UnaryOpType.Neg, out)
    return result  # type: ignore[return-value]


def test_a_reshape_and_an_expand_to_the_same_shape_go():
    with FusionDefinition() as fd:
        fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float)
    original = fd.fusion
    x = original.inputs[0]
    original.add_output(same_shape_op(original, same_shape_op(original, x, "reshape"), "expand"))
    assert op_names(original) == ["reshape", "neg", "expand", "neg"]
    fusion, changed = applied(original, remove_noop_ops)
    assert changed
    assert op_names(fusion) == ["neg", "neg"]
    assert_same_results(original, fusion, x_values())


def test_extents_are_compared_by_value_or_by_structure():
    with FusionDefinition() as fd:
        fd.define_scalar(dtype=DataType.Int)
        fd.define_scalar(dtype=DataType.Int)
    with fd.fusion.guard():
        a, b = fd.fusion.inputs
        assert same_extent(Scalar(DataType.Index, 6), Scalar(DataType.Index, 6))
        assert not same_extent(Scalar(DataType.Index, 6), Scalar(DataType.Index, 7))
        assert same_extent(sm.mul(a, b), sm.mul(a, b))
        assert not same_extent(sm.mul(a, b), sm.add(a, b))
        assert not same_extent(a, b)


def test_ops_that_do_something_stay():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float)
        t = fd.ops.permute(x, [1, 0])
        t = fd.ops.broadcast(t, [False, True, False])
        t = fd.ops.squeeze(t, dims=[1])
        t = fd.ops.reshape(t, [6])
        t = fd.ops.segment_set(t)
        fd.add_output(fd.ops.exp(t))
    fusion, changed = applied(fd.fusion, remove_noop_ops)
    assert not changed
    assert op_names(fusion) == op_names(fd.fusion) == ["set", "broadcast", "squeeze", "reshape", "segment_set", "exp"]
    assert "Set.Permute" in print_math(fusion)


def test_a_copy_of_an_input_or_of_another_output_stays_as_an_output():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.set(x))  # would alias the caller's input
        r = fd.ops.relu(x)
        fd.add_output(r)
        fd.add_output(fd.ops.set(r))  # would be a second output sharing r's buffer
    fusion, changed = applied(fd.fusion, remove_noop_ops)
    assert not changed
    assert op_names(fusion) == ["set", "relu", "set"]
    assert_same_results(fd.fusion, fusion, x_values())


def test_a_copy_of_an_intermediate_as_an_output_hands_the_output_to_the_intermediate():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float)
        r = fd.ops.relu(x)
        fd.add_output(fd.ops.set(r), stride_order=[0, 1])
        fd.add_output(fd.ops.exp(r))
    original = fd.fusion
    assert output_names(original) == ["T2", "T3"]
    fusion, changed = applied(original, remove_noop_ops)
    assert changed
    assert output_names(fusion) == ["T1", "T3"]  # relu's own tensor, its name kept
    assert print_math(fusion) == (
        "Inputs:\n"
        "  T0_g[ iS0{2}, iS1{3} ], float\n"
        "Outputs:\n"
        "  T1_g[ iS2{2}, iS3{3} ], float\n"
        "  T3_g[ iS6{2}, iS7{3} ], float\n"
        "\n"
        "%kernel_math {\n"
        "T1_g[ iS2{2}, iS3{3} ]\n"
        "   = relu(T0_g[ iS0{2}, iS1{3} ]);\n"
        "T3_g[ iS6{2}, iS7{3} ]\n"
        "   = expf(T1_g[ iS2{2}, iS3{3} ]);\n"
        "}\n"
    )
    (required,) = fusion.output_stride_order
    assert required is fusion.outputs[0] and fusion.output_stride_order[required] == [0, 1]
    assert_names_kept(original, fusion)
    assert_same_results(original, fusion, x_values())


def test_the_pipeline_removes_a_concretized_same_shape_reshape():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.relu(fd.ops.reshape(x, [x.size(0), x.size(1)])))
    runtime = fd.runtime_for(x_values((4, 5)))
    by_name = {r.name: r for r in runtime.compiled.passes}
    assert by_name["noop_removal"].changed
    assert "Set(" not in (by_name["noop_removal"].ir_after or "")
    (out,) = fd.execute(x_values((4, 5)))
    np.testing.assert_array_equal(out, np.maximum(x_values((4, 5))[0], 0))


def test_the_whole_list_keeps_the_results_of_a_mix_of_noops():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float)
        same = fd.ops.reshape(x, [2, 3])
        copy = fd.ops.set(fd.ops.relu(same))
        fd.add_output(fd.ops.exp(copy))
        fd.add_output(fd.ops.set(x))
        fd.add_output(fd.ops.segment_set(fd.ops.neg(x)))
    fusion, _ = fd.fusion.clone()
    run_presegmentation_passes(fusion)
    assert sorted(op_names(fusion)) == ["exp", "neg", "relu", "segment_set", "set"]
    assert_same_results(fd.fusion, fusion, x_values())
