"""The pass list and its manager: order, reasons, and the record of every pass."""

from __future__ import annotations

import dataclasses

import pytest

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.printer import print_math
from fuser_core.passes import PRESEGMENTATION_PASSES, PassRecord, run_presegmentation_passes

from ._helpers import assert_same_results, column_major, random_values

ORDER = [
    "dead_code_removal",
    "consecutive_cast_folding",
    "noop_removal",
    "output_stride_order",
    "allocation_order_inference",
]


def every_pass_has_work() -> FusionDefinition:
    """A dead op, a foldable cast chain, a plain copy, a user stride_order and a
    column-major input whose layout an output can take."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        fd.ops.exp(y)  # dead
        half = fd.ops.cast(fd.ops.cast(x, DataType.Float), DataType.Half)
        fd.add_output(half, stride_order=[0, 1])
        fd.add_output(fd.ops.relu(fd.ops.set(y)))
    return fd


def nothing_to_do() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.relu(x))
    return fd


def inputs_of_every_pass_has_work() -> list:
    return [random_values([5, 6], DataType.BFloat16), column_major(random_values([5, 6], DataType.Float, 1))]


def test_the_list_holds_every_pass_once_in_its_order_with_a_reason():
    assert [name for name, _, _ in PRESEGMENTATION_PASSES] == ORDER
    assert all(callable(function) for _, function, _ in PRESEGMENTATION_PASSES)
    assert all(len(why) > 20 for _, _, why in PRESEGMENTATION_PASSES)


def test_the_records_name_every_pass_in_order_and_say_which_changed_the_ir():
    fusion, _ = every_pass_has_work().fusion.clone()
    records = run_presegmentation_passes(fusion)
    assert [r.name for r in records] == ORDER
    assert [r.changed for r in records] == [True] * 5
    assert all(r.seconds >= 0 for r in records)
    assert records[-1].ir_after == print_math(fusion)


def test_nothing_changed_is_recorded_as_such():
    fusion, _ = nothing_to_do().fusion.clone()
    before = print_math(fusion)
    records = run_presegmentation_passes(fusion)
    assert [r.changed for r in records] == [False] * 5
    assert all(r.ir_after == before for r in records)


def test_each_record_holds_the_ir_right_after_its_pass():
    original = every_pass_has_work().fusion
    recorded, _ = original.clone()
    records = run_presegmentation_passes(recorded)
    stepped, _ = original.clone()
    for record, (name, function, _) in zip(records, PRESEGMENTATION_PASSES, strict=True):
        assert function(stepped) == record.changed, name
        assert record.ir_after == print_math(stepped), name
    # The IR after cast folding and no-op removal differ: the record is per pass.
    assert records[1].ir_after != records[2].ir_after


def test_without_record_ir_no_text_is_kept():
    fusion, _ = every_pass_has_work().fusion.clone()
    records = run_presegmentation_passes(fusion, record_ir=False)
    assert [r.name for r in records] == ORDER
    assert all(r.ir_after is None for r in records)


def test_a_second_run_changes_nothing():
    fusion, _ = every_pass_has_work().fusion.clone()
    run_presegmentation_passes(fusion)
    after_first = print_math(fusion)
    records = run_presegmentation_passes(fusion)
    assert [r.changed for r in records] == [False] * 5
    assert print_math(fusion) == after_first


def test_the_whole_list_keeps_the_reference_results():
    original = every_pass_has_work().fusion
    rewritten, _ = original.clone()
    run_presegmentation_passes(rewritten)
    assert_same_results(original, rewritten, inputs_of_every_pass_has_work())


def test_a_record_is_frozen():
    record = PassRecord("dead_code_removal", 0.0, False, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.changed = True  # type: ignore[misc]
