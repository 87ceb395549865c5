"""Dead-code removal: dead tensor expressions leave their inputs' use lists, live ones
and everything printed stay."""

from __future__ import annotations

from fuser_core import DataType, FusionDefinition, load_repro
from fuser_core.ir.printer import print_math
from fuser_core.passes.dead_code import remove_dead_code

from ._helpers import applied, assert_names_kept, assert_same_results, random_values, tensor_uses


def test_the_dead_half_of_issue_785_leaves_the_use_list_of_its_input():
    (loaded,) = load_repro("sample_fusions/issue785_reduction_pow.py").definitions
    original = loaded.fd.fusion
    t6 = original.inputs[1]
    assert sorted(u.op_name for u in tensor_uses(t6)) == ["mul", "pow"]
    fusion, changed = applied(original, remove_dead_code)
    assert changed
    assert [u.op_name for u in tensor_uses(fusion.inputs[1])] == ["pow"]
    assert print_math(fusion) == print_math(original)  # the dead op was never printed
    assert_names_kept(original, fusion)
    inputs = [random_values([2, 3, 4], DataType.Float, seed) for seed in (1, 2)]
    assert_same_results(original, fusion, inputs)


def test_a_dead_chain_goes_whole_and_a_second_run_finds_nothing():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        dead = fd.ops.exp(fd.ops.mul(x, x))
        fd.ops.neg(dead)
        fd.add_output(fd.ops.relu(x))
    fusion, changed = applied(fd.fusion, remove_dead_code)
    assert changed
    x = fusion.inputs[0]
    assert [u.op_name for u in tensor_uses(x)] == ["relu"]
    assert not remove_dead_code(fusion)
    assert_same_results(fd.fusion, fusion, [random_values([3, 4], DataType.Float)])


def test_a_welford_with_one_output_in_use_stays():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        _var, mean = fd.ops.var_mean(x, [1])  # var is dead, the Welford it reads is not
        fd.add_output(mean)
    fusion, _ = applied(fd.fusion, remove_dead_code)
    assert "Welford" in [u.op_name for u in tensor_uses(fusion.inputs[0])]
    assert "Welford" in print_math(fusion)
    assert_same_results(fd.fusion, fusion, [random_values([3, 8], DataType.Float)])


def test_a_dead_factory_leaves_the_scalar_it_reads():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fill = fd.define_scalar(dtype=DataType.Float)
        fd.ops.full([4], fill, DataType.Float)  # dead: reads only scalars
        fd.add_output(fd.ops.mul(x, fill))
    original_uses = [u.op_name for u in fd.fusion.inputs[1].uses]
    assert "full" in original_uses
    fusion, changed = applied(fd.fusion, remove_dead_code)
    assert changed
    assert "full" not in [u.op_name for u in fusion.inputs[1].uses]
    assert_same_results(fd.fusion, fusion, [random_values([5], DataType.Float), 1.5])


def test_a_fusion_without_dead_code_is_left_as_it_is():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
        fd.add_output(fd.ops.sum(x, [0]))
    fusion, changed = applied(fd.fusion, remove_dead_code)
    assert not changed
    assert sorted(u.op_name for u in tensor_uses(fusion.inputs[0])) == ["exp", "reduction"]
