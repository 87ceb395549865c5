"""cat(..., manual_padding=True): the inputs are the user's own pads to the full size.
Anything else is refused when defined, naming cat and the tensor."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition

MESSAGE = "with manual_padding every input must be a pad output of the full size"


def test_inputs_that_are_not_pads_are_refused_when_defined() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        a = fd.define_tensor([-1], [True])
        b = fd.define_tensor([-1], [True])
        fd.ops.cat([a, b], 0, manual_padding=True)
    assert info.value.op == "cat"
    assert info.value.tensor == "T0"
    assert MESSAGE in info.value.message
    assert "T0 is a fusion input" in info.value.message


def test_an_input_made_by_another_op_is_named() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        a = fd.define_tensor([-1], [True])
        left = fd.ops.pad(a, [0, 3])
        right = fd.ops.neg(fd.ops.pad(a, [3, 0]))
        fd.ops.cat([left, right], 0, manual_padding=True)
    assert info.value.tensor == "T3"
    assert "T3 is made by neg" in info.value.message


def test_manual_pads_concatenate() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.arange(8, dtype=np.float32).reshape(2, 4) + 100
    with FusionDefinition() as fd:
        a = fd.define_tensor([2, 3], [True, True])
        b = fd.define_tensor([2, 4], [True, True])
        out = fd.ops.cat([fd.ops.pad(a, [0, 4]), fd.ops.pad(b, [3, 0])], 1, manual_padding=True)
        fd.add_output(out)
    assert "= cat(" in fd.fusion_ir()
    (result,) = fd.execute([x, y])
    np.testing.assert_array_equal(result, np.concatenate([x, y], axis=1))


def test_manual_pads_with_runtime_sizes_concatenate() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1], [True])
        b = fd.define_tensor([-1], [True])
        n_a, n_b = fd.ops.size(a, 0), fd.ops.size(b, 0)
        out = fd.ops.cat([fd.ops.pad(a, [0, n_b]), fd.ops.pad(b, [n_a, 0])], 0, manual_padding=True)
        fd.add_output(out)
    x, y = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0, 5.0], np.float32)
    (result,) = fd.execute([x, y])
    np.testing.assert_array_equal(result, [1.0, 2.0, 3.0, 4.0, 5.0])


@pytest.mark.parametrize(
    ("widths", "culprit", "detail"),
    [
        ([[0, 4], [0, 3]], "T3", "holds elements [0, 4) of axis 0 padded to 7, but its piece of the 7 is [3, 7)"),
        ([[0, 4], [3, 1]], "T3", "padded to 8"),
        ([[1, 3], [3, 0]], "T2", "holds elements [1, 4) of axis 0 padded to 7, but its piece of the 7 is [0, 3)"),
    ],
    ids=["second-not-shifted", "second-too-long", "first-shifted"],
)
def test_pads_that_do_not_tile_the_axis_are_refused(widths: list[list[int]], culprit: str, detail: str) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        a = fd.define_tensor([3], [True])
        b = fd.define_tensor([4], [True])
        fd.ops.cat([fd.ops.pad(a, widths[0]), fd.ops.pad(b, widths[1])], 0, manual_padding=True)
    assert info.value.op == "cat"
    assert info.value.tensor == culprit
    assert MESSAGE in info.value.message and detail in info.value.message


def test_cat_without_manual_padding_still_pads_itself() -> None:
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1], [True], dtype=DataType.Int)
        b = fd.define_tensor([-1], [True], dtype=DataType.Int)
        fd.add_output(fd.ops.cat([a, b], 0))
    (result,) = fd.execute([np.array([1, 2]), np.array([3])])
    np.testing.assert_array_equal(result, [1, 2, 3])
