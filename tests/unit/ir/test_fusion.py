"""The Fusion container: deterministic names, traversal order, deep clones."""

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.printer import print_kernel, print_math


def two_outputs() -> FusionDefinition:
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=True)
        b = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.ops.sin(a)  # dead: reaches no output
        c = fd.ops.add(a, b)
        fd.add_output(fd.ops.sum(c, dims=[1]))
        fd.add_output(fd.ops.mul(b, 2.0))
    return fd


def test_names_are_deterministic_per_definition():
    assert print_kernel(two_outputs().fusion) == print_kernel(two_outputs().fusion)


def test_exprs_reach_outputs_in_output_order_and_skip_dead_code():
    fusion = two_outputs().fusion
    assert [e.op_name for e in fusion.exprs()] == ["add", "reduction", "mul"]
    assert "sin" not in print_math(fusion)


def test_clone_keeps_names_and_is_independent():
    fd = two_outputs()
    clone, mapping = fd.fusion.clone()
    assert print_kernel(clone) == print_kernel(fd.fusion)
    original_out = fd.fusion.outputs[0]
    copied_out = mapping[id(original_out)]
    assert copied_out is not original_out and copied_out.name == original_out.name
    assert copied_out.fusion is clone and copied_out.definition.fusion is clone
    # Scheduling the clone leaves the original alone, and new statements continue its numbering.
    with clone.guard():
        copied_out.split(0, 4)
    assert "Split:" in print_kernel(clone) and "Split:" not in print_kernel(fd.fusion)
    assert copied_out.loop[0].name == clone.statements()[-1].outputs[0].name  # type: ignore[attr-defined]


def test_uses_and_definitions_are_linked():
    fd = two_outputs()
    a, b = fd.fusion.inputs
    assert a.definition is None
    assert sorted(e.op_name for e in b.uses) == ["add", "mul"]
    assert fd.fusion.outputs[1].definition.inputs[0] is b
    assert all(v.dtype == DataType.Float for v in fd.fusion.outputs)
